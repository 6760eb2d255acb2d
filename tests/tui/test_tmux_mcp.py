"""The real ``hermes-tui`` in a real terminal (tmux) with MCP servers configured: a stdio server
(tests/support/mcp_server.py) and one that dies at start (tests/support/mcp_faulty_server.py).
The status bar and ``/tools`` show both; Ctrl+Q quits promptly and leaves no server process
(running or zombie) behind. The chat model is the scripted OpenAI-compatible endpoint
(tests/support/scripted_openai_server.py), so no model is loaded."""

from __future__ import annotations

import json
import shlex
import subprocess
import sys
import time
from pathlib import Path

import pytest
from support.servers import stop_server as _stop
from support.tmux import _app_command, wait_for

pytestmark = pytest.mark.integration

SUPPORT = Path(__file__).resolve().parents[1] / "support"
START_TIMEOUT = 90.0  # the app on screen and the servers up (Python processes on a loaded machine)
EXIT_TIMEOUT = 30.0   # past this the app is stuck


def children(pid: int) -> set[int]:
    found = set()
    for entry in Path("/proc").glob("[0-9]*/stat"):
        try:
            if int(entry.read_text().rsplit(")", 1)[1].split()[1]) == pid:
                found.add(int(entry.parent.name))
        except (OSError, ValueError, IndexError):
            continue
    return found


@pytest.fixture
def scripted_url(tmp_path):
    (tmp_path / "script.json").write_text(json.dumps([{"text": ["hi"], "finish_reason": "stop"}]))
    process = subprocess.Popen(
        [sys.executable, str(SUPPORT / "scripted_openai_server.py"), str(tmp_path / "script.json"),
         str(tmp_path / "requests.jsonl")], stdout=subprocess.PIPE, stdin=subprocess.DEVNULL, text=True)
    line = process.stdout.readline()
    assert line.startswith("PORT "), line
    yield f"http://127.0.0.1:{int(line.split()[1])}/v1"
    _stop(process)


def test_mcp_servers_in_a_real_terminal_shown_and_gone_after_quit(tmux, tmp_path, scripted_url):
    home = tmp_path / "home"
    home.mkdir()
    (home / "config.yaml").write_text(f"""\
model:
  provider: openai-api
  model: scripted
  base_url: {scripted_url}
  context_length: 32768
auxiliary:
  compression:
    provider: extractive
mcp_servers:
  notes:
    command: {sys.executable}
    args: [{SUPPORT / "mcp_server.py"}, stdio]
  broken:
    command: {sys.executable}
    args: [{SUPPORT / "mcp_faulty_server.py"}, exit]
""")
    command = shlex.join(["env", f"HERMES_TUI_HOME={home}", "PYTHONFAULTHANDLER=1", *_app_command()])
    tmux.start(command, cwd=tmp_path)

    wait_for(tmux, lambda s: "MCP 1/2 ready, 1 failed" in s, "the MCP part of the status bar", START_TIMEOUT)
    app_pid = int(tmux.pane("#{pane_pid}"))
    servers = children(app_pid)
    assert len(servers) == 1, servers  # the stdio server that runs (the broken one has exited)

    tmux.keys("/tools", literal=True)
    tmux.keys("Enter")
    screen = wait_for(tmux, lambda s: "MCP servers" in s and "notes__read_note" in s, "the tools screen", 30)
    broken = next(line for line in screen.splitlines() if "broken" in line)
    assert "failed" in broken and "cannot start" in broken, screen
    tmux.keys("Escape")
    wait_for(tmux, lambda s: "MCP servers" not in s, "the chat again", 30)

    started = time.monotonic()
    tmux.keys("C-q")
    ended = tmux.wait_exit(EXIT_TIMEOUT)
    quit_s = time.monotonic() - started
    assert ended == "0", f"{ended}\n{tmux.everything()}"
    assert not any(Path(f"/proc/{pid}").exists() for pid in servers), "an MCP server outlived the app"
    print(f"hermes-tui quit with an MCP server running in {quit_s:.2f} s")
