"""MCP servers in the app: real servers these tests start (tests/support/mcp_server.py over stdio
and over streamable HTTP, tests/support/mcp_faulty_server.py), the scripted OpenAI-compatible
model in a subprocess (tests/support/scripted_openai_server.py) calling their tools through the
real openai SDK, and the real app in ``App.run_test``.

Messages go in through the composer and the chat screen runs the turn, answering approval
through the real prompt. One test runs ``AgentTurn`` itself, on the app's session with the
app's tools (``tools_for``), because it holds the turn between two model requests (a listener).
Approval answered key by key: tests/tui/test_tui_mcp_approval.py."""

from __future__ import annotations

import asyncio
import os
import sys
import time
from pathlib import Path

import pytest
from support.chat_app import app_test, settle, type_and_send, until
from support.mcp_app import (
    MCP_SERVER,
    SIZE,
    WAIT_S,
    bar,
    children_of,
    faulty_server,
    make_app,
    open_tools,
    ready,
    start_http_mcp,
    started,
    stdio_server,
    stored_results,
    tool_results,
)
from support.scripted_endpoint import answer, call, calls
from support.servers import stop_server

from hermes_tui.config import Config
from hermes_tui.session.agent import COMPLETED, AgentListener, AgentTurn
from hermes_tui.store import Store
from hermes_tui.tools.mcp import ServerStatus
from hermes_tui.tui.app import HermesApp
from hermes_tui.tui.screens.approval import ApprovalScreen
from hermes_tui.tui.screens.chat import ChatScreen
from hermes_tui.tui.widgets.message_views import ToolCallView

# --- the servers ------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def http_mcp_url(tmp_path_factory):
    process, url = start_http_mcp(tmp_path_factory.mktemp("mcp-http") / "server.log")
    yield url
    stop_server(process)


async def send_and_settle(pilot, app: HermesApp, text: str) -> str:
    """Send ``text`` from the composer; the chat's turn runs; its final reply."""
    await type_and_send(pilot, text)
    await settle(pilot, app.chat_screen)
    return app.chat_screen.session.conv.messages[-1].content


# --- tools of real servers, in the transcript ---------------------------------------------------


def table_rows(table) -> dict[str, list[str]]:
    """A table's rows by their first cell, as text (cells of outside text are Rich ``Text``)."""
    rows = [[str(cell) for cell in table.get_row_at(i)] for i in range(table.row_count)]
    return {row[0]: row for row in rows}


@app_test
async def test_the_model_calls_stdio_and_http_mcp_tools_and_their_results_land_in_the_transcript(
        scripted, http_mcp_url, hermes_home, tmp_path):
    workspace = tmp_path / "ws"
    workspace.mkdir()
    model = scripted([
        calls(call("notes__read_note", "r1", key="milk"), call("web__fail", "f1", reason="on purpose"),
              call("notes__slow", "s1", seconds=0.5), call("web__large", "l1", kilobytes=100)),
        answer("all four answered"),
    ])
    servers = {"notes": stdio_server(trust="trusted"), "web": {"url": http_mcp_url, "trust": "trusted"}}
    with Store(hermes_home / "state.db") as store:
        app = make_app(store, model.base_url, workspace, servers)
        async with app.run_test(size=SIZE) as pilot:
            await ready(pilot, app, "notes", "web")
            await until(pilot, lambda: bar(app).text("mcp") == "MCP 2/2 ready", "the status bar's MCP part")
            assert await send_and_settle(pilot, app, "use the notes") == "all four answered"
            results = tool_results(app)
            session_id = app.chat_screen.session.info.id
        # In the store too: passes and a resume see exactly these.
        assert stored_results(store, session_id) == results
    assert results["r1"] == "note milk: remember the milk"
    assert "Error executing tool fail" in results["f1"]  # the SDK keeps the exception to the server
    assert results["s1"] == "slept 0.5"
    # 100 KB from the server, capped at agent.max_output_bytes keeping head and tail.
    assert len(results["l1"].encode()) <= 33_000 and results["l1"].startswith("x" * 99)
    offered = {t["function"]["name"] for t in model.requests()[0]["tools"]}
    assert {"notes__read_note", "web__read_note", "notes__large", "read_file", "run_shell"} <= offered


