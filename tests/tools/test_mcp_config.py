"""What an MCP server's config does when it starts, against real servers these tests start
(tests/support/mcp_server.py over stdio and over streamable HTTP): header values taken from our
environment reach the HTTP server, a stdio server runs in its ``cwd``, and a disabled server is
never started until asked."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from support.mcp_app import start_http_mcp
from support.servers import stop_server as _stop

from hermes_tui.config import McpServerConfig
from hermes_tui.tools import ToolRegistry
from hermes_tui.tools.mcp import McpManager, ServerStatus

SERVER = str(Path(__file__).resolve().parents[1] / "support" / "mcp_server.py")
START_S = 60.0  # bounds a hang only


def children() -> set[int]:
    out = subprocess.run(["pgrep", "-P", str(os.getpid())], capture_output=True, text=True).stdout
    return {int(pid) for pid in out.split()}


@pytest.fixture(scope="module")
def http_url(tmp_path_factory):
    process, url = start_http_mcp(tmp_path_factory.mktemp("mcp-http") / "server.log")
    yield url
    _stop(process)


@pytest.fixture
def managers():
    made: list[McpManager] = []

    def make(servers: dict[str, McpServerConfig]) -> McpManager:
        made.append(McpManager(servers))
        made[-1].start()
        return made[-1]

    yield make
    for manager in made:
        manager.close()


def test_header_values_come_from_our_environment_and_reach_the_http_server(managers, http_url, monkeypatch):
    monkeypatch.setenv("HERMES_TEST_MCP_TOKEN", "t0k-from-env")
    monkeypatch.setenv("HERMES_TEST_MCP_ID", "7")
    monkeypatch.delenv("HERMES_TEST_MCP_UNSET", raising=False)
    manager = managers({
        "web": McpServerConfig(url=http_url, headers={"Authorization": "Bearer ${HERMES_TEST_MCP_TOKEN}",
                                                      "X-Client": "hermes-$HERMES_TEST_MCP_ID"}),
        "nokey": McpServerConfig(url=http_url, headers={"Authorization": "Bearer ${HERMES_TEST_MCP_UNSET}"}),
    })
    assert manager.wait(timeout=START_S)
    assert manager.state("web").status is ServerStatus.READY, manager.state("web").reason
    seen = json.loads(manager.call("web", "request_headers", {}).content)["headers"]
    assert seen["authorization"] == "Bearer t0k-from-env" and seen["x-client"] == "hermes-7"
    # A header naming a variable that is not set: the server is not started, and says which.
    state = manager.state("nokey")
    assert state.status is ServerStatus.FAILED
    assert state.reason == "header Authorization names $HERMES_TEST_MCP_UNSET, which is not set in the environment"


def test_a_disabled_server_is_not_started_or_offered_until_restarted(managers):
    before = children()
    stdio = {"command": sys.executable, "args": [SERVER, "stdio"]}
    manager = managers({"off": McpServerConfig(**stdio, enabled=False), "on": McpServerConfig(**stdio)})
    assert manager.wait(timeout=START_S)
    assert manager.state("on").status is ServerStatus.READY
    off = manager.state("off")
    assert (off.status, off.reason) == (ServerStatus.STOPPED, "disabled")
    assert len(children() - before) == 1  # only the enabled one runs
    registry = ToolRegistry()
    manager.sync(registry)
    assert "on__read_note" in registry and not any(tool.name.startswith("off__") for tool in registry)
    assert manager.summary() == "MCP 1/1 ready"  # a disabled server is no failure
    assert manager.call("off", "read_note", {"key": "k"}).is_error

    manager.restart("off")  # what /tools does for it
    assert manager.wait(timeout=START_S) and manager.state("off").status is ServerStatus.READY
    manager.sync(registry)
    assert "off__read_note" in registry and len(children() - before) == 2


def test_a_stdio_server_runs_in_its_cwd_and_a_missing_one_is_a_start_failure(managers, tmp_path):
    stdio = {"command": sys.executable, "args": [SERVER, "stdio"]}
    (tmp_path / "here").mkdir()
    manager = managers({"here": McpServerConfig(**stdio, cwd=str(tmp_path / "here")),
                        "nowhere": McpServerConfig(**stdio, cwd=str(tmp_path / "missing"))})
    assert manager.wait(timeout=START_S)
    seen = json.loads(manager.call("here", "environment", {}).content)
    assert Path(seen["cwd"]).resolve() == (tmp_path / "here").resolve()
    state = manager.state("nowhere")
    assert (state.status, state.reason) == (ServerStatus.FAILED, f"cwd {tmp_path / 'missing'}: no such directory")
