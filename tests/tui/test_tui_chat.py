"""The chat app as a person uses it: ``App.run_test`` with the real backend.

The chat model is the tiny random-weight model running in-process (MLX), so replies
are random tokens: tests assert on structure, counts and state, never on the text.
Passes use the extractive summarizer, or a gate around it that the test opens, so a
pass is provably in flight while the user goes on typing (the gate is a double for
the summarizer only; the chat and the store are real).
"""

from __future__ import annotations

import json
import time
from pathlib import Path

from support.chat_app import (
    REPLY,
    SIZE,
    FailingSummarizer,
    GatedMlxSummarizer,
    GatedSummarizer,
    RecordingSummarizer,
    app_for,
    app_test,
    coding_session,
    label,
    notes,
    settle,
    shown_ids,
    store_session,
    type_and_send,
    until,
    views,
)
from textual.command import CommandList, CommandPalette

from hermes_tui.cli import app as cli_app
from hermes_tui.cli import root as cli
from hermes_tui.store import Store
from hermes_tui.tui import commands
from hermes_tui.tui.app import HermesApp
from hermes_tui.tui.screens.chat import ChatScreen
from hermes_tui.tui.widgets.composer import Composer
from hermes_tui.tui.widgets.message_views import (
    AssistantMessage,
    MarkerMessage,
    SystemMessage,
    ToolCallView,
    ToolResultMessage,
    UserMessage,
)
from hermes_tui.tui.widgets.status_bar import StatusBar

# --- a turn --------------------------------------------------------------------------------


@app_test
async def test_a_message_streams_a_reply_and_the_status_counts_it(config, store, monkeypatch):
    written: list[str] = []
    original = AssistantMessage.write

    async def recording_write(self, text):
        written.append(text)
        await original(self, text)

    monkeypatch.setattr(AssistantMessage, "write", recording_write)
    app = app_for(config, store)
    async with app.run_test(size=SIZE) as pilot:
        screen = app.screen
        assert isinstance(screen, ChatScreen)
        await until(pilot, lambda: label(screen, "tokens") == "0 / 1,024", "the empty session's status")

        await type_and_send(pilot, "Hello there")
        # Shown at once (the turn's system prompt goes in front of it once the turn starts).
        assert [type(v) for v in views(screen) if not isinstance(v, SystemMessage)][0] is UserMessage
        await settle(pilot, screen)

        session = screen.session
        prompt, user, reply, no_tools = views(screen)
        assert isinstance(prompt, SystemMessage) and isinstance(user, UserMessage) and isinstance(reply, AssistantMessage)
        # The tiny model's template has no tool format: the turn ran without tools, and says so.
        assert no_tools.note_title == "No tools" and label(screen, "agent") == "tools off"
        assert [m.role for m in session.conv.messages] == ["system", "user", "assistant"]
        assert shown_ids(screen) == [m.id for m in session.conv.messages]
        content = session.conv.messages[-1].content
        assert "".join(written) == content and (written or not content)  # streamed piece by piece
        assert reply.query_one("Markdown").source == content
        assert session.conv.messages[-1].meta["usage"]["completion_tokens"] == REPLY
        assert [m.id for m in store.load_active(session.info.id)] == [m.id for m in session.conv.messages]
        tokens = session.conv.total_tokens
        assert tokens > 0 and label(screen, "tokens") == f"{tokens:,} / 1,024"
        assert label(screen, "passes") == "0 passes"  # the turn's pass ran, found nothing to absorb: not counted
        assert screen.passes.last_outcome == "nothing_to_absorb"
        assert label(screen, "activity") == "last: nothing_to_absorb"
        assert store.get_session(session.info.id).title == "Hello there"

        await type_and_send(pilot, "And again")
        await settle(pilot, screen)
        assert [n.note_title for n in notes(screen)] == ["No tools"]  # said once, not every turn


