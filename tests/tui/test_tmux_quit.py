"""Quitting the real ``hermes-tui`` (tmux) while work is in flight loses nothing and crashes nothing.

Ctrl+Q while a long, slow reply streams into a resumed 2,000-message session, and while an
agent call (``run_shell`` sleeping) runs: the process exits 0 with no traceback or fatal
error, the database passes ``PRAGMA integrity_check``, and the stored transcript is valid on
resume: the user's message is kept, a partial reply is kept marked stopped (or not at all),
and a call in flight gets a result ("stopped", or "interrupted" from the resume path).
"""

from __future__ import annotations

import shlex
import sqlite3
import time

import pytest
from support.scripted_endpoint import call, calls
from support.tmux import _app_command, wait_for

from hermes_tui.core.transcript import Message
from hermes_tui.store import Store

pytestmark = pytest.mark.integration

START_TIMEOUT = 120.0
STEP_TIMEOUT = 60.0
EXIT_TIMEOUT = 60.0  # quitting waits a bounded time for the worker; past this the app is stuck
SEEDED = 2_000
PROMPT = "Tell me a long story"
CRASH_SIGNS = ("Traceback", "Segmentation fault", "Fatal Python error", "core dumped")


def _home(tmp_path, base_url: str, extra: str = "", compression: str = "    provider: extractive\n",
          window: int = 1_000_000):
    home = tmp_path / "hermes_home"
    home.mkdir()
    (home / "config.yaml").write_text(
        "model:\n  provider: openai-api\n  model: scripted\n"
        f"  base_url: {base_url}\n  context_length: {window}\n"
        "auxiliary:\n  compression:\n" + compression + extra
    )
    return home


def _start(tmux, home, cwd, hf_offline_env, *args: str) -> None:
    env = {"HERMES_TUI_HOME": str(home), **hf_offline_env, "PYTHONFAULTHANDLER": "1"}
    app = shlex.join(["env", *(f"{k}={v}" for k, v in env.items()), *_app_command(), *args])
    # A shell reaps the app and writes its exit status down (a signal shows as 128 + its number).
    status = shlex.quote(str(home / "exit_status"))
    tmux.start(f"sh -c {shlex.quote(f'{app}; echo $? > {status}')}", cwd=cwd)


def _quit_and_check(tmux, home) -> None:
    tmux.keys("C-q")
    status = home / "exit_status"
    deadline = time.monotonic() + EXIT_TIMEOUT
    while not (status.exists() and status.read_text().strip()):
        assert time.monotonic() < deadline, f"the app did not exit after Ctrl+Q; {tmux.stacks()}"
        time.sleep(0.1)
    everything = tmux.everything()
    for sign in CRASH_SIGNS:
        assert sign not in everything, everything
    assert status.read_text().strip() == "0", f"the app ended with {status.read_text().strip()}:\n{everything}"
    log = (home / "logs" / "agent.log").read_text()
    assert "Traceback" not in log and " ERROR " not in log, log[-4000:]
    assert "turn failed" not in log and "closed database" not in log, log[-4000:]  # the store closed under it
    with sqlite3.connect(home / "state.db") as conn:
        assert conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"


def test_quit_while_a_long_reply_streams_into_a_large_session(tmux, tmp_path, servers, hf_offline_env):
    pieces = [f"word{i} " for i in range(2_000)]
    server = servers.start([{"text": pieces, "finish_reason": "stop", "gap": 0.02}])
    home = _home(tmp_path, server.base_url)
    with Store(home / "state.db") as store:
        seeded = [Message(role="user" if i % 2 == 0 else "assistant", content=f"seeded message {i}")
                  for i in range(SEEDED)]
        session = store.create_session("large", messages=seeded)
    _start(tmux, home, tmp_path, hf_offline_env, "--resume", session.id)

    wait_for(tmux, lambda s: "Message · Enter sends" in s, "the app's first screen", START_TIMEOUT)
    tmux.keys(PROMPT, literal=True)
    tmux.keys("Enter")
    wait_for(tmux, lambda s: "word40 " in s, "the reply streaming", STEP_TIMEOUT)
    _quit_and_check(tmux, home)

    with Store(home / "state.db") as store:
        first, *stored = store.load_active(session.id)
    assert first.is_system_prompt  # the turn's system prompt, put in front (not under test here)
    assert len(stored) >= SEEDED + 1
    assert stored[SEEDED].role == "user" and stored[SEEDED].content == PROMPT
    # What arrived is kept as Escape keeps it: marked stopped, never a finished reply.
    (reply,) = stored[SEEDED + 1:]
    assert reply.role == "assistant" and reply.meta.get("stopped") is True, reply
    assert reply.content.startswith("word0 word1 ") and "word1999" not in reply.content


