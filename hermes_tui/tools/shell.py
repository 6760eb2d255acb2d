"""``run_shell``: one ``bash -c`` command in the workspace, bounded in time and output.

The command runs in a new session (so a new process group) with stdin closed. Output
(stdout and stderr together, as a terminal shows them) is read as it comes and capped
keeping the head and the tail, so memory stays small whatever it prints. On stop, on
timeout, and when the command is done, the whole group is sent SIGTERM, then SIGKILL
after a grace period: nothing the command started outlives the call (``cmd &`` included:
a background job is stopped once the command has exited and its output is drained). A
process that leaves the group (``setsid``, a daemon) is beyond reach of that kill, but not
of the OS sandbox (``sandbox``), which the context's ``sandbox`` puts every command in:
the launcher it runs through execs the shell in the same process, so the group is the same.

The environment is ours minus variables that look like credentials (names with KEY,
TOKEN, SECRET, PASSWORD, …, and the usual cloud and forge tokens): a command's output
goes into the transcript and on to the model's provider, and ``env`` would print them.
Pagers are turned off and git never prompts.
"""

from __future__ import annotations

import os
import re
import selectors
import shutil
import signal
import subprocess
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, TypedDict

from .base import (
    MAX_SHELL_TIMEOUT_S,
    CommandSandbox,
    Tool,
    ToolContext,
    ToolError,
    ToolKind,
    ToolResult,
)
from .output import HeadTail

READ_CHUNK = 65536
POLL_S = 0.05
# After the shell exits, how long a background job may keep the output pipe open.
DRAIN_GRACE_S = 0.5
# Between SIGTERM and SIGKILL.
KILL_GRACE_S = 2.0

_SECRET_NAME = re.compile(
    r"(?i)(?:^|_)(?:api_?key|key|token|secret|password|passwd|passphrase|credentials?|auth|"
    r"private_key|access_key|session_key|signature|cookie)(?:$|_)"
    r"|^(?:aws_secret_access_key|aws_session_token|github_token|gh_token|gitlab_token|"
    r"hf_token|huggingface_hub_token|npm_token|pypi_token|openai_api_key|anthropic_api_key|"
    r"database_url|sentry_dsn)$")

# Sockets, not secrets: their text reveals nothing, and approved commands need them (git over ssh).
_KEEP = frozenset({"SSH_AUTH_SOCK", "GPG_AGENT_INFO"})

_QUIET_ENV = {"PAGER": "cat", "GIT_PAGER": "cat", "GIT_TERMINAL_PROMPT": "0"}


def is_secret_name(name: str) -> bool:
    return name not in _KEEP and bool(_SECRET_NAME.search(name))


def shell_environment(base: Mapping[str, str] | None = None,
                      drop: tuple[str, ...] = ()) -> dict[str, str]:
    """``base`` (default: ours) without credentials and the names in ``drop``."""
    env = {k: v for k, v in (os.environ if base is None else base).items()
           if not is_secret_name(k) and k not in drop}
    env.update(_QUIET_ENV)
    return env


@dataclass
class ShellOutcome:
    output: str
    exit_code: int | None
    duration_ms: float
    bytes: int
    truncated: bool
    timed_out: bool = False
    stopped: bool = False
    background_stopped: bool = False


class _Meta(TypedDict):
    """The outcome's figures a ``ToolResult`` carries, whatever the verdict."""

    duration_ms: float
    bytes: int
    truncated: bool


def _live_members_linux(pgid: int) -> bool:
    """Whether a process of group ``pgid`` is still running (zombies do not count)."""
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            with open(f"/proc/{entry.name}/stat", "rb") as f:
                stat = f.read()
        except OSError:
            continue
        fields = stat.rsplit(b")", 1)[-1].split()
        if len(fields) > 2 and int(fields[2]) == pgid and fields[0] not in (b"Z", b"X"):
            return True
    return False