@app_test
async def test_the_input_stays_live_while_a_pass_runs_and_the_pass_lands(config, store):
    session_id = store_session(config, store, compacted=False)
    gated = GatedSummarizer()
    app = app_for(config, store, session_id=session_id, summarizer=gated)
    try:
        async with app.run_test(size=SIZE) as pilot:
            screen = app.screen
            await type_and_send(pilot, "First, what changed?")
            await until(pilot, gated.started.is_set, "the pass to start")
            assert screen.passes.running == "pass"
            await until(pilot, lambda: "pass…" in label(screen, "activity"), "the pass indicator")

            # The pass is held open: the user sends the next message and gets a reply meanwhile.
            composer = screen.query_one(Composer)
            assert composer.has_focus and not composer.disabled
            await type_and_send(pilot, "And the second question?")
            await until(pilot, lambda: not screen.turns.replying and len(screen.session.conv) == len(coding_session()) + 5,
                        "the second reply")
            assert screen.passes.running == "pass" and not gated.gate.is_set()
            assert [m.content for m in screen.session.conv.messages if m.role == "user"][-2:] == [
                "First, what changed?", "And the second question?"]
            assert len(screen.passes.queue.waiting) == 1  # the second turn's pass waits for the first
            assert not [v for v in views(screen) if isinstance(v, MarkerMessage)]

            gated.gate.set()
            await settle(pilot, screen)
            session = screen.session
            assert screen.passes.last_outcome in ("absorbed", "defrag", "nothing_to_absorb")
            assert session.compactor.state.passes_total == 2
            assert session.compactor.state.tokens_saved_total > 0
            markers = [v for v in views(screen) if isinstance(v, MarkerMessage)]
            assert len(markers) == 1 and markers[0].message_id == next(m.id for m in session.conv.messages if m.is_marker)
            assert shown_ids(screen) == [m.id for m in session.conv.messages]  # the list follows the splice
            assert [m.id for m in store.load_active(session.info.id)] == [m.id for m in session.conv.messages]
            assert "pass…" not in label(screen, "activity")
    finally:
        gated.gate.set()


@app_test
async def test_a_reply_queued_behind_a_pass_on_the_same_device_says_so(config, store):
    session_id = store_session(config, store, compacted=False)
    gated = GatedMlxSummarizer(config.model.model)
    app = app_for(config, store, session_id=session_id, summarizer=gated)
    try:
        async with app.run_test(size=SIZE) as pilot:
            screen = app.screen
            await type_and_send(pilot, "First")
            await until(pilot, gated.holding.is_set, "the pass to hold the device")
            await type_and_send(pilot, "Second")
            await until(pilot, lambda: "reply waits for it" in label(screen, "activity"), "the waiting notice")
            assert screen.turns.replying and screen.passes.running == "pass"
            gated.gate.set()
            await settle(pilot, screen)
            assert "waits" not in label(screen, "activity")
            assert [m.role for m in screen.session.conv.messages][-4:] == ["user", "assistant"] * 2
            assert screen.session.compactor.state.passes_total == 2
    finally:
        gated.gate.set()


@app_test
async def test_resume_after_restart_shows_the_same_messages_and_continues(config, db_path):
    with Store(db_path) as store:
        app = app_for(config, store)
        async with app.run_test(size=SIZE) as pilot:
            await type_and_send(pilot, "Remember this.")
            await settle(pilot, app.screen)
            session_id = app.screen.session.info.id
            # What the app said (the no-tools note) is not part of the session.
            first = [(v.__class__, v.message_id) for v in views(app.screen) if v.message_id is not None]

    with Store(db_path) as store:
        app = app_for(config, store, session_id=session_id)
        async with app.run_test(size=SIZE) as pilot:
            screen = app.screen
            await pilot.pause()
            assert [(v.__class__, v.message_id) for v in views(screen)] == first
            assert screen.query_one(Composer).inputs == ["Remember this."]
            await type_and_send(pilot, "And continue.")
            await settle(pilot, screen)
            assert [m.role for m in screen.session.conv.messages] == ["system"] + ["user", "assistant"] * 2
            assert len(store.load_active(session_id)) == 5


@app_test
async def test_a_failing_summarizer_does_not_stop_the_chat(config, store):
    session_id = store_session(config, store, compacted=False)
    app = app_for(config, store, session_id=session_id, summarizer=FailingSummarizer())
    async with app.run_test(size=SIZE) as pilot:
        screen = app.screen
        before = len(screen.session.conv)
        await type_and_send(pilot, "One")
        await settle(pilot, screen)
        assert screen.passes.last_outcome == "summarize_failed"
        assert label(screen, "activity") == "last: summarize_failed"
        assert screen.query_one(StatusBar).state("activity") == "-failed"
        await type_and_send(pilot, "Two")
        await settle(pilot, screen)
        session = screen.session
        assert len(session.conv) == before + 5  # the system prompt put in front, both turns kept, nothing spliced
        assert not any(m.is_marker for m in session.conv.messages)
        assert shown_ids(screen) == [m.id for m in session.conv.messages]