def test_quit_while_an_agent_command_runs(tmux, tmp_path, servers, hf_offline_env):
    workspace = tmp_path / "ws"
    workspace.mkdir()
    server = servers.start([
        calls(call("run_shell", "call_sleep", command="sleep 60")),
        {"text": ["never ", "asked"], "finish_reason": "stop"},
    ])
    home = _home(tmp_path, server.base_url, "agent:\n  approval: full\n")
    _start(tmux, home, workspace, hf_offline_env)

    wait_for(tmux, lambda s: "Message · Enter sends" in s, "the app's first screen", START_TIMEOUT)
    tmux.keys("Sleep for a minute", literal=True)
    tmux.keys("Enter")
    wait_for(tmux, lambda s: "⚙ run_shell" in s, "the command running", STEP_TIMEOUT)
    time.sleep(1.0)  # the command is under way
    _quit_and_check(tmux, home)

    with Store(home / "state.db") as store:
        (session,) = store.list_sessions()
        first, *stored = store.load_active(session.id)
    assert first.is_system_prompt  # the turn's system prompt, put in front (not under test here)
    assert [m.role for m in stored][:2] == ["user", "assistant"]
    assert stored[1].tool_calls and stored[1].tool_calls[0]["id"] == "call_sleep"
    # The command was killed and its call answered "stopped" before the store closed; no
    # further model request was made for it.
    assert [m.role for m in stored] == ["user", "assistant", "tool"], [m.role for m in stored]
    assert stored[2].tool_call_id == "call_sleep" and stored[2].meta["tool"]["status"] == "stopped", stored[2].meta
    assert len(server.requests()) == 1


def test_quit_while_a_pass_waits_for_a_slow_summarizer(tmux, tmp_path, servers, hf_offline_env):
    chat = servers.start([{"text": ["Short ", "answer."], "finish_reason": "stop"}])
    summarizer = servers.start([{"text": ["A summary."], "delay": 120}])
    home = _home(tmp_path, chat.base_url, compression=(
        f"    provider: openai-api\n    model: scripted\n    base_url: {summarizer.base_url}\n"),
        extra="compression:\n  policy: per_exchange\n",  # a pass after the exchange, not at a watermark
        window=16_384)  # ~3,200 seeded tokens: more than the verbatim tail, under the threshold
    with Store(home / "state.db") as store:
        seeded = [Message(role="user" if i % 2 == 0 else "assistant", content=f"seeded message {i} " * 20)
                  for i in range(40)]
        session = store.create_session("passes", messages=seeded)
    _start(tmux, home, tmp_path, hf_offline_env, "--resume", session.id)

    wait_for(tmux, lambda s: "Message · Enter sends" in s, "the app's first screen", START_TIMEOUT)
    tmux.keys(PROMPT, literal=True)
    tmux.keys("Enter")
    deadline = time.monotonic() + STEP_TIMEOUT
    while not summarizer.requests():  # the pass is in flight: the summarizer sleeps on it
        assert time.monotonic() < deadline, f"no pass reached the summarizer:\n{tmux.screen()}"
        time.sleep(0.1)
    _quit_and_check(tmux, home)

    with Store(home / "state.db") as store:
        first, *stored = store.load_active(session.id)
    assert first.is_system_prompt  # the turn's system prompt, put in front (not under test here)
    # The pass was abandoned (a plan writes nothing): the transcript is what it was plus the exchange.
    assert [m.content for m in stored[:40]] == [m.content for m in seeded]
    assert [(m.role, m.content) for m in stored[40:]] == [("user", PROMPT), ("assistant", "Short answer.")]