@app_test
async def test_a_call_to_a_server_of_trust_ask_prompts_and_the_answer_decides(
        scripted, http_mcp_url, hermes_home, tmp_path):
    workspace = tmp_path / "ws"
    workspace.mkdir()
    model = scripted([
        calls(call("web__read_note", "a1", key="k")),     # read-only hint, trust read-only: runs unasked
        calls(call("web__slow", "a2", seconds=0.1)),      # asks: "always"
        calls(call("web__fail", "a3")),                   # asks: denied
        calls(call("web__slow", "a4", seconds=0.2)),      # the "always" rule: runs unasked
        answer("done"),
    ])
    asked: list[tuple[str, str]] = []

    async def answer_prompts(pilot, app):
        for tool, key in (("web__slow", "a"), ("web__fail", "n")):
            await until(pilot, lambda: isinstance(app.screen, ApprovalScreen), f"the prompt for {tool}")
            await pilot.pause()
            asked.append((app.screen.request.tool, app.screen.reason))
            await pilot.press(key)

    with Store(hermes_home / "state.db") as store:
        app = make_app(store, model.base_url, workspace, {"web": {"url": http_mcp_url, "trust": "read-only"}})
        async with app.run_test(size=SIZE) as pilot:
            await ready(pilot, app, "web")
            await type_and_send(pilot, "go")
            await answer_prompts(pilot, app)
            await settle(pilot, app.chat_screen)
            final = app.chat_screen.session.conv.messages[-1].content
            results = tool_results(app)

            screen = await open_tools(pilot, app)
            tools = screen.query_one("#tools")
            rows = table_rows(tools)
            assert rows["web__slow"][2] == "runs" and "allowed by the rule 'web__slow'" in rows["web__slow"][3]
            assert rows["web__fail"][2] == "asks"
            assert rows["web__read_note"][2] == "runs"
            assert "always allow: web__slow" in str(screen.query_one("#rules").content)
            assert "approval mode: ask" in str(screen.query_one("#heading").content)
    assert final == "done"
    assert [tool for tool, _ in asked] == ["web__slow", "web__fail"]
    assert "external tool" in asked[0][1]
    assert results["a1"] == "note k: remember the milk"
    assert results["a2"] == "slept 0.1" and results["a4"] == "slept 0.2"
    assert "denied" in results["a3"].lower()


# --- faults: shown, and the chat goes on -------------------------------------------------------


@app_test
async def test_servers_that_exit_or_never_answer_are_shown_and_the_chat_goes_on(scripted, hermes_home, tmp_path):
    workspace = tmp_path / "ws"
    workspace.mkdir()
    model = scripted([answer("still here")])
    servers = {
        "broken": faulty_server("exit"),
        "silent": faulty_server("silent", timeout=15),
        "notes": stdio_server(),
    }
    with Store(hermes_home / "state.db") as store:
        app = make_app(store, model.base_url, workspace, servers)
        async with app.run_test(size=SIZE) as pilot:
            screen = app.chat_screen
            # The silent one is still starting: the chat does not wait for it.
            await type_and_send(pilot, "hello")
            await settle(pilot, screen)
            assert [m.content for m in screen.session.conv.messages if m.role == "assistant"] == ["still here"]
            assert app.mcp_host.manager.state("silent").status is ServerStatus.STARTING
            await until(pilot, lambda: app.mcp_host.manager.state("silent").status is ServerStatus.FAILED, "the silent one", WAIT_S)
            await ready(pilot, app, "notes")
            await until(pilot, lambda: bar(app).text("mcp") == "MCP 1/3 ready, 2 failed", "the MCP summary")
            assert bar(app).state("mcp") == "-failed"

            await open_tools(pilot, app)
            table = app.screen.query_one("#servers")
            rows = table_rows(table)
            assert str(rows["broken"][3]) == "failed" and "cannot start (no database)" in rows["broken"][4]
            assert str(rows["silent"][3]) == "failed" and "no answer within 15 s" in rows["silent"][4]
            assert str(rows["notes"][3]) == "ready"
            tools = app.screen.query_one("#tools")
            names = table_rows(tools)
            assert names["read_file"][1:3] == ["built-in", "runs"]
            assert names["run_shell"][2] == "asks"
            assert names["notes__read_note"][1:3] == ["MCP notes", "asks"]  # trust: ask (the default)
            await pilot.press("escape")
            await until(pilot, lambda: isinstance(app.screen, ChatScreen), "the chat again")