@app_test
async def test_a_pass_whose_summarizer_times_out_tells_why_and_what_to_change(config, store, caplog):
    from support.drip_server import DripServer

    with DripServer("silent") as server:
        config = config.with_overrides({
            "auxiliary.compression.provider": "openai-api",
            "auxiliary.compression.base_url": server.base_url,
            "auxiliary.compression.model": "small-model",
            "auxiliary.compression.timeout": 1,
        })
        session_id = store_session(config, store, compacted=False)
        app = app_for(config, store, session_id=session_id)
        with caplog.at_level("INFO", logger="hermes_tui"):
            async with app.run_test(size=SIZE) as pilot:
                screen = app.screen
                await type_and_send(pilot, "One")
                await settle(pilot, screen)
                assert screen.passes.last_outcome == "summarize_failed"
                told = [n for n in app._notifications if "did not answer within 1 s" in n.message]
                assert len(told) == 1, [n.message for n in app._notifications]
                assert "auxiliary.compression.timeout" in told[0].message and server.base_url in told[0].message
                assert "summarize_failed" in (told[0].title or "")

                await type_and_send(pilot, "Two")
                await settle(pilot, screen)
                # the same reason again is not told again
                assert len([n for n in app._notifications if "did not answer" in n.message]) == 1
                screen.run_slash("/usage")
                await until(pilot, lambda: any("auxiliary.compression.timeout" in str(n.text) for n in notes(screen)),
                            "the usage note")
    failed = [r.getMessage() for r in caplog.records if r.getMessage().startswith("Micro-compaction failed (timeout)")]
    assert failed and all("raise auxiliary.compression.timeout" in line for line in failed), failed
    telemetry_lines = [r.getMessage() for r in caplog.records if "micro_compaction" in r.getMessage()]
    assert telemetry_lines and not any("did not answer" in line for line in telemetry_lines)


@app_test
async def test_a_chat_model_that_is_not_there_says_what_to_do(config, store):
    broken = config.with_overrides({"model.model": str(Path(config.model.model).parent / "missing")})
    app = app_for(broken, store)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        from hermes_tui.tui.screens.first_run import FirstRunScreen

        assert isinstance(app.screen, FirstRunScreen)
        assert "missing" in app.screen.problem
        await pilot.press("escape")  # quits, as the screen's Escape does
        await pilot.pause()
    assert app.return_code == 0


@app_test
async def test_a_failed_reply_shows_the_problem_and_keeps_the_message(config, store):
    from hermes_tui.providers.openai.chat import OpenAIChatClient

    chat = OpenAIChatClient("http://127.0.0.1:9/v1", "m", timeout=2)  # nothing listens on port 9
    # An endpoint takes the tool definitions (over 2,000 tokens): the window must hold them.
    config = config.with_overrides({"model.context_length": 8192})
    app = app_for(config, store, chat=chat)
    async with app.run_test(size=SIZE) as pilot:
        screen = app.screen
        await type_and_send(pilot, "Are you there?")
        await settle(pilot, screen)
        note = notes(screen)[-1]
        assert note.has_class("-error") and "127.0.0.1:9" in note.text
        kept = store.load_active(screen.session.info.id)
        assert kept[0].is_system_prompt and [m.content for m in kept[1:]] == ["Are you there?"]
        assert not [v for v in views(screen) if isinstance(v, AssistantMessage)]


# --- slash commands --------------------------------------------------------------------------


