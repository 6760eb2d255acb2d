"""Controlling the chat model from the chat screen: Escape stops a reply (and keeps what
arrived), ``/model`` switches the model, ``model.max_tokens`` caps a reply.

Driven with ``App.run_test`` like ``test_tui_chat``: the tiny model in-process (MLX) or
behind a real ``mlx_lm.server``, a real store, a real config.yaml in HERMES_TUI_HOME.
"""

from __future__ import annotations

import time
from pathlib import Path

import yaml
from support.chat_app import (
    REPLY,
    SIZE,
    GatedSummarizer,
    app_for,
    app_test,
    label,
    notes,
    settle,
    store_session,
    type_and_send,
    until,
    views,
)
from textual import events
from textual.widgets import Input, OptionList
from textual.widgets._footer import FooterKey

from hermes_tui.config import load_config
from hermes_tui.config.write import render_config_text
from hermes_tui.providers.mlx.runtime import MlxRuntime
from hermes_tui.providers.openai.chat import OpenAIChatClient
from hermes_tui.store import Store
from hermes_tui.tui.app import HermesApp
from hermes_tui.tui.screens.chat import ChatScreen
from hermes_tui.tui.screens.model_picker import ModelPicker
from hermes_tui.tui.screens.settings import SettingsScreen
from hermes_tui.tui.widgets.footer import ChatFooter
from hermes_tui.tui.widgets.message_views import AssistantMessage, MarkerMessage

LONG = 4000     # tokens: a reply that is still streaming when Escape is pressed
USER_COMMENT = "# my own note about the chat model\n"


def write_config(home: Path, config) -> Path:
    """The test's config as config.yaml in HERMES_TUI_HOME, with a comment of the user's own."""
    path = home / "config.yaml"
    path.write_text(USER_COMMENT + render_config_text(config), encoding="utf-8")
    return path


def replies(screen: ChatScreen) -> list[AssistantMessage]:
    return [v for v in views(screen) if isinstance(v, AssistantMessage)]


# --- Escape stops a reply ------------------------------------------------------------------


@app_test
async def test_escape_stops_a_streaming_reply_and_keeps_what_arrived(config, db_path):
    with Store(db_path) as store:
        app = HermesApp(config, store, reply_tokens=LONG)
        async with app.run_test(size=SIZE) as pilot:
            screen = app.screen
            await type_and_send(pilot, "Tell me a long story")
            await until(pilot, lambda: screen.turns.got_text, "the first piece of the reply")
            await pilot.pause(0.2)
            await pilot.press("escape")
            pressed = time.monotonic()
            await until(pilot, lambda: not screen.turns.replying, "the reply to stop")
            stopped_in = time.monotonic() - pressed
            assert stopped_in < 10 and not MlxRuntime.shared().busy  # the in-process model is free
            await settle(pilot, screen)

            session = screen.session
            reply = session.conv.messages[-1]
            assert reply.role == "assistant" and reply.meta["stopped"] is True and reply.content.strip()
            assert [m.role for m in session.conv.messages] == ["system", "user", "assistant"]
            (view,) = replies(screen)
            assert view.message is reply and view.has_class("-stopped")
            assert view.query_one("Markdown").source == reply.content
            assert str(view.query_one(".stopped-note").content) == "stopped"
            # A stopped turn did not finish normally: no pass ran for it (the spec), nothing counted.
            assert session.turns_completed == 0 and session.compactor.state.passes_total == 0
            # The request's cap (LONG) is past the 1,024-token window, so before the call the agent
            # loop asked for batch compaction, which had nothing to absorb yet.
            assert screen.passes.last_outcome in (None, "nothing_to_absorb")
            stored = store.load_active(session.info.id)
            assert [(m.id, m.content, m.meta.get("stopped")) for m in stored][-1] == (reply.id, reply.content, True)
            session_id = session.info.id

    # Resumed with room for what was kept: the tiny model's random text arrives at its own pace
    # and its estimate swings with the text (375 to 1,465 tokens for the same stop), while the
    # head (the system prompt and the first three messages) is never compacted to make room.
    with Store(db_path) as store:
        app = app_for(config.with_overrides({"model.context_length": 4096}), store, session_id=session_id)
        async with app.run_test(size=SIZE) as pilot:
            screen = app.screen
            await pilot.pause()
            (view,) = replies(screen)
            assert view.has_class("-stopped") and str(view.query_one(".stopped-note").content) == "stopped"
            assert view.query_one("Markdown").source == reply.content
            await type_and_send(pilot, "Go on")  # the conversation carries on after it
            await settle(pilot, screen)
            last = screen.session.conv.messages[-1]
            assert "stopped" not in last.meta and last.meta["usage"]["completion_tokens"] == REPLY
            assert not replies(screen)[-1].has_class("-stopped")
            assert screen.passes.last_outcome is not None  # this turn completed: its pass ran


