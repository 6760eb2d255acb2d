"""run_shell with real subprocesses: exit codes, the process group killed on timeout, on
stop and after the command, 100 MB of output capped in bounded memory, stdin closed,
credentials kept out of the environment."""

from __future__ import annotations

import json
import threading
import time
import tracemalloc
from pathlib import Path

from hermes_tui.tools import Status, ToolContext, Workspace, builtin_registry
from hermes_tui.tools.shell import shell_environment

HANG_BOUND_S = 30.0


def run(ws: Path, command: str, *, ctx: ToolContext | None = None, **extra):
    ctx = ctx or ToolContext(workspace=Workspace(ws))
    return builtin_registry().dispatch("run_shell", json.dumps({"command": command, **extra}), ctx)


def process_gone(pid: int) -> bool:
    """No such process, or a zombie (dead, waiting for its parent to reap it)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        return True
    return stat.rsplit(")", 1)[1].split()[0] in ("Z", "X")


def wait_gone(pid: int, within_s: float = 5.0) -> bool:
    deadline = time.monotonic() + within_s
    while time.monotonic() < deadline:
        if process_gone(pid):
            return True
        time.sleep(0.02)
    return process_gone(pid)


def test_output_exit_code_and_duration(tmp_path):
    result = run(tmp_path, "echo out; echo err >&2; exit 3")
    assert not result.is_error and result.status is Status.OK
    lines = result.content.splitlines()
    assert lines[:2] == ["out", "err"]
    assert lines[2].startswith("[exit code 3, ") and lines[2].endswith(" s]")
    assert result.exit_code == 3
    assert result.bytes == len(b"out\nerr\n")
    assert 0 < result.duration_ms < HANG_BOUND_S * 1000


def test_runs_in_the_workspace_with_stdin_closed(tmp_path):
    result = run(tmp_path, "pwd; cat; echo rc=$?")
    assert result.content.splitlines()[:2] == [str(tmp_path.resolve()), "rc=0"]
    assert result.exit_code == 0


def test_no_output_is_said(tmp_path):
    assert run(tmp_path, "true").content.startswith("(no output)\n[exit code 0, ")


def test_timeout_kills_the_forked_child_with_its_group(tmp_path):
    start = time.monotonic()
    result = run(tmp_path, "sleep 300 & echo child=$!; sleep 300", timeout_s=1)
    assert time.monotonic() - start < HANG_BOUND_S
    assert result.is_error and "timed out after 1 s" in result.content
    child = int(result.content.split("child=")[1].split()[0])
    assert wait_gone(child), f"child {child} survived the timeout"
    assert result.exit_code is None


def test_stop_kills_the_forked_child_with_its_group(tmp_path):
    pidfile = tmp_path / "child.pid"
    ctx = ToolContext(workspace=Workspace(tmp_path))
    box: dict = {}
    worker = threading.Thread(target=lambda: box.update(
        r=run(tmp_path, f"sleep 300 & echo $! > {pidfile}; sleep 300", ctx=ctx)))
    worker.start()
    deadline = time.monotonic() + HANG_BOUND_S
    while not (pidfile.exists() and pidfile.read_text().strip()) and time.monotonic() < deadline:
        time.sleep(0.02)
    child = int(pidfile.read_text())
    assert not process_gone(child)
    ctx.cancel.set()
    worker.join(HANG_BOUND_S)
    assert not worker.is_alive()
    result = box["r"]
    assert result.status is Status.STOPPED and result.content.endswith("[stopped by the user]")
    assert wait_gone(child), f"child {child} survived the stop"


def test_a_background_job_does_not_outlive_the_call(tmp_path):
    start = time.monotonic()
    result = run(tmp_path, "sleep 300 & echo child=$!")
    assert time.monotonic() - start < 10
    child = int(result.content.split("child=")[1].split()[0])
    assert "background processes" in result.content
    assert result.exit_code == 0
    assert wait_gone(child)


def test_a_quiet_background_job_is_stopped_too(tmp_path):
    result = run(tmp_path, "nohup sleep 300 >/dev/null 2>&1 & echo child=$!")
    child = int(result.content.split("child=")[1].split()[0])
    assert wait_gone(child)


def test_sigterm_ignored_gets_sigkill(tmp_path):
    start = time.monotonic()
    result = run(tmp_path, "trap '' TERM; echo ready; sleep 300", timeout_s=0.5)
    assert result.is_error and "timed out" in result.content
    assert time.monotonic() - start < HANG_BOUND_S


def test_100_mb_of_output_is_capped_in_bounded_memory(tmp_path):
    cap = 20_000
    ctx = ToolContext(workspace=Workspace(tmp_path), max_output_bytes=cap)
    tracemalloc.start()
    try:
        result = run(tmp_path, "head -c 100000000 /dev/zero | tr '\\0' 'a'; echo; echo THE END",
                     ctx=ctx)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert result.bytes == 100_000_000 + len("\nTHE END\n")
    assert result.truncated
    assert len(result.content.encode()) <= cap
    assert result.content.startswith("a" * 1000)
    assert "bytes omitted …]" in result.content
    omitted = int(result.content.split("[… ")[1].split(" bytes omitted")[0])
    assert 100_000_000 - cap < omitted < 100_000_000
    assert "THE END\n[exit code 0, " in result.content
    assert peak < 5_000_000, f"peak Python memory {peak} bytes while reading 100 MB"


def test_credentials_are_not_in_the_environment(tmp_path, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-value")
    monkeypatch.setenv("GITHUB_TOKEN", "ghp_value")
    monkeypatch.setenv("MY_DB_PASSWORD", "pw")
    monkeypatch.setenv("HARMLESS_SETTING", "kept")
    result = run(tmp_path, "env")
    assert "HARMLESS_SETTING=kept" in result.content
    for name in ("OPENAI_API_KEY", "GITHUB_TOKEN", "MY_DB_PASSWORD"):
        assert name not in result.content
    assert "GIT_PAGER=cat" in result.content
    env = shell_environment({"PATH": "/bin", "SSH_AUTH_SOCK": "/tmp/s", "X": "1"}, drop=("X",))
    assert env["SSH_AUTH_SOCK"] == "/tmp/s" and "X" not in env


def test_a_stop_before_the_call_runs_nothing(tmp_path):
    ctx = ToolContext(workspace=Workspace(tmp_path))
    ctx.cancel.set()
    result = run(tmp_path, "touch made", ctx=ctx)
    assert result.status is Status.STOPPED
    assert not (tmp_path / "made").exists()
