"""Outside text in the real app: a model's reply and calls, a tool's output, an MCP server's
error, a notice, the models an endpoint lists. Each surface shows it literally
(``[bold]x[/]`` is text, an unclosed ``[`` raises nothing) and writes none of its escape
sequences to the terminal (OSC 52 and a screen clear show as ``␛``), while the transcript
and what the model is sent keep it as it came.

"What reaches the terminal" is read from the compositor: ``render_segments`` is the text
Textual writes to the terminal for the screen, escape sequences and all.
"""

from __future__ import annotations

from support.chat_app import SIZE, app_test, settle, type_and_send, until
from support.mcp_app import make_app, open_tools
from support.scripted_endpoint import answer, call, calls
from textual.widgets import Collapsible

from hermes_tui.config import Config
from hermes_tui.store import Store
from hermes_tui.tools.mcp import ServerStatus
from hermes_tui.tui.app import HermesApp
from hermes_tui.tui.screens.approval import ApprovalScreen
from hermes_tui.tui.screens.chat import ChatScreen
from hermes_tui.tui.screens.model_picker import ModelPicker
from hermes_tui.tui.widgets.message_views import AssistantMessage, ToolResultMessage

OSC52 = "\x1b]52;c;aGVsbG8=\x07"    # write "hello" to the clipboard
CLEAR = "\x1b[2J\x1b[H"             # clear the screen, cursor home
OSC52_SHOWN = "␛]52;c;aGVsbG8=␇"
BRACKETS = ("[bold]x[/]", "x = [1,", "echo [a")


def terminal(app: HermesApp) -> str:
    """What Textual writes to the terminal for the screen on top, escape sequences and all."""
    return app.screen._compositor.render_full_update().render_segments(app.console)


def screen_text(app: HermesApp) -> str:
    update = app.screen._compositor.render_full_update()
    return "\n".join("".join(strip.text for strip in row) for row in update.strips)


def assert_no_raw_escapes(app: HermesApp) -> None:
    out = terminal(app)
    assert "\x1b]52" not in out and "\x1b[2J" not in out and "\x1b[H" not in out and "\x07" not in out


def endpoint_config(base_url: str) -> Config:
    return Config().with_overrides({
        "model.provider": "openai-api", "model.model": "scripted", "model.base_url": base_url,
        "model.context_length": 32768, "auxiliary.compression.provider": "extractive",
    })


@app_test
async def test_the_approval_prompt_rows_and_reply_show_outside_text_literally(servers, store, tmp_path, hermes_home):
    workspace = tmp_path / "ws"
    workspace.mkdir()
    code = f"x = [1,\n[bold]x[/]\necho [a\n{OSC52}{CLEAR}\n"
    (workspace / "code.py").write_text(code)
    command = f"touch 'x = [1,' '[bold]x[/]' && echo [a {OSC52}{CLEAR}"
    server = servers.start([
        calls(call("run_shell", "c1", command=command)),
        calls(call("read_file", "c2", path="code.py")),
        answer(f"Read it: `[bold]x[/]` and x = [1, and echo [a {OSC52}{CLEAR}"),
    ])
    app = HermesApp(endpoint_config(server.base_url), store, reply_tokens=200, workspace=workspace)
    async with app.run_test(size=SIZE) as pilot:
        screen = app.screen
        await type_and_send(pilot, "Look at code.py")
        await until(pilot, lambda: isinstance(app.screen, ApprovalScreen), "the approval prompt")
        await pilot.pause()
        dialog = app.screen
        call_text = dialog.query_one("#call").content
        assert str(call_text) == f"$ touch 'x = [1,' '[bold]x[/]' && echo [a {OSC52_SHOWN}␛[2J␛[H"
        assert "[bold]x[/]" in screen_text(app) and OSC52_SHOWN in screen_text(app)
        assert_no_raw_escapes(app)
        await pilot.press("n")
        await settle(pilot, screen)

        # The result row and the reply: literal, nothing raw; the result opened shows all of it.
        result = next(v for v in screen.query(ToolResultMessage) if v.message.tool_call_id == "c2")
        assert "x = [1," in str(result.query_one(Collapsible).title)
        result.query_one(Collapsible).collapsed = False
        await pilot.pause()
        reply = list(screen.query(AssistantMessage))[-1]
        reply.scroll_visible(animate=False)
        await pilot.pause()
        text = screen_text(app)
        assert all(sample in text for sample in BRACKETS), text
        assert OSC52_SHOWN in text
        assert_no_raw_escapes(app)

        # Only the display changed: the transcript and the model have the text as it came.
        messages = screen.session.conv.messages
        assert messages[-1].content.endswith(f"{OSC52}{CLEAR}")
        assert next(m for m in messages if m.tool_call_id == "c2").content.endswith(f"{OSC52}{CLEAR}\n")
        sent = server.requests()[-1]["messages"]
        asked = next(m for m in sent if m.get("tool_calls"))  # after the system prompt and the user's message
        assert asked["tool_calls"][0]["function"]["arguments"].count("\\u001b") == 3
        assert any(m["role"] == "tool" and OSC52 in m["content"] for m in sent)