def footer_keys(screen: ChatScreen) -> list[str]:
    """The keys the footer shows on screen (laid out, with a width), left to right."""
    keys = [key for key in screen.query_one(ChatFooter).query(FooterKey) if key.display and key.region.width]
    return [key.key for key in sorted(keys, key=lambda key: key.region.x)]


@app_test
async def test_the_footer_shows_escape_only_while_a_reply_is_written(config, store):
    # A stopped reply can run to hundreds of tokens on a loaded machine: the window must hold
    # it, the next message and a reply budget, or the guard refuses the second request.
    config = config.with_overrides({"model.context_length": 8192})
    app = HermesApp(config, store, reply_tokens=LONG)
    async with app.run_test(size=SIZE) as pilot:
        screen = app.screen
        await pilot.pause()
        idle = footer_keys(screen)
        assert "escape" not in idle and idle[:2] == ["ctrl+n", "ctrl+r"]
        await type_and_send(pilot, "Tell me a long story")
        await until(pilot, lambda: screen.turns.got_text, "the first piece of the reply")
        await pilot.pause(0.1)
        assert footer_keys(screen) == ["escape", *idle]
        await pilot.press("escape")
        await until(pilot, lambda: not screen.turns.replying, "the reply to stop")
        await settle(pilot, screen)
        await pilot.pause(0.1)
        assert footer_keys(screen) == idle

        # The terminal goes to the background while a reply is written, and the reply ends
        # there: the footer must not go on offering to stop it.
        await type_and_send(pilot, "Another one")
        await until(pilot, lambda: screen.turns.got_text, "the first piece of the second reply")
        app.post_message(events.AppBlur())
        await until(pilot, lambda: not app.app_focus, "the app to lose focus")
        screen.turns.stop()  # as a stop would (a key press would give the app its focus back)
        await until(pilot, lambda: not screen.turns.replying, "the second reply to stop")
        await settle(pilot, screen)
        await pilot.pause(0.1)
        assert not app.app_focus and footer_keys(screen) == idle


# --- /model ----------------------------------------------------------------------------------


@app_test
async def test_model_with_a_name_switches_the_chat_model_live(config, store, hermes_home, tiny_model):
    path = write_config(hermes_home, config)
    app = app_for(config, store, config_path=path)
    async with app.run_test(size=SIZE) as pilot:
        first = app.screen
        await type_and_send(pilot, "Hello")
        await settle(pilot, first)
        assert label(first, "model") == "fp32"
        session_id = first.session.info.id

        await type_and_send(pilot, f"/model {tiny_model.q4}")
        await until(pilot, lambda: isinstance(app.screen, ChatScreen) and app.screen is not first, "the switch")
        screen = app.screen
        await pilot.pause()
        assert screen.session.info.id == session_id  # the same conversation, a new chat client
        assert screen.session.chat.model_name == str(tiny_model.q4.resolve())
        assert label(screen, "model") == "q4"
        text = path.read_text(encoding="utf-8")
        assert text.startswith(USER_COMMENT)  # written in place: the user's comment stays
        assert load_config(path).model.model == str(tiny_model.q4.resolve())
        assert load_config(path).model.provider == "mlx"  # unchanged: it already runs MLX models

        await type_and_send(pilot, "And now?")
        await settle(pilot, screen)
        assert [m.role for m in screen.session.conv.messages] == ["system"] + ["user", "assistant"] * 2


