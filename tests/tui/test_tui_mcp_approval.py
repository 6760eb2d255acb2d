"""Approving MCP tool calls in the chat: the user types in the composer, the scripted
OpenAI-compatible model (a subprocess, the real openai SDK) calls tools of a real MCP server
(tests/support/mcp_server.py, stdio or streamable HTTP) whose trust is ``ask``, and the chat's
own turn shows the real approval prompt; the test answers it with the keys a user presses."""

from __future__ import annotations

import pytest
from support.chat_app import app_test, settle, until
from support.mcp_app import (
    SIZE,
    make_app,
    ready,
    start_http_mcp,
    stdio_server,
    stored_results,
    tool_results,
    type_message,
)
from support.scripted_endpoint import answer, call, calls
from support.servers import stop_server

from hermes_tui.tui.screens.approval import ApprovalScreen
from hermes_tui.tui.widgets.message_views import ToolCallView


@pytest.fixture
def http_mcp_url(tmp_path):
    process, url = start_http_mcp(tmp_path / "mcp-http.log")
    yield url
    stop_server(process)


def bells(app) -> list[int]:
    """Counts the app's bells (a headless app rings none)."""
    rung: list[int] = []
    app.bell = lambda: rung.append(1)
    return rung


async def prompt(pilot, app, tool: str) -> ApprovalScreen:
    await until(pilot, lambda: isinstance(app.screen, ApprovalScreen), f"the approval prompt for {tool}")
    await pilot.pause()
    screen = app.screen
    assert screen.request.tool == tool
    return screen


@app_test
async def test_mcp_calls_are_allowed_once_denied_and_always_allowed_through_the_prompt(
        scripted, hermes_home, store, tmp_path):
    workspace = tmp_path / "ws"
    workspace.mkdir()
    model = scripted([
        calls(call("notes__read_note", "c1", key="milk")),   # allow once
        calls(call("notes__fail", "c2", reason="never")),     # deny: the model carries on
        calls(call("notes__slow", "c3", seconds=0.1)),       # always
        calls(call("notes__slow", "c4", seconds=0.2)),       # the rule: no prompt
        answer("three ran, one was denied"),
    ])
    app = make_app(store, model.base_url, workspace, {"notes": stdio_server(trust="ask")})
    async with app.run_test(size=SIZE) as pilot:
        rung = bells(app)
        await ready(pilot, app, "notes")
        chat = app.chat_screen
        await type_message(pilot, "use the notes server")

        dialog = await prompt(pilot, app, "notes__read_note")
        assert "milk" in str(dialog.query_one("#call").content)
        assert "external tool" in dialog.reason
        assert tool_results(app) == {}  # nothing ran before the answer
        await pilot.press("y")
        dialog = await prompt(pilot, app, "notes__fail")
        await pilot.press("n")
        dialog = await prompt(pilot, app, "notes__slow")
        assert dialog.can_always
        await pilot.press("a")
        await settle(pilot, chat)

        results = tool_results(app)
        session_id = chat.session.info.id
        assert len(rung) == 3  # one bell per prompt: the fourth call did not ask
        assert chat.session.conv.messages[-1].content == "three ran, one was denied"
        outcomes = {row.call_id: row.outcome.plain for row in chat.query(ToolCallView)}
        assert "denied" in outcomes["c2"] and "✓" in outcomes["c1"] and "✓" in outcomes["c4"]
    assert results["c1"] == "note milk: remember the milk"
    assert results["c2"].startswith("denied")
    assert results["c3"] == "slept 0.1" and results["c4"] == "slept 0.2"
    assert stored_results(store, session_id) == results  # what passes and a resume see
    sent = model.requests()[2]["messages"][-1]  # after the deny, the model got "denied" and went on
    assert sent["role"] == "tool" and sent["tool_call_id"] == "c2" and sent["content"].startswith("denied")
    assert len(model.requests()) == 5


@app_test
async def test_a_streamable_http_mcp_call_is_allowed_for_the_session_from_the_prompt(
        scripted, http_mcp_url, hermes_home, store, tmp_path):
    workspace = tmp_path / "ws"
    workspace.mkdir()
    model = scripted([
        calls(call("web__slow", "h1", seconds=0.1)),
        calls(call("web__slow", "h2", seconds=0.2)),
        answer("both slept"),
    ])
    app = make_app(store, model.base_url, workspace, {"web": {"url": http_mcp_url, "trust": "ask"}})
    async with app.run_test(size=SIZE) as pilot:
        rung = bells(app)
        await ready(pilot, app, "web")
        chat = app.chat_screen
        await type_message(pilot, "sleep twice")
        await prompt(pilot, app, "web__slow")
        await pilot.click("#allow_session")
        await settle(pilot, chat)
        results = tool_results(app)
        assert len(rung) == 1  # the second call ran under the session's rule
        assert chat.session.conv.messages[-1].content == "both slept"
        assert stored_results(store, chat.session.info.id) == results
    assert results == {"h1": "slept 0.1", "h2": "slept 0.2"}
