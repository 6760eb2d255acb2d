"""Smoke test: escape sequences in a tool's output and a model's reply never reach the real
terminal. The real ``hermes-tui`` in tmux (tests/support/tmux.py) runs one agent turn
against a scripted model: it reads a file whose first line carries an OSC 52 clipboard
write, and answers with another (ST-terminated) and a screen clear. tmux's ``pipe-pane``
records every byte the app writes to the pty; with ``set-clipboard on`` tmux would also
keep an OSC 52 write as a paste buffer. Neither may happen; the pane shows them as ``␛``.
"""

from __future__ import annotations

import re
import shlex

import pytest
from support.scripted_endpoint import answer, call, calls
from support.tmux import app_command_line, scripted_home, wait_for

pytestmark = pytest.mark.integration

START_TIMEOUT = 90.0
STEP_TIMEOUT = 60.0
EXIT_TIMEOUT = 30.0
IDLE_IN_ASK = re.compile(r"  ask\s*$", re.M)
OSC52_BEL = "\x1b]52;c;aGVsbG8=\x07"
OSC52_ST = "\x1b]52;c;d29ybGQ=\x1b\\"


def test_osc52_from_a_tool_result_and_a_reply_never_reaches_the_terminal(tmux, tmp_path, servers, hf_offline_env):
    workspace = tmp_path / "ws"
    workspace.mkdir()
    (workspace / "evil.txt").write_text(f"{OSC52_BEL}x = [1,\n{OSC52_ST}echo [a\n")
    server = servers.start([
        calls(call("read_file", "call_read", path="evil.txt")),
        answer(f"Read it {OSC52_ST} [bold]x[/] done\x1b[2J\x1b[H"),
    ])
    home = scripted_home(tmp_path, server.base_url)
    tmux.conf.write_text(tmux.conf.read_text() + "set -s set-clipboard on\n")  # OSC 52 would make a buffer
    raw = tmp_path / "pty.bin"
    env = {"HERMES_TUI_HOME": str(home), **hf_offline_env, "PYTHONFAULTHANDLER": "1"}
    app = app_command_line(env)
    tmux.start(f"sleep 1; exec {app}", cwd=workspace)  # the second lets pipe-pane attach before any output
    tmux.run("pipe-pane", "-o", "-t", tmux.target, f"cat >> {shlex.quote(str(raw))}")

    wait_for(tmux, lambda s: "Message · Enter sends" in s and IDLE_IN_ASK.search(s), "the app's first screen",
             START_TIMEOUT)
    tmux.keys("Read evil.txt", literal=True)
    tmux.keys("Enter")
    screen = wait_for(tmux, lambda s: "done" in s and IDLE_IN_ASK.search(s), "the answer", STEP_TIMEOUT)
    assert "␛]52;c;aGVsbG8=␇x = [1," in screen, screen  # the result's row, its first line as text
    assert "Read it ␛]52;c;d29ybGQ=␛\\ [bold]x[/] done␛[2J␛[H" in screen, screen

    tmux.keys("C-q")
    assert tmux.wait_exit(EXIT_TIMEOUT) == "0", tmux.everything()
    written = raw.read_bytes()
    assert b"Read it" in written  # the recording holds the app's output
    assert b"\x1b]52" not in written and b"\x1b[2J" not in written  # (Textual itself sends OSC 22 with a BEL)
    assert tmux.run("list-buffers").strip() == ""  # no clipboard write reached tmux