@app_test
async def test_tools_shows_an_mcp_servers_error_literally(scripted, hermes_home, tmp_path):
    """A server that fails says why in its own words (its stderr): `[/]` there raised MarkupError
    when the /tools table parsed the cell as markup."""
    workspace = tmp_path / "ws"
    workspace.mkdir()
    words = f"[/] x = [1, [bold]x[/] echo [a {OSC52}"
    servers = {"broken": {"command": "sh", "args": ["-c", f"printf '%s\\n' '{words}' >&2; exit 1"]}}
    model = scripted([answer("ok")])
    with Store(hermes_home / "state.db") as store:
        app = make_app(store, model.base_url, workspace, servers)
        async with app.run_test(size=(160, 36)) as pilot:
            await until(pilot, lambda: app.mcp_host.manager is not None and app.mcp_host.manager.state("broken").status is ServerStatus.FAILED,
                        "the server to fail")
            assert OSC52 in app.mcp_host.manager.state("broken").reason  # kept as it came; only its display changes
            screen = await open_tools(pilot, app)
            await pilot.pause()
            detail = screen.query_one("#servers").get_row_at(0)[4]
            assert f"[/] x = [1, [bold]x[/] echo [a {OSC52_SHOWN}" in str(detail)
            assert "[/] x = [1, [bold]x[/] echo [a" in screen_text(app)
            assert_no_raw_escapes(app)


@app_test
async def test_notices_show_outside_text_literally(servers, store, tmp_path, hermes_home):
    server = servers.start([answer("ok")])
    app = HermesApp(endpoint_config(server.base_url), store, reply_tokens=8, workspace=tmp_path)
    async with app.run_test(size=SIZE, notifications=True) as pilot:
        await until(pilot, lambda: isinstance(app.screen, ChatScreen), "the chat")
        # A screen's notify (Widget.notify asks for markup) and the app's, each quoting outside text.
        app.screen.notify(f"[/] echo [a {OSC52}", title=f"[bold]x[/] {CLEAR}", severity="error")
        app.notify(f"x = [1, [bold]x[/]{OSC52}")
        await pilot.pause()
        await pilot.pause()
        text = screen_text(app)
        assert "[/] echo [a ␛]52;c;aGVsbG8=␇" in text and "[bold]x[/] ␛[2J␛[H" in text, text
        assert "x = [1, [bold]x[/]␛]52" in text
        assert_no_raw_escapes(app)


@app_test
async def test_the_model_picker_shows_the_endpoints_model_names_literally(servers, store, tmp_path, hermes_home,
                                                                         monkeypatch):
    from hermes_tui.providers import choices

    server = servers.start([answer("ok")])
    listed = [choices.ModelChoice(value="m", where=choices.ENDPOINT, label=f"[bold]x[/] echo [a {OSC52}",
                                  detail="x = [1,")]
    monkeypatch.setattr("hermes_tui.tui.screens.model_picker.endpoint_choices", lambda cfg: listed)
    app = HermesApp(endpoint_config(server.base_url), store, reply_tokens=8, workspace=tmp_path)
    async with app.run_test(size=SIZE) as pilot:
        await until(pilot, lambda: isinstance(app.screen, ChatScreen), "the chat")
        app.run_slash("/model")
        await until(pilot, lambda: isinstance(app.screen, ModelPicker)
                    and "[bold]x[/]" in screen_text(app), "the endpoint's models")
        text = screen_text(app)
        assert f"[bold]x[/] echo [a {OSC52_SHOWN}" in text and "x = [1," in text
        assert_no_raw_escapes(app)
