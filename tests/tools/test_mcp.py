"""MCP servers as tools, against real servers these tests start: tests/support/mcp_server.py (the
SDK's server API, over stdio and over streamable HTTP with uvicorn) and
tests/support/mcp_faulty_server.py (raw JSON-RPC that exits, hangs or answers malformed)."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import threading
import time
from pathlib import Path

import mcp_types as types
import pytest
from support.mcp_app import start_http_mcp
from support.servers import free_port
from support.servers import stop_server as _stop

from hermes_tui.config import McpServerConfig
from hermes_tui.tools import (
    Action,
    Mode,
    Rule,
    Status,
    ToolContext,
    ToolRegistry,
    Workspace,
    build_request,
    builtin_registry,
    decide,
)
from hermes_tui.tools.mcp import McpManager, ServerStatus
from hermes_tui.tools.mcp.launch import LaunchError, http_headers
from hermes_tui.tools.mcp.names import namespaced
from hermes_tui.tools.mcp.results import to_tool_result
from hermes_tui.util import paths

HERE = Path(__file__).resolve().parents[1] / "support"
SERVER = str(HERE / "mcp_server.py")
FAULTY = str(HERE / "mcp_faulty_server.py")
START_S = 60.0  # bounds a hang only: a Python server's start is seconds on a busy machine


def stdio(*args: str, **settings) -> McpServerConfig:
    return McpServerConfig(command=sys.executable, args=[SERVER, "stdio", *args], **settings)


def faulty(mode: str, **settings) -> McpServerConfig:
    return McpServerConfig(command=sys.executable, args=[FAULTY, mode], **settings)


def children() -> set[int]:
    """Our child processes that still exist (zombies included)."""
    out = subprocess.run(["pgrep", "-P", str(os.getpid())], capture_output=True, text=True).stdout
    return {int(pid) for pid in out.split()}


@pytest.fixture
def managers():
    made: list[McpManager] = []

    def make(servers: dict[str, McpServerConfig], **kw) -> McpManager:
        manager = McpManager(servers, **kw)
        made.append(manager)
        manager.start()
        return manager

    yield make
    for manager in made:
        manager.close()


@pytest.fixture(scope="module")
def http_url(tmp_path_factory):
    process, url = start_http_mcp(tmp_path_factory.mktemp("mcp-http") / "server.log")
    yield url
    _stop(process)


@pytest.fixture(params=["stdio", "http"])
def notes_server(request) -> McpServerConfig:
    if request.param == "stdio":
        return stdio()
    return McpServerConfig(url=request.getfixturevalue("http_url"))


def context(tmp_path: Path, **kw) -> ToolContext:
    return ToolContext(workspace=Workspace(tmp_path), **kw)


# --- the tools of a working server, over both transports ---------------------------------


def test_tools_are_namespaced_and_called_through_the_registry(managers, notes_server, tmp_path):
    manager = managers({"notes": notes_server})
    assert manager.wait(timeout=START_S)
    state = manager.state("notes")
    assert state.status is ServerStatus.READY, state.reason
    assert set(state.tools) >= {"notes__read_note", "notes__fail", "notes__slow", "notes__large", "notes__picture"}
    registry = builtin_registry()
    manager.sync(registry)
    assert "notes__read_note" in registry and "read_file" in registry
    spec = registry.get("notes__read_note").spec()["function"]
    assert spec["description"] == "Read a note by its key."
    assert spec["parameters"]["required"] == ["key"]
    ctx = context(tmp_path)

    result = registry.dispatch("notes__read_note", '{"key": "k1"}', ctx)
    assert (result.status, result.content) == (Status.OK, "note k1: remember the milk")

    # Arguments are checked against the server's schema before anything is sent.
    result = registry.dispatch("notes__read_note", '{"key": 5}', ctx)
    assert result.is_error and "invalid arguments for notes__read_note at 'key'" in result.content

    result = registry.dispatch("notes__fail", "{}", ctx)
    assert result.is_error and result.status is Status.ERROR and result.content

    result = registry.dispatch("notes__picture", "{}", ctx)
    assert result.content == "a red pixel\n[image: image/png, 70 B]"

    result = registry.dispatch("notes__large", '{"kilobytes": 200}', ctx)
    assert result.status is Status.OK and result.truncated
    assert result.bytes >= 200 * 1000 and len(result.content.encode()) <= ctx.max_output_bytes + 200

    result = registry.dispatch("notes__slow", '{"seconds": 0.3}', ctx)
    assert result.content == "slept 0.3" and result.duration_ms >= 300


def test_a_slow_call_times_out_and_a_cancelled_one_stops(managers, notes_server, tmp_path):
    manager = managers({"notes": notes_server.model_copy(update={"call_timeout": 1.0})})
    assert manager.wait(timeout=START_S)
    started = time.monotonic()
    result = manager.call("notes", "slow", {"seconds": 30})
    assert result.is_error and "slow gave no answer within 1 s" in result.content
    assert time.monotonic() - started < 15

    manager2 = managers({"notes": notes_server.model_copy(update={"call_timeout": 60.0})})
    assert manager2.wait(timeout=START_S)
    cancel = threading.Event()
    threading.Timer(0.5, cancel.set).start()
    started = time.monotonic()
    result = manager2.call("notes", "slow", {"seconds": 30}, cancel=cancel)
    assert result.status is Status.STOPPED
    assert time.monotonic() - started < 15
    # The server goes on answering after a timed-out or cancelled call.
    assert manager.call("notes", "read_note", {"key": "a"}).content == "note a: remember the milk"
    assert manager2.call("notes", "read_note", {"key": "b"}).content == "note b: remember the milk"


def test_allow_and_deny_lists_choose_the_tools(managers):
    manager = managers({
        "only": stdio(tools={"allow": ["read_*", "slow"]}),
        "most": stdio(tools={"deny": ["crash", "env*"]}),
    })
    assert manager.wait(timeout=START_S)
    assert manager.state("only").tools == ("only__read_note", "only__slow")
    assert not {"most__crash", "most__environment"} & set(manager.state("most").tools)
    assert "most__large" in manager.state("most").tools
    registry = ToolRegistry()
    manager.sync(registry)
    assert "most__crash" not in registry and "most__large" in registry


def test_approval_follows_the_server_trust(managers, tmp_path):
    manager = managers({"asks": stdio(trust="ask"), "ro": stdio(trust="read-only"), "full": stdio(trust="trusted")})
    assert manager.wait(timeout=START_S)
    tools = {tool.name: tool for tool in manager.tools()}
    workspace = Workspace(tmp_path)

    def action(name: str, mode: Mode = Mode.ASK, rules=()) -> Action:
        return decide(build_request(tools[name], {}, workspace), mode=mode, rules=rules).action

    assert action("asks__read_note") is Action.ASK  # its readOnlyHint is not taken on trust
    assert action("asks__read_note", rules=[Rule("asks__read_note", Action.ALLOW)]) is Action.ALLOW
    assert action("ro__read_note") is Action.ALLOW  # marked read-only, server trusted to say so
    assert action("ro__slow") is Action.ASK
    assert action("ro__read_note", Mode.READ_ONLY) is Action.ALLOW
    assert action("ro__slow", Mode.READ_ONLY) is Action.DENY
    assert action("full__slow") is Action.ALLOW
    assert action("full__slow", Mode.READ_ONLY) is Action.DENY
    assert action("asks__slow", Mode.FULL) is Action.ALLOW
    assert action("full__slow", rules=[Rule("full__slow", Action.DENY)]) is Action.DENY


# --- faults: each one a clear state or result, and everything else goes on ---------------


def test_faulty_servers_fail_with_a_reason_and_never_block_the_others(managers, tmp_path):
    started = time.monotonic()
    manager = managers({
        "good": stdio(),
        "exits": faulty("exit"),
        "silent": faulty("silent", timeout=20.0),
        "missing": McpServerConfig(command=str(tmp_path / "no-such-server")),
        "refused": McpServerConfig(url=f"http://127.0.0.1:{free_port()}/mcp", timeout=20.0),
        "nokey": stdio(env={"API_TOKEN": "$HERMES_TEST_UNSET_VARIABLE"}),
    })
    assert time.monotonic() - started < 1.0  # start() only schedules
    assert manager.wait(["good"], timeout=START_S)
    assert manager.state("good").status is ServerStatus.READY
    # The silent server is still starting, and the good one answers meanwhile.
    assert manager.state("silent").status is ServerStatus.STARTING
    assert "starting" in manager.summary()
    assert manager.call("good", "read_note", {"key": "x"}).content == "note x: remember the milk"
    assert manager.wait(timeout=START_S)
    reasons = {s.name: s.reason for s in manager.states() if s.status is ServerStatus.FAILED}
    assert reasons == {
        "exits": "exited during startup: faulty server: cannot start (no database)",
        "silent": "no answer within 20 s (initialize, tools/list)",
        "missing": f"command not found: {tmp_path / 'no-such-server'}",
        "refused": reasons["refused"],
        "nokey": "env API_TOKEN names $HERMES_TEST_UNSET_VARIABLE, which is not set in the environment",
    }
    assert reasons["refused"].startswith("HTTP: ConnectError")
    result = manager.call("exits", "anything", {})
    assert result.is_error and result.content.startswith("MCP server exits is not running (failed: exited")
    assert manager.summary() == "MCP 1/6 ready, 5 failed"


def test_a_crash_mid_call_fails_the_call_and_the_server_until_restarted(managers, tmp_path):
    manager = managers({"a": stdio(), "b": stdio()})
    assert manager.wait(timeout=START_S)
    registry = ToolRegistry()
    manager.sync(registry)
    result = registry.dispatch("a__crash", "{}", context(tmp_path))
    assert result.is_error and "the MCP server stopped during the call" in result.content
    assert manager.state("a").status is ServerStatus.FAILED
    assert manager.state("a").reason == "crashed during a call to crash"
    manager.sync(registry)
    assert "a__read_note" not in registry and "b__read_note" in registry
    assert registry.dispatch("b__read_note", '{"key": "k"}', context(tmp_path)).content == "note k: remember the milk"

    manager.restart("a")
    assert manager.wait(timeout=START_S) and manager.state("a").status is ServerStatus.READY
    manager.sync(registry)
    assert registry.dispatch("a__read_note", '{"key": "k"}', context(tmp_path)).status is Status.OK


def test_a_server_that_exits_while_idle_shows_as_failed_at_once(managers):
    manager = managers({"a": stdio()})
    assert manager.wait(timeout=START_S)
    assert manager.call("a", "exit_soon", {}).content == "exiting"
    deadline = time.monotonic() + START_S
    while manager.state("a").status is ServerStatus.READY and time.monotonic() < deadline:
        time.sleep(0.05)
    assert (manager.state("a").status, manager.state("a").reason) == (ServerStatus.FAILED, "exited")
    assert manager.tools() == []


def test_malformed_results_and_schemas_are_errors_with_a_reason(managers, tmp_path):
    manager = managers({"bad": faulty("malformed")})
    assert manager.wait(timeout=START_S)
    state = manager.state("bad")
    assert state.status is ServerStatus.READY
    assert state.tools == ("bad__bad_shape", "bad__bad_block")
    assert len(state.notes) == 1 and state.notes[0].startswith("bad.schema left out: tool bad__bad_schema: "
                                                               "invalid parameters schema")
    for tool in ("bad_shape", "bad_block"):
        result = manager.call("bad", tool, {})
        assert result.is_error and result.content.startswith(f"bad: {tool} returned a malformed result (")
        assert "\n" not in result.content
    assert manager.state("bad").status is ServerStatus.READY  # the server itself goes on


# --- the child's environment ----------------------------------------------------------


def test_a_server_sees_only_the_variables_its_config_names(managers, monkeypatch):
    monkeypatch.setenv("HERMES_TEST_SECRET", "do-not-leak")
    monkeypatch.setenv("HERMES_TEST_PASSED", "passed-as-is")
    monkeypatch.setenv("HERMES_TEST_SOURCE", "renamed")
    manager = managers({
        "plain": stdio(),
        "named": stdio(env={"HERMES_TEST_PASSED": "$HERMES_TEST_PASSED", "TOKEN": "${HERMES_TEST_SOURCE}"}),
    })
    assert manager.wait(timeout=START_S)
    seen = {name: json.loads(manager.call(name, "environment", {}).content)["env"] for name in ("plain", "named")}
    # PATH and HOME, the SDK's fixed few (LOGNAME SHELL TERM USER) and what Python sets itself.
    baseline = {"PATH", "HOME", "LOGNAME", "SHELL", "TERM", "USER", "LC_CTYPE", "__CF_USER_TEXT_ENCODING"}
    assert set(seen["plain"]) <= baseline and "PATH" in seen["plain"]
    assert set(seen["named"]) - baseline == {"HERMES_TEST_PASSED", "TOKEN"}
    assert (seen["named"]["HERMES_TEST_PASSED"], seen["named"]["TOKEN"]) == ("passed-as-is", "renamed")
    assert all("do-not-leak" not in json.dumps(env) for env in seen.values())


# --- shutdown ---------------------------------------------------------------------------


def test_close_stops_every_server_and_reaps_its_process(tmp_path):
    before = children()
    manager = McpManager({"a": stdio(), "b": stdio(), "hung": faulty("silent", timeout=120.0),
                          "web": McpServerConfig(url=f"http://127.0.0.1:{free_port()}/mcp")})
    manager.start()
    assert manager.wait(["a", "b"], timeout=START_S)
    pids = {json.loads(manager.call(n, "environment", {}).content)["pid"] for n in ("a", "b")}
    assert pids <= children() and len(children() - before) == 3  # a, b and the hung one
    started = time.monotonic()
    manager.close()
    elapsed = time.monotonic() - started
    assert children() - before == set()  # gone, and reaped: pgrep lists zombies too
    for pid in pids:
        with pytest.raises(ProcessLookupError):
            os.kill(pid, 0)
    assert elapsed < 15
    assert {s.status for s in manager.states()} <= {ServerStatus.STOPPED, ServerStatus.FAILED}
    assert manager.state("a").status is ServerStatus.STOPPED
    assert manager.call("a", "read_note", {"key": "k"}).is_error


def test_close_while_servers_are_starting_is_prompt_and_leaves_no_child():
    before = children()
    manager = McpManager({f"s{i}": stdio() for i in range(3)})
    manager.start()
    started = time.monotonic()
    manager.close()
    assert time.monotonic() - started < 15
    assert children() - before == set()
    assert {s.status for s in manager.states()} == {ServerStatus.STOPPED}


# --- pure parts ---------------------------------------------------------------------------


def test_names_are_openai_safe_short_and_unique():
    taken: set[str] = set()
    assert namespaced("gh", "list_issues", taken) == "gh__list_issues"
    assert namespaced("gh", "repo.read/file name", taken) == "gh__repo_read_file_name"
    assert namespaced("gh", "repo_read/file.name", taken) == "gh__repo_read_file_name_2"
    long_a, long_b = namespaced("gh", "x" * 80 + "a", taken), namespaced("gh", "x" * 80 + "b", taken)
    assert len(long_a) == len(long_b) == 64 and long_a != long_b
    assert namespaced("gh", "list_issues", taken) == "gh__list_issues_2"
    assert all(re.fullmatch(r"[A-Za-z0-9_-]{1,64}", n) for n in taken)


def test_header_values_are_filled_from_the_environment_when_the_server_starts():
    config = McpServerConfig(url="https://x/mcp", headers={"Authorization": "Bearer ${TOKEN}", "X-Id": "$ID-$ID"})
    assert http_headers(config, {"TOKEN": "t0k", "ID": "7"}) == {"Authorization": "Bearer t0k", "X-Id": "7-7"}
    with pytest.raises(LaunchError, match=r"^header Authorization names \$TOKEN, which is not set"):
        http_headers(config, {"ID": "7"})


def test_results_show_placeholders_for_what_is_not_text():
    result = to_tool_result(types.CallToolResult(content=[
        types.TextContent(text="two things:"),
        types.AudioContent(data="AAAA" * 512, mime_type="audio/wav"),
        types.EmbeddedResource(resource=types.TextResourceContents(uri="file:///a.txt", text="inline text")),
        types.EmbeddedResource(resource=types.BlobResourceContents(uri="file:///b.bin", blob="AAAA",
                                                                   mime_type="application/pdf")),
        types.ResourceLink(uri="https://example.com/x?sig=secret", name="report.pdf", mime_type="application/pdf"),
    ]))
    assert result.content.splitlines() == [
        "two things:", "[audio: audio/wav, 2 KB]", "inline text", "[resource: application/pdf, 3 B]",
        "[resource link: report.pdf, application/pdf]"]
    assert "sig=secret" not in result.content
    assert to_tool_result(types.CallToolResult(content=[], structured_content={"n": 1})).content == '{"n": 1}'
    error = to_tool_result(types.CallToolResult(content=[], is_error=True))
    assert error.is_error and error.content == "the tool reported an error (no message)"


# --- the command line --------------------------------------------------------------------


def run_cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "hermes_tui.cli", *args], capture_output=True, text=True,
                          stdin=subprocess.DEVNULL, timeout=120)


def test_cli_mcp_list_and_test(hermes_home):
    paths.config_path().write_text(
        "mcp_servers:\n"
        f"  notes: {{command: {json.dumps(sys.executable)}, args: [{json.dumps(SERVER)}, stdio], trust: read-only}}\n"
        f"  broken: {{command: {json.dumps(sys.executable)}, args: [{json.dumps(FAULTY)}, exit], enabled: false}}\n"
        "  web: {url: \"http://127.0.0.1:9/mcp\", headers: {Authorization: \"Bearer ${WEB_TOKEN}\"}}\n",
        encoding="utf-8")
    listing = run_cli("mcp", "list")
    assert listing.returncode == 0, listing.stderr
    lines = listing.stdout.splitlines()
    assert lines[0].split()[:5] == ["notes", "enabled", "stdio", "trust", "read-only"]
    assert lines[1].split()[:5] == ["broken", "disabled", "stdio", "trust", "ask"]
    assert lines[2].split()[:6] == ["web", "enabled", "http", "trust", "ask", "http://127.0.0.1:9/mcp"]
    as_json = json.loads(run_cli("mcp", "list", "--json").stdout)
    assert [(r["name"], r["enabled"], r["transport"], r["trust"]) for r in as_json] == [
        ("notes", True, "stdio", "read-only"), ("broken", False, "stdio", "ask"), ("web", True, "http", "ask")]

    tested = run_cli("mcp", "test", "notes")
    assert tested.returncode == 0, tested.stderr
    assert tested.stdout.startswith("notes: ready in ")
    assert "  notes__read_note [read-only]  Read a note by its key." in tested.stdout.splitlines()

    failed = run_cli("mcp", "test", "broken")
    assert failed.returncode == 2 and failed.stdout == ""
    assert failed.stderr == ("hermes-tui: mcp test broken: failed: exited during startup: "
                             "faulty server: cannot start (no database)\n")
    unknown = run_cli("mcp", "test", "nope")
    assert unknown.returncode == 2
    assert unknown.stderr == "hermes-tui: mcp test nope: no such server under mcp_servers " \
                             "(configured: notes, broken, web)\n"


def test_cli_mcp_bad_config_is_one_line(hermes_home):
    paths.config_path().write_text("mcp_servers:\n  x: {command: y, env: {K: sk-123}}\n", encoding="utf-8")
    result = run_cli("mcp", "list")
    assert result.returncode == 2 and "sk-123" not in result.stderr
    assert result.stderr.count("\n") == 1 and "line 2: mcp_servers.x.env: K must name a variable" in result.stderr
