"""The agent loop end to end: ``hermes-tui run`` in a subprocess against a scripted
OpenAI-compatible server in another (tests/support/scripted_openai_server.py), the real openai
SDK, real files in a temp workspace, real ``bash`` for ``run_shell`` and the real store.
Also the loop in-process with the real client: approval answers and "always" rules."""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

from support.scripted_endpoint import answer, call, calls

from hermes_tui.config import Config
from hermes_tui.providers.extractive.summarizer import ExtractiveSummarizer
from hermes_tui.providers.openai.chat import OpenAIChatClient
from hermes_tui.session.agent import COMPLETED, STOPPED, AgentListener, AgentTurn, Answer, Tools
from hermes_tui.session.wiring import open_session
from hermes_tui.store import Store
from hermes_tui.store.rules import StoredRules
from hermes_tui.tools.approval import Mode, Rule
from hermes_tui.tools.builtin import builtin_registry
from hermes_tui.tools.workspace import Workspace

ROOT = Path(__file__).resolve().parents[2]
CLI_TIMEOUT_S = 120
WAIT_S = 60


# --- the scripted endpoint -------------------------------------------------------------


# --- running the CLI --------------------------------------------------------------------


def write_config(path: Path, base_url: str, **agent: Any) -> Path:
    lines = [
        "model:", "  provider: openai-api", "  model: scripted", f"  base_url: {base_url}",
        "  context_length: 32768",
        "auxiliary:", "  compression:", "    provider: extractive",
    ]
    if agent:
        lines.append("agent:")
        lines += [f"  {key}: {value}" for key, value in agent.items()]
    path.write_text("\n".join(lines) + "\n")
    return path


def cli_env(home: Path) -> dict[str, str]:
    env = {**os.environ, "HERMES_TUI_HOME": str(home), "PYTHONUNBUFFERED": "1"}
    env.pop("OPENAI_API_KEY", None)
    return env


def cli_args(config: Path, *args: str) -> list[str]:
    return [sys.executable, "-m", "hermes_tui.cli", "--config", str(config), "run", *args]