@app_test
async def test_restart_from_tools_brings_a_crashed_server_back(scripted, hermes_home, tmp_path):
    workspace = tmp_path / "ws"
    workspace.mkdir()
    model = scripted([
        calls(call("notes__crash", "c1")), answer("it crashed"),
        calls(call("notes__read_note", "r1", key="again")), answer("back"),
    ])
    before = set(children_of(os.getpid()))
    with Store(hermes_home / "state.db") as store:
        app = make_app(store, model.base_url, workspace, {"notes": stdio_server(trust="trusted")})
        async with app.run_test(size=SIZE) as pilot:
            await ready(pilot, app, "notes")
            first = set(children_of(os.getpid())) - before
            assert await send_and_settle(pilot, app, "crash it") == "it crashed"
            assert "crashed" in tool_results(app)["c1"]
            await until(pilot, lambda: app.mcp_host.manager.state("notes").status is ServerStatus.FAILED, "the crash shown")
            await until(pilot, lambda: bar(app).state("mcp") == "-failed", "the status bar's failure")

            await open_tools(pilot, app)
            await pilot.press("r")
            await ready(pilot, app, "notes")
            await until(pilot, lambda: "ready" in str(app.screen.query_one("#servers").get_row_at(0)[3]),
                        "the tools screen following the restart")
            await pilot.press("escape")
            assert await send_and_settle(pilot, app, "read it again") == "back"
            assert tool_results(app)["r1"] == "note again: remember the milk"
            assert bar(app).text("mcp") == "MCP 1/1 ready" and bar(app).state("mcp") == ""
            second = set(children_of(os.getpid())) - before
    assert len(first) == 1 and len(second) == 1 and first != second  # a new process, the crashed one reaped


# --- quitting ---------------------------------------------------------------------------------


@app_test
async def test_the_app_quits_promptly_with_servers_running_and_leaves_no_child(
        scripted, http_mcp_url, hermes_home, tmp_path):
    workspace = tmp_path / "ws"
    workspace.mkdir()
    model = scripted([answer("hi")])
    before = set(children_of(os.getpid()))
    servers = {"one": stdio_server(), "two": stdio_server(), "web": {"url": http_mcp_url}}
    with Store(hermes_home / "state.db") as store:
        app = make_app(store, model.base_url, workspace, servers)
        async with app.run_test(size=SIZE) as pilot:
            await ready(pilot, app, "one", "two", "web")
            servers_pids = set(children_of(os.getpid())) - before
            assert len(servers_pids) == 2, children_of(os.getpid())  # the two stdio servers
            started = time.monotonic()
            await pilot.press("ctrl+q")
        quit_s = time.monotonic() - started
    left = {pid: state for pid, state in children_of(os.getpid()).items() if pid in servers_pids}
    assert left == {}, f"server processes left behind (state letters; Z = zombie): {left}"
    assert all(not Path(f"/proc/{pid}").exists() for pid in servers_pids)
    assert quit_s < 30, quit_s  # a hang bound; the figure is printed for the report
    print(f"quit with 3 MCP servers running: {quit_s:.2f} s")


@app_test
async def test_malformed_results_become_error_results_and_the_turn_goes_on(scripted, hermes_home, tmp_path):
    workspace = tmp_path / "ws"
    workspace.mkdir()
    model = scripted([
        calls(call("bad__bad_shape", "m1"), call("bad__bad_block", "m2"), call("bad__bad_schema", "m3")),
        answer("carried on"),
    ])
    with Store(hermes_home / "state.db") as store:
        app = make_app(store, model.base_url, workspace, {"bad": faulty_server("malformed", trust="trusted")})
        async with app.run_test(size=SIZE) as pilot:
            await ready(pilot, app, "bad")
            final = await send_and_settle(pilot, app, "try them")
            results = tool_results(app)
            session = app.chat_screen.session
            with session.lock:
                messages = list(session.conv.messages)
            assert app.mcp_host.manager.state("bad").status is ServerStatus.READY  # one bad answer is not a dead server
    assert final == "carried on"
    assert "malformed result" in results["m1"] and "malformed result" in results["m2"]
    assert "unknown tool 'bad__bad_schema'" in results["m3"]  # its schema was invalid: never offered
    # Every call answered, each result right after its call.
    assert [m.role for m in messages[-5:]] == ["assistant", "tool", "tool", "tool", "assistant"]