@app_test
async def test_usage_summary_help_and_unknown_commands(config, store):
    session_id = store_session(config, store, compacted=True)
    app = app_for(config, store, session_id=session_id)
    async with app.run_test(size=SIZE) as pilot:
        screen = app.screen
        before = len(screen.session.conv)
        # (/model opens the model picker: tests/tui/test_tui_chat_controls.py)
        for command in ("/usage", "/summary", "/help", "/nonsense"):
            await type_and_send(pilot, command)
            await until(pilot, lambda command=command: len(notes(screen)) == ("/usage", "/summary", "/help",
                                                              "/nonsense").index(command) + 1, command)
        usage, summary, help_, unknown = notes(screen)
        u = screen.session.usage()
        assert usage.note_title == "Usage" and f"{u['tokens']:,}" in usage.text and "1,024 tokens" in usage.text
        assert "micro passes" in usage.text and f"{u['tokens_saved']:,}" in usage.text
        assert "compression model speed" in usage.text
        assert summary.text == screen.session.compactor.rolling_summary != ""
        assert all(c.usage in help_.text for c in commands.COMMANDS) and "Ctrl+J" in help_.text
        assert unknown.has_class("-warning") and "/nonsense" in unknown.text
        assert not screen.turns.replying and len(screen.session.conv) == before  # nothing was sent


@app_test
async def test_compact_with_a_focus_topic_runs_batch_compaction(config, store):
    session_id = store_session(config, store, compacted=False)
    summarizer = RecordingSummarizer()
    app = app_for(config, store, session_id=session_id, summarizer=summarizer)
    async with app.run_test(size=SIZE) as pilot:
        screen = app.screen
        users = [m.content for m in screen.session.conv.messages if m.role == "user"]
        await type_and_send(pilot, "/compact the empty-input bug")
        await settle(pilot, screen)
        assert [r.focus for r in summarizer.requests] and {r.kind for r in summarizer.requests} == {"batch"}
        assert summarizer.requests[0].focus == "the empty-input bug"
        session = screen.session
        assert session.compactor.batch_compactions == 1
        assert [m.content for m in session.conv.messages if m.role == "user"] == users
        assert "Compacted:" in notes(screen)[-1].text
        markers = [v for v in views(screen) if isinstance(v, MarkerMessage)]
        assert len(markers) == 1 and markers[0].message.meta["compaction"] == "batch"
        assert shown_ids(screen) == [m.id for m in session.conv.messages]


@app_test
async def test_new_starts_an_empty_session_and_quit_quits(config, store):
    session_id = store_session(config, store, compacted=False)
    app = app_for(config, store, session_id=session_id)
    async with app.run_test(size=SIZE) as pilot:
        first = app.screen
        await type_and_send(pilot, "/new")
        await until(pilot, lambda: app.screen is not first and isinstance(app.screen, ChatScreen), "the new session")
        assert app.screen.session.info.id != session_id and views(app.screen) == []
        assert len(store.list_sessions()) == 2
        await pilot.press("ctrl+n")
        await until(pilot, lambda: len(store.list_sessions()) == 3, "ctrl+n")
        await type_and_send(pilot, "/quit")
        await pilot.pause()
    assert app.return_code == 0


@app_test
async def test_a_pass_still_lands_in_its_session_after_new(config, store):
    session_id = store_session(config, store, compacted=False)
    gated = GatedSummarizer()
    app = app_for(config, store, session_id=session_id, summarizer=gated)
    try:
        async with app.run_test(size=SIZE) as pilot:
            first = app.screen
            await type_and_send(pilot, "One more thing")
            await until(pilot, gated.started.is_set, "the pass to start")
            await pilot.press("ctrl+n")
            await until(pilot, lambda: app.screen is not first, "the new session")
            gated.gate.set()
            await until(pilot, lambda: any(m.is_marker for m in store.load_active(session_id)), "the old pass to land")
            assert views(app.screen) == [] and not app.screen.busy
    finally:
        gated.gate.set()


@app_test
async def test_the_command_palette_runs_slash_commands(config, store):
    app = app_for(config, store)
    async with app.run_test(size=SIZE) as pilot:
        screen = app.screen
        await pilot.press("ctrl+p")
        await pilot.pause()
        await pilot.press(*"usage")
        await until(pilot, lambda: isinstance(app.screen, CommandPalette)
                    and app.screen.query_one(CommandList).option_count > 0, "palette hits", timeout=10)
        await pilot.press("enter")
        await until(pilot, lambda: bool(notes(screen)), "the usage note", timeout=10)
        assert notes(screen)[0].note_title == "Usage"


# --- the composer ----------------------------------------------------------------------------


