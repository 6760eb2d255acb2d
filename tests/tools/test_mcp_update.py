"""``McpManager.update``: a new set of servers restarts only those whose config changed, against
real stdio servers (tests/support/mcp_server.py); each server's pid comes from its own
``environment`` tool, and a stopped one's process must be gone."""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path

from hermes_tui.config import McpServerConfig
from hermes_tui.tools.mcp import McpManager, ServerStatus

SERVER = str(Path(__file__).resolve().parents[1] / "support" / "mcp_server.py")
START_S = 60.0  # bounds a hang only


def stdio(label: str, **settings) -> McpServerConfig:
    # The label only tells the processes apart; the server ignores it.
    return McpServerConfig(command=sys.executable, args=[SERVER, "stdio", label], **settings)


def pid_of(manager: McpManager, name: str) -> int:
    result = manager.call(name, "environment", {})
    assert not result.is_error, result.content
    return json.loads(result.content)["pid"]


def gone(pid: int, timeout: float = START_S) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return True
        try:  # our child: reaped by the SDK, but a zombie still answers kill(0)
            if Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] == "Z":
                time.sleep(0.05)
                continue
        except OSError:
            return True
        time.sleep(0.05)
    return False


def test_update_restarts_only_the_servers_whose_config_changed():
    one, two = stdio("one"), stdio("two")
    manager = McpManager({"one": one, "two": two})
    manager.start()
    try:
        assert manager.wait(timeout=START_S)
        first = {name: pid_of(manager, name) for name in ("one", "two")}

        manager.update({"one": one, "two": stdio("two", enabled=False)})  # two disabled
        assert gone(first["two"]), "the disabled server's process is still there"
        assert manager.wait(timeout=START_S)
        assert manager.state("two").status is ServerStatus.STOPPED and manager.state("two").reason == "disabled"
        assert not any(t.server == "two" for t in manager.tools())
        assert pid_of(manager, "one") == first["one"]  # untouched

        manager.update({"one": one, "two": two, "three": stdio("three", trust="trusted")})
        assert manager.wait(timeout=START_S)
        assert [s.status for s in manager.states()] == [ServerStatus.READY] * 3
        second = {name: pid_of(manager, name) for name in ("one", "two", "three")}
        assert second["one"] == first["one"] and second["two"] != first["two"]

        manager.update({"one": stdio("one", trust="trusted"), "two": two})  # one changed, three removed
        assert gone(second["three"]), "the removed server's process is still there"
        assert gone(second["one"]), "the changed server's old process is still there"
        assert manager.wait(timeout=START_S)
        assert manager.names() == ["one", "two"] and [s.name for s in manager.states()] == ["one", "two"]
        assert manager.state("one").trust == "trusted" and manager.state("one").status is ServerStatus.READY
        assert pid_of(manager, "two") == second["two"]
        assert not any(t.server == "three" for t in manager.tools())
        assert manager.call("three", "environment", {}).content == "MCP server three is no longer configured"
    finally:
        manager.close()


def test_a_server_removed_while_it_starts_leaves_no_state_and_no_process():
    manager = McpManager({"slow": McpServerConfig(
        command="sh", args=["-c", f'sleep 1; exec "{sys.executable}" "{SERVER}" stdio'])})
    manager.start()
    try:
        manager.update({})
        assert manager.states() == [] and manager.summary() == ""
        time.sleep(2)  # past when it would have come up
        assert manager.states() == [] and manager.tools() == []
    finally:
        manager.close()
