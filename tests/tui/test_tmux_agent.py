"""Smoke test: one agent turn of the real ``hermes-tui`` in a real terminal (tmux).

The chat model is a scripted OpenAI-compatible server in a subprocess
(tests/support/scripted_openai_server.py); the app starts in a temp workspace. One turn
reads a file (no prompt: a read inside the workspace), runs an allowlisted read-only
command (no prompt), then edits the file: the approval prompt shows the diff, ``y``
approves, the edit lands and the model's answer ends the turn. Ctrl+Q quits with 0 and
no traceback reaches the terminal or the log.
"""

from __future__ import annotations

import re

import pytest
from support.scripted_endpoint import answer, call, calls
from support.tmux import app_command_line, scripted_home, wait_for

from hermes_tui.store import Store

pytestmark = pytest.mark.integration

START_TIMEOUT = 90.0
STEP_TIMEOUT = 60.0
EXIT_TIMEOUT = 30.0
ANSWER = "The size is now large."
IDLE_IN_ASK = re.compile(r"  ask\s*$", re.M)  # the status bar's end: ask mode, no step (no turn running)


def test_one_agent_turn_reads_runs_and_edits_after_approval(tmux, tmp_path, servers, hf_offline_env):
    workspace = tmp_path / "ws"
    workspace.mkdir()
    (workspace / "notes.txt").write_text("colour: red\nsize: small\n")
    server = servers.start([
        calls(call("read_file", "call_read", path="notes.txt")),
        calls(call("run_shell", "call_wc", command="wc -l notes.txt")),
        calls(call("edit_file", "call_edit", path="notes.txt", old_string="size: small", new_string="size: large")),
        answer(ANSWER),
    ])
    home = scripted_home(tmp_path, server.base_url)
    env = {"HERMES_TUI_HOME": str(home), **hf_offline_env, "PYTHONFAULTHANDLER": "1"}
    tmux.start(app_command_line(env), cwd=workspace)

    wait_for(tmux, lambda s: "Message · Enter sends" in s and IDLE_IN_ASK.search(s), "the app's first screen", START_TIMEOUT)
    tmux.keys("Change the size to large", literal=True)
    tmux.keys("Enter")

    # The read and the command ran unasked; the edit asks, with its diff.
    screen = wait_for(tmux, lambda s: "Allow edit_file?" in s, "the approval prompt", STEP_TIMEOUT)
    assert "-size: small" in screen and "+size: large" in screen
    assert "Allow once (y)" in screen and "Deny (n)" in screen
    assert (workspace / "notes.txt").read_text() == "colour: red\nsize: small\n"
    tmux.keys("y")

    screen = wait_for(tmux, lambda s: ANSWER in s and IDLE_IN_ASK.search(s), "the final answer",
                      STEP_TIMEOUT)
    assert (workspace / "notes.txt").read_text() == "colour: red\nsize: large\n"
    assert "⚙ read_file" in screen and "⚙ run_shell" in screen and "⚙ edit_file" in screen, screen
    assert screen.count("✓") >= 3, screen  # three calls, each row with how it went
    assert "exit 0" in screen  # the command's row
    assert len(server.requests()) == 4

    tmux.keys("C-q")
    ended = tmux.wait_exit(EXIT_TIMEOUT)
    everything = tmux.everything()
    assert ended == "0", f"the app ended with {ended}:\n{everything}"
    assert "Traceback" not in everything, everything
    log = (home / "logs" / "agent.log").read_text()
    assert "Traceback" not in log and " ERROR " not in log, log[-4000:]

    with Store(home / "state.db") as store:
        (session,) = store.list_sessions()
        stored = store.load_active(session.id)
    roles = [m.role for m in stored]
    assert roles == ["system", "user"] + ["assistant", "tool"] * 3 + ["assistant"]
    assert stored[0].is_system_prompt
    assert [m.meta["tool"]["status"] for m in stored if m.role == "tool"] == ["ok"] * 3