@app_test
async def test_model_with_an_unknown_name_changes_nothing(config, store, hermes_home):
    path = write_config(hermes_home, config)
    before = path.read_text(encoding="utf-8")
    app = app_for(config, store, config_path=path)
    async with app.run_test(size=SIZE) as pilot:
        screen = app.screen
        await type_and_send(pilot, "/model no-such-model")
        await until(pilot, lambda: bool(notes(screen)), "the note")
        note = notes(screen)[-1]
        assert note.has_class("-warning") and "no-such-model" in note.text and "/models" in note.text
        assert app.screen is screen and path.read_text(encoding="utf-8") == before


@app_test
async def test_model_waits_for_a_pass_in_flight_then_switches(config, store, hermes_home, tiny_model):
    path = write_config(hermes_home, config)
    session_id = store_session(config, store, compacted=False)
    gated = GatedSummarizer()
    app = app_for(config, store, session_id=session_id, summarizer=gated, config_path=path)
    try:
        async with app.run_test(size=SIZE) as pilot:
            first = app.screen
            await type_and_send(pilot, "One more thing")
            await until(pilot, gated.started.is_set, "the pass to start")
            await type_and_send(pilot, f"/model {tiny_model.q4}")
            await until(pilot, lambda: any("once the reply" in n.text for n in notes(first)), "the waiting note")
            assert app.screen is first and load_config(path).model.model == str(tiny_model.fp32)

            gated.gate.set()
            await until(pilot, lambda: app.screen is not first and isinstance(app.screen, ChatScreen), "the switch")
            screen = app.screen
            await pilot.pause()
            assert label(screen, "model") == "q4"
            # The pass landed in the session before it was reopened: the new screen shows its marker.
            assert any(m.is_marker for m in screen.session.conv.messages)
            assert [v for v in views(screen) if isinstance(v, MarkerMessage)]
    finally:
        gated.gate.set()


@app_test
async def test_model_without_a_name_picks_from_local_and_endpoint_models(
    config, store, hermes_home, tiny_model, mlx_server,
):
    (hermes_home / "models").mkdir()
    (hermes_home / "models" / "tiny-q4").symlink_to(tiny_model.q4, target_is_directory=True)
    # An endpoint takes the tool definitions (over 2,000 tokens): the window must hold them.
    config = config.with_overrides({"model.base_url": mlx_server.base_url, "model.context_length": 8192})
    path = write_config(hermes_home, config)
    app = app_for(config, store, config_path=path)
    async with app.run_test(size=SIZE) as pilot:
        first = app.screen

        async def open_picker() -> ModelPicker:
            await type_and_send(pilot, "/model")
            await until(pilot, lambda: isinstance(app.screen, ModelPicker), "the picker")
            picker = app.screen
            await until(pilot, lambda: all(g is not None for g in picker.groups.values()), "both lists")
            return picker

        async def choose(picker: ModelPicker, where: str, value: str) -> None:
            option_id = next(i for i, c in picker._by_id.items() if c.where == where and c.value == value)
            picker.query_one(OptionList).highlighted = picker.query_one(OptionList).get_option_index(option_id)
            await pilot.press("enter")

        picker = await open_picker()
        local = {c.label: c for c in picker.groups["local"]}
        served = [c.value for c in picker.groups["endpoint"]]
        assert "tiny-q4" in local and mlx_server.model in served
        now = str(picker.query_one("#now").content)
        assert "fp32" in now and "extractive" in now
        await pilot.press("escape")  # cancels: nothing changes
        await until(pilot, lambda: app.screen is first, "the picker to close")
        assert load_config(path).model.model == str(tiny_model.fp32)

        # An endpoint model: the provider becomes openai-api, the chat client an endpoint client.
        await choose(await open_picker(), "endpoint", mlx_server.model)
        await until(pilot, lambda: isinstance(app.screen, ChatScreen) and app.screen is not first, "the switch")
        screen = app.screen
        saved = load_config(path).model
        assert (saved.provider, saved.model, saved.base_url) == ("openai-api", mlx_server.model, mlx_server.base_url)
        assert isinstance(screen.session.chat, OpenAIChatClient) and screen.session.chat.base_url == mlx_server.base_url
        assert label(screen, "model") == Path(mlx_server.model).name
        await type_and_send(pilot, "Hello, server")
        await settle(pilot, screen)
        assert screen.session.conv.messages[-1].meta["usage"]["completion_tokens"] == REPLY

        # Back to a model on this machine: provider mlx again, and the picker marks it in use.
        await choose(await open_picker(), "local", str(hermes_home / "models" / "tiny-q4"))
        await until(pilot, lambda: isinstance(app.screen, ChatScreen) and app.screen is not screen, "the switch back")
        assert load_config(path).model.provider == "mlx"
        assert label(app.screen, "model") == "tiny-q4"
        assert load_config(path).model.base_url == mlx_server.base_url  # kept for the next switch
        picker = await open_picker()
        marked = [o for o in picker.query_one(OptionList).options if str(o.prompt).startswith("●")]
        assert [str(o.prompt).split()[1] for o in marked] == ["tiny-q4"]
        await pilot.press("escape")