def _group_alive(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    # An orphaned child killed by SIGTERM stays a zombie in the group until init reaps it,
    # and the init of a container may never do that: look at the members themselves.
    if os.path.isdir("/proc"):
        return _live_members_linux(pgid)
    return True


def kill_group(proc: subprocess.Popen[bytes], grace_s: float = KILL_GRACE_S) -> None:
    """SIGTERM to the command's process group, SIGKILL to what is left after ``grace_s``."""
    pgid = proc.pid  # a new session's leader: its pid is the group id
    try:
        os.killpg(pgid, signal.SIGTERM)
    except ProcessLookupError:
        proc.wait()
        return
    deadline = time.monotonic() + grace_s
    while time.monotonic() < deadline:
        proc.poll()  # reap the shell, or it stays in the group as a zombie
        if not _group_alive(pgid):
            break
        time.sleep(0.01)
    else:
        try:
            os.killpg(pgid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    proc.wait()


def run_command(command: str, *, cwd: str, env: Mapping[str, str], timeout_s: float,
                cancel: Any, max_bytes: int, sandbox: CommandSandbox | None = None) -> ShellOutcome:
    bash = shutil.which("bash", path=env.get("PATH")) or shutil.which("bash")
    if bash is None:
        raise ToolError("bash is not installed")
    argv, env = [bash, "-c", command], dict(env)
    if sandbox is not None:
        argv, env = sandbox.wrap(argv, env)
    start = time.monotonic()
    proc = subprocess.Popen(argv, cwd=cwd, env=env,
                            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, start_new_session=True)
    assert proc.stdout is not None
    fd = proc.stdout.fileno()
    buf = HeadTail(max_bytes)
    timed_out = stopped = background = False
    exited_at: float | None = None
    eof = False
    with selectors.DefaultSelector() as sel:
        sel.register(fd, selectors.EVENT_READ)
        while True:
            if cancel.is_set():
                stopped = True
                break
            now = time.monotonic()
            if now - start > timeout_s:
                timed_out = True
                break
            if not eof and sel.select(POLL_S):
                data = os.read(fd, READ_CHUNK)
                if data:
                    buf.feed(data)
                else:
                    eof = True
            elif eof:
                try:
                    proc.wait(timeout=POLL_S)
                except subprocess.TimeoutExpired:
                    pass
            if proc.poll() is not None:
                if eof:
                    break
                exited_at = exited_at or now
                if now - exited_at > DRAIN_GRACE_S:
                    background = True  # a background job still holds the output open
                    break
    exit_code = proc.returncode  # before the group is killed: the shell's own status
    kill_group(proc)
    proc.stdout.close()
    duration_ms = (time.monotonic() - start) * 1000
    return ShellOutcome(output=buf.text(), exit_code=None if (timed_out or stopped) else exit_code,
                        duration_ms=duration_ms, bytes=buf.total, truncated=buf.truncated,
                        timed_out=timed_out, stopped=stopped, background_stopped=background)


class RunShell(Tool):
    name = "run_shell"
    kind = ToolKind.SHELL
    description = ("Run a bash command in the workspace directory and return its output "
                   "(stdout and stderr), exit code and duration. No stdin; no interactive "
                   "programs. Long output is cut in the middle.")
    parameters = {
        "type": "object",
        "properties": {
            "command": {"type": "string", "minLength": 1, "description": "The bash command"},
            "timeout_s": {"type": "number", "exclusiveMinimum": 0, "maximum": MAX_SHELL_TIMEOUT_S,
                          "description": "Seconds before the command is stopped"},
        },
        "required": ["command"],
        "additionalProperties": False,
    }

    def shell_command(self, arguments: dict[str, Any]) -> str | None:
        command: str = arguments["command"]  # a string: the schema says so
        return command

    def run(self, arguments: dict[str, Any], context: ToolContext) -> ToolResult:
        timeout_s = min(float(arguments.get("timeout_s", context.shell_timeout_s)), MAX_SHELL_TIMEOUT_S)
        env = context.shell_env if context.shell_env is not None else shell_environment()
        out = run_command(arguments["command"], cwd=str(context.workspace.root), env=env,
                          timeout_s=timeout_s, cancel=context.cancel, sandbox=context.sandbox,
                          max_bytes=max(context.max_output_bytes - 512, 64))  # room for the trailer
        meta = _Meta(duration_ms=out.duration_ms, bytes=out.bytes, truncated=out.truncated)
        text = out.output if out.output else ""
        if out.stopped:
            return ToolResult.stopped(text, **meta)
        body = text.rstrip("\n") + "\n" if text else "(no output)\n"
        seconds = f"{out.duration_ms / 1000:.2f} s"
        if out.timed_out:
            body += f"[timed out after {timeout_s:g} s; the command and its processes were stopped]\n"
            return ToolResult.error(body, **meta)
        if out.background_stopped:
            body += "[background processes still running when the command ended were stopped]\n"
        body += f"[exit code {out.exit_code}, {seconds}]\n"
        return ToolResult(content=body, exit_code=out.exit_code, **meta)