def run_cli(home: Path, config: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(cli_args(config, *args), env=cli_env(home), cwd=ROOT, stdin=subprocess.DEVNULL,
                          capture_output=True, text=True, timeout=CLI_TIMEOUT_S)


def explain(proc) -> str:
    return f"exit {proc.returncode}\n--- stdout ---\n{proc.stdout[-3000:]}\n--- stderr ---\n{proc.stderr[-3000:]}"


def tool_lines(stderr: str) -> list[str]:
    return [line for line in stderr.splitlines() if line.startswith("tool ")]


# --- what the store holds ----------------------------------------------------------------


def stored(home: Path) -> dict[str, list[dict]]:
    """Every session's rows (active and archived), in order, straight from the database."""
    conn = sqlite3.connect(home / "state.db")
    try:
        rows = conn.execute(
            "SELECT session_id, role, content, tool_calls, tool_call_id, meta, state FROM messages "
            "ORDER BY session_id, position, rowid").fetchall()
    finally:
        conn.close()
    out: dict[str, list[dict]] = {}
    for sid, role, content, tool_calls, tool_call_id, meta, state in rows:
        out.setdefault(sid, []).append({
            "role": role, "content": content, "tool_calls": json.loads(tool_calls) if tool_calls else None,
            "tool_call_id": tool_call_id, "meta": json.loads(meta), "state": state,
        })
    return out


def only_session(home: Path) -> tuple[str, list[dict]]:
    sessions = stored(home)
    assert len(sessions) == 1, list(sessions)
    return next(iter(sessions.items()))


def assert_every_call_answered_once(rows: list[dict]) -> dict[str, dict]:
    """Each call is answered by exactly one tool row, right after its assistant message."""
    results: dict[str, dict] = {}
    open_calls: list[str] = []
    for row in rows:
        if row["role"] == "tool":
            assert row["tool_call_id"] in open_calls, ("a result for no open call", row)
            open_calls.remove(row["tool_call_id"])
            assert row["tool_call_id"] not in results
            results[row["tool_call_id"]] = row
            continue
        assert not open_calls, ("calls left unanswered before", row)
        if row["role"] == "assistant" and row["tool_calls"]:
            open_calls = [c["id"] for c in row["tool_calls"]]
    assert not open_calls, f"unanswered at the end: {open_calls}"
    return results


def status(row: dict) -> str:
    return row["meta"]["tool"]["status"]


# --- hermes-tui run, end to end --------------------------------------------------------------


def test_run_reads_runs_and_edits_in_auto_edit_mode(scripted, hermes_home, tmp_path):
    workspace = tmp_path / "ws"
    workspace.mkdir()
    (workspace / "notes.txt").write_text("hello world\nsecond line\n")
    server = scripted([
        calls(call("read_file", "c1", path="notes.txt")),
        calls(call("run_shell", "c2", command="wc -l notes.txt"),
              call("edit_file", "c3", path="notes.txt", old_string="hello", new_string="goodbye")),
        answer("Done: notes.txt now says goodbye."),
    ])
    config = write_config(tmp_path / "config.yaml", server.base_url)
    proc = run_cli(hermes_home, config, "Edit notes.txt", "--workspace", str(workspace), "--approve", "auto-edit")
    assert proc.returncode == 0, explain(proc)
    assert proc.stdout == "Done: notes.txt now says goodbye.\n"
    assert (workspace / "notes.txt").read_text() == "goodbye world\nsecond line\n"

    lines = tool_lines(proc.stderr)
    assert [line.split()[1] for line in lines] == ["read_file", "run_shell", "edit_file"], proc.stderr
    assert all(" -> ok" in line and " ms" in line for line in lines), lines
    assert "exit 0" in lines[1] and 'command="wc -l notes.txt"' in lines[1]

    requests = server.requests()
    assert len(requests) == 3
    assert all(r["tools"] for r in requests)  # the tools go with every request
    sent = requests[2]["messages"]
    results = {m["tool_call_id"]: m["content"] for m in sent if m["role"] == "tool"}
    assert "hello world" in results["c1"] and "2 notes.txt" in results["c2"]
    assert [m["content"] for m in sent if m["role"] == "user"] == ["Edit notes.txt"]

    _, rows = only_session(hermes_home)
    answered = assert_every_call_answered_once(rows)
    assert {k: status(v) for k, v in answered.items()} == {"c1": "ok", "c2": "ok", "c3": "ok"}
    assert rows[-1]["content"] == "Done: notes.txt now says goodbye."


def test_a_call_written_as_text_runs_and_is_stored_as_a_native_call(scripted, hermes_home, tmp_path):
    """A small model's call as a JSON code block (as Qwen2.5-Coder 0.5B writes it,
    tests/chat/fixtures): the file is read, the call is stored and sent back in OpenAI format,
    and the turn goes on to the model's answer."""
    workspace = tmp_path / "ws"
    workspace.mkdir()
    (workspace / "setup.cfg").write_text("[metadata]\nname = shop\nversion = 1.1.0\n")
    written = 'Reading it.\n```json\n{\n  "name": "read_file",\n  "arguments": {"path": "setup.cfg"}\n}\n```'
    server = scripted([answer(written), answer("The version is 1.1.0.")])
    config = write_config(tmp_path / "config.yaml", server.base_url)
    proc = run_cli(hermes_home, config, "Read setup.cfg", "--workspace", str(workspace))
    assert proc.returncode == 0, explain(proc)
    assert proc.stdout == "The version is 1.1.0.\n"
    line, = tool_lines(proc.stderr)
    assert line.startswith('tool read_file path="setup.cfg" -> ok'), proc.stderr

    _, rows = only_session(hermes_home)
    answered = assert_every_call_answered_once(rows)
    reply = next(r for r in rows if r["role"] == "assistant" and r["tool_calls"])
    assert reply["content"] == "Reading it."  # the prose stays; the call text does not
    assert reply["meta"]["recovered_calls"] == "json_block"
    stored_call, = reply["tool_calls"]
    assert stored_call["type"] == "function" and stored_call["id"] in answered
    assert stored_call["function"] == {"name": "read_file", "arguments": '{"path": "setup.cfg"}'}
    assert "version = 1.1.0" in answered[stored_call["id"]]["content"]
    assert rows[-1]["content"] == "The version is 1.1.0."
    assert "recovered_calls" not in rows[-1]["meta"]

    sent = server.requests()[1]["messages"]  # the model sees its call as a native one
    assistant, result = sent[-2], sent[-1]
    assert assistant["tool_calls"][0]["function"]["name"] == "read_file"
    assert result["role"] == "tool" and result["tool_call_id"] == stored_call["id"]


def test_a_json_example_in_an_explanation_is_an_answer_and_never_runs(scripted, hermes_home, tmp_path):
    workspace = tmp_path / "ws"
    workspace.mkdir()
    text = ("To delete the build folder you could run a command. The run_shell tool takes the command and "
            "an optional timeout in seconds; it runs in the workspace and returns the output and exit code.\n\n"
            "For example:\n```json\n{\"name\": \"run_shell\", \"arguments\": {\"command\": \"touch made\"}}\n```\n\n"
            "Check the output afterwards to see that the folder is gone, and run the tests again.")
    server = scripted([answer(text)])
    config = write_config(tmp_path / "config.yaml", server.base_url)
    proc = run_cli(hermes_home, config, "How do I clean?", "--workspace", str(workspace), "--approve", "full")
    assert proc.returncode == 0, explain(proc)
    assert proc.stdout == text + "\n"
    assert not tool_lines(proc.stderr) and not (workspace / "made").exists()
    assert len(server.requests()) == 1
    _, rows = only_session(hermes_home)
    assert rows[-1]["tool_calls"] is None and "recovered_calls" not in rows[-1]["meta"]


def test_run_read_only_denies_edits_and_commands(scripted, hermes_home, tmp_path):
    workspace = tmp_path / "ws"
    workspace.mkdir()
    (workspace / "notes.txt").write_text("hello\n")
    server = scripted([
        calls(call("edit_file", "e1", path="notes.txt", old_string="hello", new_string="bye"),
              call("run_shell", "s1", command="touch made-by-shell"),
              call("read_file", "r1", path="notes.txt")),
        answer("I could only read."),
    ])
    config = write_config(tmp_path / "config.yaml", server.base_url)
    proc = run_cli(hermes_home, config, "Change it", "--workspace", str(workspace), "--approve", "read-only")
    assert proc.returncode == 0, explain(proc)  # denials are answers: the turn completes
    assert proc.stdout == "I could only read.\n"
    assert (workspace / "notes.txt").read_text() == "hello\n"
    assert not (workspace / "made-by-shell").exists()
    _, rows = only_session(hermes_home)
    answered = assert_every_call_answered_once(rows)
    assert [status(answered[c]) for c in ("e1", "s1", "r1")] == ["denied", "denied", "ok"]
    assert "read-only mode" in answered["s1"]["content"]
    sent = server.requests()[1]["messages"]
    assert any(m["role"] == "tool" and m["content"].startswith("denied:") for m in sent)


def test_run_denies_a_command_that_would_ask_in_ask_mode(scripted, hermes_home, tmp_path):
    workspace = tmp_path / "ws"
    workspace.mkdir()
    server = scripted([calls(call("run_shell", "s1", command="touch x && ls")), answer("ok")])
    config = write_config(tmp_path / "config.yaml", server.base_url)
    started = time.monotonic()
    proc = run_cli(hermes_home, config, "Do it", "--workspace", str(workspace))  # agent.approval: ask
    assert proc.returncode == 0, explain(proc)
    assert time.monotonic() - started < CLI_TIMEOUT_S  # denied, never waited for
    assert not (workspace / "x").exists()
    line, = tool_lines(proc.stderr)
    assert "-> denied" in line and "headless" in line


def test_run_stops_at_the_step_limit_and_asks_before_a_third_identical_call(scripted, hermes_home, tmp_path):
    workspace = tmp_path / "ws"
    workspace.mkdir()
    (workspace / "a.txt").write_text("a\n")
    server = scripted([calls(call("read_file", "r", path="a.txt"))])  # the same call, forever
    config = write_config(tmp_path / "config.yaml", server.base_url, max_steps=4)
    proc = run_cli(hermes_home, config, "Loop", "--workspace", str(workspace))
    assert proc.returncode == 1, explain(proc)
    assert proc.stdout == ""
    problem = [line for line in proc.stderr.splitlines() if line.startswith("hermes-tui:")]
    assert len(problem) == 1 and "step limit (4, agent.max_steps)" in problem[0], proc.stderr
    assert len(server.requests()) == 4
    outcomes = [line.split("-> ")[1].split(",")[0] for line in tool_lines(proc.stderr)]
    # Reads never ask, but the third identical call in a row does: headless, so denied.
    assert outcomes == ["ok", "ok", "denied", "denied"], proc.stderr
    assert "3 times in a row" in tool_lines(proc.stderr)[2]
    _, rows = only_session(hermes_home)
    # The model reuses its call id each step; ids repeat across exchanges, never within one.
    assert sum(r["role"] == "tool" for r in rows) == 4
    for n, row in enumerate(rows):
        if row["role"] == "assistant" and row["tool_calls"]:
            assert rows[n + 1]["role"] == "tool" and rows[n + 1]["tool_call_id"] == "r"


def wait_for(predicate, what: str, timeout: float = WAIT_S) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.05)


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:  # a zombie is gone for our purpose
        return Path(f"/proc/{pid}/stat").read_text().split(") ")[1].split()[0] != "Z"
    except (FileNotFoundError, IndexError):
        return False