# --- model.max_tokens ------------------------------------------------------------------------


@app_test
async def test_the_settings_screen_shows_model_max_tokens_and_replies_follow_it(config, store, hermes_home):
    path = write_config(hermes_home, config)
    app = HermesApp(config, store, config_path=path)  # no reply cap of the app's own: the config's
    async with app.run_test(size=SIZE) as pilot:
        first = app.screen
        assert app.chat.max_tokens == 1024
        await type_and_send(pilot, "/settings")
        await until(pilot, lambda: isinstance(app.screen, SettingsScreen), "the settings screen")
        field = app.screen.query_one("#model--max_tokens", Input)
        assert field.value == "1024"
        field.value = "5"
        await pilot.press("ctrl+s")
        await until(pilot, lambda: isinstance(app.screen, ChatScreen) and app.screen is not first, "the new clients")
        assert yaml.safe_load(path.read_text(encoding="utf-8"))["model"]["max_tokens"] == 5
        assert app.chat.max_tokens == 5
        await type_and_send(pilot, "Hello")
        await settle(pilot, app.screen)
        usage = app.screen.session.conv.messages[-1].meta["usage"]
        assert usage["completion_tokens"] == 5 and usage["finish_reason"] == "length"


@app_test
async def test_settings_saved_during_a_pass_apply_once_it_lands(config, store, hermes_home):
    # The setup of the /model test above: a pass held in flight by the gated summarizer.
    path = write_config(hermes_home, config)
    session_id = store_session(config, store, compacted=False)
    gated = GatedSummarizer()
    app = app_for(config, store, session_id=session_id, summarizer=gated, config_path=path)
    try:
        async with app.run_test(size=SIZE) as pilot:
            first = app.screen
            old_chat = app.chat
            await type_and_send(pilot, "One more thing")
            await until(pilot, gated.started.is_set, "the pass to start")
            await type_and_send(pilot, "/settings")
            await until(pilot, lambda: isinstance(app.screen, SettingsScreen), "the settings screen")
            app.screen.query_one("#model--max_tokens", Input).value = "5"
            await pilot.press("ctrl+s")
            await until(pilot, lambda: app.screen is first, "the settings screen to close")
            assert any("once the reply and the passes in flight" in n.message for n in app._notifications)
            assert load_config(path).model.max_tokens == 5  # saved at once, applied later
            await pilot.pause(0.3)
            assert app.screen is first and app.chat is old_chat and first.passes.running  # still waiting

            gated.gate.set()
            await until(pilot, lambda: app.screen is not first and isinstance(app.screen, ChatScreen), "the new clients")
            screen = app.screen
            await pilot.pause()
            assert screen.session.info.id == session_id
            # The pass landed before the session was reopened: the reopened one has its marker.
            assert any(m.is_marker for m in screen.session.conv.messages)
            assert [v for v in views(screen) if isinstance(v, MarkerMessage)]
            assert app.chat is not old_chat and app.chat.max_tokens == 5 and screen.session.chat is app.chat
    finally:
        gated.gate.set()