@app_test
async def test_servers_added_or_removed_in_settings_start_and_stop_with_the_new_config(
        scripted, hermes_home, tmp_path):
    workspace = tmp_path / "ws"
    workspace.mkdir()
    model = scripted([answer("hi")])
    before = set(children_of(os.getpid()))
    with Store(hermes_home / "state.db") as store:
        app = make_app(store, model.base_url, workspace, {})
        async with app.run_test(size=SIZE) as pilot:
            await until(pilot, lambda: app.chat_screen is not None, "the chat")
            assert app.mcp_host.manager is None and bar(app).text("mcp") == ""
            with_notes = Config.model_validate({**app.config.model_dump(), "mcp_servers": {"notes": stdio_server()}})
            app.reconfigure(with_notes)
            await until(pilot, lambda: app.mcp_host.manager is not None, "a manager for the new config")
            await ready(pilot, app, "notes")
            await until(pilot, lambda: bar(app).text("mcp") == "MCP 1/1 ready", "the MCP part")
            tools = app.tools_for(app.chat_screen.session)
            tools.sync()
            assert "notes__read_note" in tools.registry
            server = set(children_of(os.getpid())) - before
            assert len(server) == 1
            app.reconfigure(Config.model_validate({**app.config.model_dump(), "mcp_servers": {}}))
            await until(pilot, lambda: not any(Path(f"/proc/{pid}").exists() for pid in server),
                        "the removed server's process to end", WAIT_S)
            await until(pilot, lambda: bar(app).text("mcp") == "", "the MCP part to go")
            assert app.mcp_host.manager is None


@app_test
async def test_a_server_that_comes_up_during_a_turn_is_offered_from_the_next_request(
        scripted, hermes_home, tmp_path):
    workspace = tmp_path / "ws"
    workspace.mkdir()
    model = scripted([
        calls(call("list_dir", "d1", path=".")),
        calls(call("late__read_note", "r1", key="late")),
        answer("got it"),
    ])
    # Starts 2 s late: the turn's first request goes out while it is still starting.
    late = {"command": "sh", "args": ["-c", f'sleep 2; exec "{sys.executable}" "{MCP_SERVER}" stdio'],
            "trust": "trusted"}

    class WaitForTheServer(AgentListener):
        def call_finished(self, call_id, name, arguments, result, message) -> None:
            app.mcp_host.manager.wait(timeout=WAIT_S)  # between the two requests

    with Store(hermes_home / "state.db") as store:
        app = make_app(store, model.base_url, workspace, {"late": late})
        async with app.run_test(size=SIZE) as pilot:
            await until(pilot, lambda: app.chat_screen is not None, "the chat")
            await started(pilot, app)
            assert app.mcp_host.manager.state("late").status is ServerStatus.STARTING
            session = app.chat_screen.session
            session.add_user_message("look, then read")
            turn = AgentTurn(session, app.tools_for(session), listener=WaitForTheServer(), max_tokens=64)
            result = await asyncio.to_thread(turn.run)
            results = tool_results(app)
    assert result.outcome == COMPLETED and result.text == "got it"
    assert results["r1"] == "note late: remember the milk"
    first, second = ({t["function"]["name"] for t in r["tools"]} for r in model.requests()[:2])
    assert "list_dir" in first and not any(name.startswith("late__") for name in first)
    assert "late__read_note" in second


@app_test
async def test_quitting_during_a_slow_mcp_call_stops_it_and_its_server(scripted, hermes_home, tmp_path):
    workspace = tmp_path / "ws"
    workspace.mkdir()
    model = scripted([calls(call("notes__slow", "s1", seconds=120)), answer("after the stop")])
    before = set(children_of(os.getpid()))
    with Store(hermes_home / "state.db") as store:
        app = make_app(store, model.base_url, workspace, {"notes": stdio_server(trust="trusted")})
        async with app.run_test(size=SIZE) as pilot:
            await ready(pilot, app, "notes")
            server = set(children_of(os.getpid())) - before
            chat = app.chat_screen
            session = chat.session
            await type_and_send(pilot, "sleep")
            await until(pilot, lambda: any(row.state == "running" for row in chat.query(ToolCallView)),
                        "the slow call to start")
            await pilot.pause(0.5)
            started = time.monotonic()
            await pilot.press("ctrl+q")
        quit_s = time.monotonic() - started
        # The chat's turn (a thread) stores the stopped call's result as it ends.
        deadline = time.monotonic() + WAIT_S
        while "s1" not in (results := stored_results(store, session.info.id)) and time.monotonic() < deadline:
            await asyncio.sleep(0.1)
    assert len(server) == 1 and not any(Path(f"/proc/{pid}").exists() for pid in server)
    assert results["s1"] == "[stopped by the user]"  # answered: the transcript stays valid
    assert quit_s < 30, quit_s  # a hang bound: the call's 120 s are not waited for
    print(f"quit during a 120 s MCP call: {quit_s:.2f} s")