def test_stop_during_a_running_command_kills_its_group(scripted, hermes_home, tmp_path):
    workspace = tmp_path / "ws"
    workspace.mkdir()
    command = "sleep 300 & echo $! > child.pid; wait"
    server = scripted([
        calls(call("run_shell", "s1", command=command), call("read_file", "r1", path="child.pid")),
        answer("carried on"),
    ])
    config = write_config(tmp_path / "config.yaml", server.base_url)
    proc = subprocess.Popen(cli_args(config, "Run it", "--workspace", str(workspace), "--approve", "full"),
                            env=cli_env(hermes_home), cwd=ROOT, stdin=subprocess.DEVNULL,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        pid_file = workspace / "child.pid"
        wait_for(lambda: pid_file.exists() and pid_file.read_text().strip(), "the command to start")
        child = int(pid_file.read_text())
        assert alive(child)
        proc.send_signal(signal.SIGINT)  # what Esc does in the app
        out, err = proc.communicate(timeout=WAIT_S)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 130, f"{proc.returncode}\n{err}"
    assert out == ""
    assert len([line for line in err.splitlines() if line.startswith("hermes-tui:")]) == 1, err
    wait_for(lambda: not alive(child), "the command's child to be killed", timeout=10)
    session_id, rows = only_session(hermes_home)
    answered = assert_every_call_answered_once(rows)
    assert status(answered["s1"]) == "stopped" and status(answered["r1"]) == "stopped"
    assert len(server.requests()) == 1  # stopped: the model was not called again

    # The stored transcript is valid for the API: the next turn carries on from it.
    again = run_cli(hermes_home, config, "Go on", "--resume", session_id)
    assert again.returncode == 0, explain(again)
    sent = server.requests()[-1]["messages"]
    assert [m["tool_call_id"] for m in sent if m["role"] == "tool"] == ["s1", "r1"]


def test_kill_9_during_a_tool_run_then_resume_answers_interrupted(scripted, hermes_home, tmp_path):
    workspace = tmp_path / "ws"
    workspace.mkdir()
    command = "echo $$ > shell.pid; sleep 300"
    server = scripted([
        calls(call("run_shell", "k1", command=command), call("read_file", "k2", path="shell.pid")),
        answer("picked up after the crash"),
    ])
    config = write_config(tmp_path / "config.yaml", server.base_url)
    proc = subprocess.Popen(cli_args(config, "Run it", "--workspace", str(workspace), "--approve", "full"),
                            env=cli_env(hermes_home), cwd=ROOT, stdin=subprocess.DEVNULL,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    pid_file = workspace / "shell.pid"
    shell_pid = None
    try:
        wait_for(lambda: pid_file.exists() and pid_file.read_text().strip(), "the command to start")
        shell_pid = int(pid_file.read_text())
        proc.kill()  # SIGKILL: no handler runs, nothing is flushed after this
        proc.wait(timeout=WAIT_S)
    finally:
        if proc.poll() is None:
            proc.kill()
        if shell_pid is not None:  # the command's own group outlives a SIGKILLed parent
            try:
                os.killpg(shell_pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
    session_id, rows = only_session(hermes_home)
    assert rows[-1]["role"] == "assistant" and [c["id"] for c in rows[-1]["tool_calls"]] == ["k1", "k2"]

    resumed = run_cli(hermes_home, config, "What happened?", "--resume", session_id[:6])
    assert resumed.returncode == 0, explain(resumed)
    assert resumed.stdout == "picked up after the crash\n"
    _, rows = only_session(hermes_home)
    answered = assert_every_call_answered_once(rows)
    assert status(answered["k1"]) == "interrupted" and status(answered["k2"]) == "interrupted"
    sent = server.requests()[-1]["messages"]
    assert [m["role"] for m in sent[-4:]] == ["assistant", "tool", "tool", "user"]
    assert sent[-1]["content"] == "What happened?"


def test_run_with_a_bad_workspace_is_one_line(hermes_home, tmp_path):
    config = write_config(tmp_path / "config.yaml", "http://127.0.0.1:9/v1")
    proc = run_cli(hermes_home, config, "hi", "--workspace", str(tmp_path / "missing"))
    assert proc.returncode == 2
    assert proc.stderr.strip().count("\n") == 0 and "--workspace" in proc.stderr, proc.stderr
    assert not (hermes_home / "state.db").exists()


# --- the loop in-process: approval answers -----------------------------------------------------


class Recorder(AgentListener):
    def __init__(self) -> None:
        self.events: list[tuple] = []

    def call_started(self, call_id, name, arguments) -> None:
        self.events.append(("started", call_id, name))

    def call_finished(self, call_id, name, arguments, result, message) -> None:
        self.events.append(("finished", call_id, result.status.value))


def in_process_session(store: Store, base_url: str):
    config = Config().with_overrides({
        "model.provider": "openai-api", "model.model": "scripted", "model.base_url": base_url,
        "model.context_length": 32768, "auxiliary.compression.provider": "extractive",
    })
    chat = OpenAIChatClient(base_url, "scripted", api_key=None)
    return open_session(config, store, title="in-process", chat=chat, summarizer=ExtractiveSummarizer())


def test_always_is_stored_per_workspace_and_lets_the_next_call_run(scripted, hermes_home, tmp_path):
    workspace = tmp_path / "ws"
    workspace.mkdir()
    server = scripted([
        calls(call("run_shell", "a1", command="touch one")),
        calls(call("run_shell", "a2", command="touch one")),
        calls(call("run_shell", "a3", command="touch two")),
        answer("made them"),
    ])
    asked: list[tuple] = []

    def ask(request, preview, reason):
        asked.append((request.command, reason))
        return Answer.ALWAYS if request.command == "touch one" else Answer.DENY

    with Store(hermes_home / "state.db") as store:
        session = in_process_session(store, server.base_url)
        session.add_user_message("make files")
        recorder = Recorder()
        tools = Tools(registry=builtin_registry(), workspace=Workspace(workspace),
                      mode=Mode.ASK, rules=StoredRules(store))
        result = AgentTurn(session, tools, ask=ask, listener=recorder).run()
        session.close()
    assert result.outcome == COMPLETED and result.text == "made them"
    # "Always" stored the exact command: it ran unasked again, and "touch two" asked.
    assert [command for command, _ in asked] == ["touch one", "touch two"]
    assert (workspace / "one").exists() and not (workspace / "two").exists()
    assert recorder.events == [
        ("started", "a1", "run_shell"), ("finished", "a1", "ok"),
        ("started", "a2", "run_shell"), ("finished", "a2", "ok"),
        ("started", "a3", "run_shell"), ("finished", "a3", "denied"),
    ]
    with Store(hermes_home / "state.db") as store:  # kept in our database, not in the workspace
        assert StoredRules(store).rules(str(workspace.resolve())) == [Rule.exact("run_shell", ["touch", "one"])]
        assert StoredRules(store).rules(str(tmp_path)) == []
    assert sorted(p.name for p in workspace.iterdir()) == ["one"]


def test_stop_after_a_result_ends_the_turn_before_the_next_model_call(scripted, hermes_home, tmp_path):
    workspace = tmp_path / "ws"
    workspace.mkdir()
    server = scripted([calls(call("list_dir", "l1", path=".")), answer("never sent")])
    cancel = threading.Event()

    class StopAfterFirstResult(Recorder):
        def call_finished(self, call_id, name, arguments, result, message) -> None:
            super().call_finished(call_id, name, arguments, result, message)
            cancel.set()

    with Store(hermes_home / "state.db") as store:
        session = in_process_session(store, server.base_url)
        session.add_user_message("look around")
        tools = Tools(registry=builtin_registry(), workspace=Workspace(workspace))
        result = AgentTurn(session, tools, listener=StopAfterFirstResult()).run(cancel)
        session.close()
    assert result.outcome == STOPPED
    assert len(server.requests()) == 1  # the stop came before the next model call
    _, rows = only_session(hermes_home)
    assert [status(r) for r in assert_every_call_answered_once(rows).values()] == ["ok"]


def test_run_resume_of_a_session_open_elsewhere_is_one_line_and_writes_nothing(hermes_home, tmp_path):
    config = write_config(tmp_path / "config.yaml", "http://127.0.0.1:9/v1")
    with Store(hermes_home / "state.db") as store:  # this live process holds the session's lease
        info = store.create_session("held")
        proc = run_cli(hermes_home, config, "hi", "--resume", info.id)
        assert proc.returncode == 2, explain(proc)
        assert proc.stderr.count("\n") == 1 and info.id in proc.stderr, proc.stderr
        assert store.load_active(info.id) == []


def test_run_shows_escape_sequences_from_the_model_and_tools_without_sending_them_to_the_terminal(
        scripted, hermes_home, tmp_path):
    """A reply and a tool's error carrying OSC 52 (a clipboard write) and a screen clear: stdout
    and stderr show them as text (␛), the session stores them and the model gets them as they came."""
    workspace = tmp_path / "ws"
    workspace.mkdir()
    osc52 = "\x1b]52;c;aGVsbG8=\x07"
    server = scripted([
        calls(call("read_file", "c1", path=f"gone{osc52}.txt")),
        answer(f"Done.{osc52}\x1b[2J\x1b[H"),
    ])
    config = write_config(tmp_path / "config.yaml", server.base_url)
    proc = subprocess.run(cli_args(config, "Read it", "--workspace", str(workspace)), env=cli_env(hermes_home),
                          cwd=ROOT, stdin=subprocess.DEVNULL, capture_output=True, timeout=CLI_TIMEOUT_S)
    assert proc.returncode == 0, proc
    assert b"\x1b" not in proc.stdout and b"\x07" not in proc.stdout
    assert b"\x1b" not in proc.stderr and b"\x07" not in proc.stderr
    assert proc.stdout.decode() == "Done.␛]52;c;aGVsbG8=␇␛[2J␛[H\n"
    line, = tool_lines(proc.stderr.decode())
    assert "-> error" in line and "␛]52;c;aGVsbG8=␇" in line, line

    # Only what is shown changed: the store and the model have the bytes as they came.
    _, rows = only_session(hermes_home)
    assert rows[-1]["content"] == f"Done.{osc52}\x1b[2J\x1b[H"
    sent = server.requests()[1]["messages"]
    assert osc52 in next(m["content"] for m in sent if m["role"] == "tool")


def test_a_reply_cut_off_at_its_cap_says_so(scripted, hermes_home, tmp_path):
    """Held to a call, the 1.5B model wrote a write_file call whose content repeated until
    model.max_tokens: the call never closed, so it cannot run, and the user is told why the
    answer looks unfinished."""
    workspace = tmp_path / "ws"
    workspace.mkdir()
    cut = '{\n  "name": "write_file",\n  "arguments": {\n    "path": "a.py",\n    "content": "assert 1\\nassert 1\\n'
    server = scripted([{"text": [cut], "finish_reason": "length"}])
    config = write_config(tmp_path / "config.yaml", server.base_url)
    proc = run_cli(hermes_home, config, "Add a test", "--workspace", str(workspace), "--approve", "full")
    assert proc.returncode == 0, explain(proc)
    assert "note: the reply was cut off at its cap of 1024 tokens (model.max_tokens)" in proc.stderr, proc.stderr
    assert not tool_lines(proc.stderr) and not (workspace / "a.py").exists()