@app_test
async def test_history_recall_and_newlines(config, store):
    app = app_for(config, store)
    async with app.run_test(size=SIZE) as pilot:
        composer = app.screen.query_one(Composer)
        for command in ("/usage", "/summary"):  # commands go into the history too, without a model call
            await type_and_send(pilot, command)
        await pilot.pause()
        composer.insert("draft")
        await pilot.press("up")
        assert composer.text == "/summary"
        await pilot.press("up")
        assert composer.text == "/usage"
        await pilot.press("up")  # the oldest stays
        assert composer.text == "/usage"
        await pilot.press("down")
        assert composer.text == "/summary"
        await pilot.press("down")
        assert composer.text == "draft"

        composer.clear()
        await pilot.press("a", "ctrl+j", "b")
        assert composer.text == "a\nb"
        await pilot.press("up")  # on the second line: moves the cursor, does not recall
        assert composer.text == "a\nb" and composer.cursor_location[0] == 0
        await pilot.press("up")
        assert composer.text == "/summary"


@app_test
async def test_slash_completion(config, store):
    app = app_for(config, store)
    async with app.run_test(size=SIZE) as pilot:
        screen = app.screen
        composer = screen.query_one(Composer)
        hints = screen.query_one("#hints")
        composer.focus()
        await pilot.press("/", "c", "o")
        await pilot.pause()
        assert composer.suggestion == "mpact"
        assert hints.display and "/compact [focus topic]" in str(hints.content)
        await pilot.press("tab")
        assert composer.text == "/compact "
        await pilot.pause()
        assert not hints.display

        composer.clear()
        await pilot.press("/", "s")
        await pilot.pause()
        shown = str(hints.content)
        assert all(f"/{name}" in shown for name in ("sessions", "summary", "settings"))
        await pilot.press("e", "s", "right")
        assert composer.text == "/sessions"


# --- tool calls and the marker -----------------------------------------------------------------


@app_test
async def test_tool_calls_render_collapsed_and_expand(config, store):
    session_id = store_session(config, store, compacted=False)
    app = app_for(config, store, session_id=session_id)
    async with app.run_test(size=SIZE) as pilot:
        screen = app.screen
        await pilot.pause()
        calls = list(screen.query(ToolCallView))
        results = list(screen.query(ToolResultMessage))
        assert [c.tool_name for c in calls] == ["read_file", "bash", "edit_file"]
        assert len(results) == 3
        assert all(c.collapsed for c in calls)
        bash = calls[1]
        assert "pytest -q tests/test_parser.py" in str(bash._title.label)
        assert not bash.query_one("Contents").display or bash.has_class("-collapsed")
        await pilot.click(bash._title)
        await pilot.pause()
        assert not bash.collapsed
        assert '"command": "pytest -q tests/test_parser.py"' in str(bash.query_one(".detail").content)

        result = results[1].query_one("Collapsible")
        assert str(result._title.label).startswith("↳ bash: F.") and "(3 lines)" in str(result._title.label)
        result._title.focus()
        await pilot.press("enter")
        await pilot.pause()
        assert not result.collapsed
        assert "FAILED tests/test_parser.py::test_empty" in str(result.query_one(".detail").content)


@app_test
async def test_the_marker_opens_to_the_summary_and_the_archived_originals(config, store):
    session_id = store_session(config, store, compacted=True)
    archived = [m.id for m, state in store.load_all(session_id) if state == "archived" and not m.is_marker]
    assert archived
    app = app_for(config, store, session_id=session_id)
    async with app.run_test(size=SIZE) as pilot:
        screen = app.screen
        await pilot.pause()
        (marker,) = screen.query(MarkerMessage)
        collapsible = marker.query_one("Collapsible")
        assert collapsible.collapsed and "context compacted" in str(collapsible._title.label)
        await pilot.click(collapsible._title)
        await pilot.pause()
        assert not collapsible.collapsed
        assert marker.query_one("Markdown.summary").source == marker.message.meta["summary"]

        marker.query_one("#show-archived").press()
        await until(pilot, lambda: bool(marker.query(".archived UserMessage, .archived AssistantMessage, "
                                                     ".archived ToolResultMessage")), "the archived originals")
        shown = [v.message_id for v in marker.query(".archived .message")]
        assert shown == archived
        assert not marker.query_one("#show-archived").display


@app_test
async def test_typing_after_clicking_a_tool_row_goes_to_the_composer(config, store):
    session_id = store_session(config, store, compacted=False)
    app = app_for(config, store, session_id=session_id)
    async with app.run_test(size=SIZE) as pilot:
        screen = app.screen
        await pilot.pause()
        composer = screen.query_one(Composer)
        bash = list(screen.query(ToolCallView))[1]
        await pilot.click(bash._title)
        await pilot.pause()
        assert not bash.collapsed
        await pilot.press("l", "s", "space", "-", "a")
        await pilot.pause()
        assert composer.text == "ls -a" and app.focused is composer
        assert not bash.collapsed  # the space was typed, not a second toggle

        # Reached with the keyboard, the row keeps its keys: Enter folds it again.
        bash._title.focus()
        await pilot.press("enter")
        await pilot.pause()
        assert bash.collapsed and composer.text == "ls -a"


def screen_lines(app: HermesApp) -> list[str]:
    """The screen as the terminal gets it: one string per row."""
    update = app.screen._compositor.render_full_update()
    return ["".join(strip.text for strip in row) for row in update.strips]


@app_test
async def test_nothing_of_the_input_shows_beside_a_toast(config, store):
    from textual.widgets._toast import Toast

    app = app_for(config, store)
    async with app.run_test(size=SIZE, notifications=True) as pilot:
        await pilot.pause()
        before = screen_lines(app)
        app.notify("Exported the session to a file with a long enough name to wrap", timeout=2)
        await until(pilot, lambda: bool(app.screen.query(Toast)), "the toast")
        await pilot.pause()
        (toast,) = app.screen.query(Toast)
        during = screen_lines(app)
        # What lies right of the toast is the screen's edge: no column of the input's border
        # (or of the status bar) beside it.
        beside = {y: during[y][toast.region.right:] for y in range(toast.region.y, toast.region.bottom)}
        assert all(not text.strip() for text in beside.values()), beside
        await until(pilot, lambda: not app.screen.query(Toast), "the toast to go", timeout=10)
        await pilot.pause()
        assert screen_lines(app) == before


# --- import and the command line ---------------------------------------------------------------


@app_test
async def test_open_imports_a_transcript_as_a_new_session(config, store, tmp_path):
    path = tmp_path / "agent-run.json"
    path.write_text(json.dumps([m.to_openai() for m in coding_session()]), encoding="utf-8")
    app = app_for(config, store, import_path=path)
    async with app.run_test(size=SIZE) as pilot:
        screen = app.screen
        await pilot.pause()
        info = store.get_session(screen.session.info.id)
        assert info.title == "agent-run" and info.message_count == len(coding_session())
        assert len(shown_ids(screen)) == len(coding_session())
        await type_and_send(pilot, "/compact")
        await settle(pilot, screen)
        assert screen.session.compactor.batch_compactions == 1


def test_cli_resume_and_open_reach_the_app(config, db_path, tmp_path, monkeypatch, capsys):
    started: list[dict] = []
    monkeypatch.setattr(HermesApp, "run", lambda self: started.append(
        {"session_id": self._start_session_id, "import_path": self._import_path, "workspace": self.workspace}))
    monkeypatch.setattr(cli_app, "config_from", lambda args, overrides=None: config)
    monkeypatch.setattr(cli_app.paths, "state_db_path", lambda: db_path)

    assert cli.main(["--resume"]) == 2
    assert "no stored session to resume" in capsys.readouterr().err

    with Store(db_path) as store:
        old = store.create_session("old").id
        time.sleep(0.01)
        new = store.create_session("new").id
    assert cli.main([]) == 0
    assert cli.main(["--resume"]) == 0
    assert cli.main(["--resume", old[:6]]) == 0
    assert [s["session_id"] for s in started] == [None, new, old]

    assert cli.main(["--resume", "nosuchid"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "nosuchid" in err

    bad = tmp_path / "bad.json"
    bad.write_text("[{\"role\": \"wizard\"}]")
    assert cli.main(["open", str(bad)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "bad.json" in err
    good = tmp_path / "good.json"
    good.write_text(json.dumps([m.to_openai() for m in coding_session()]))
    assert cli.main(["open", str(good)]) == 0
    assert started[-1]["import_path"] == good

    # The tools' folder: --workspace, checked before the app starts.
    assert cli.main(["--workspace", str(tmp_path)]) == 0
    assert started[-1]["workspace"] == tmp_path and started[-2]["workspace"] is None
    assert cli.main(["--workspace", str(tmp_path / "nowhere")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "nowhere: not a directory" in err
