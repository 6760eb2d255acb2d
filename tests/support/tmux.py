"""A private tmux server for tests that drive the real ``hermes-tui`` in a real terminal.

tmux missing: a skip with the reason on a developer machine, a failure under CI (``CI``
set), where ``.ci/run`` installs it, so these tests can never silently stop running there.
"""

from __future__ import annotations

import os
import shlex
import shutil
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest

WIDTH, HEIGHT = 120, 40


def _ci() -> bool:
    return os.environ.get("CI", "").strip().lower() not in ("", "0", "false", "no")


def _app_command() -> list[str]:
    script = Path(sys.executable).with_name("hermes-tui")
    return [str(script)] if script.is_file() else [sys.executable, "-m", "hermes_tui.cli"]


def scripted_home(tmp_path: Path, base_url: str) -> Path:
    """Our home for an app talking to a scripted server at ``base_url`` (extractive compaction)."""
    home = tmp_path / "hermes_home"
    home.mkdir()
    (home / "config.yaml").write_text(
        "model:\n  provider: openai-api\n  model: scripted\n"
        f"  base_url: {base_url}\n  context_length: 32768\n"
        "auxiliary:\n  compression:\n    provider: extractive\n"
    )
    return home


def app_command_line(env: dict[str, str]) -> str:
    """The shell command that starts the app with ``env`` added."""
    return shlex.join(["env", *(f"{k}={v}" for k, v in env.items()), *_app_command()])


class Tmux:
    """A private tmux server (its own socket) running one session: the app."""

    def __init__(self, workdir: Path):
        self.socket = f"hermes-smoke-{os.getpid()}-{uuid.uuid4().hex[:8]}"
        self.target = "smoke"
        self.conf = workdir / "tmux.conf"
        # remain-on-exit: the pane stays (dead) after the app exits, so its exit status and
        # the terminal modes it left behind can be read.
        self.conf.write_text("set -g remain-on-exit on\nset -g history-limit 5000\n")
        self.env = {k: v for k, v in os.environ.items() if k not in ("TMUX", "TMUX_PANE")}
        self.socket_path: Path | None = None

    def run(self, *args: str, check: bool = True) -> str:
        done = subprocess.run(
            ["tmux", "-L", self.socket, "-f", str(self.conf), *args],
            capture_output=True, text=True, env=self.env, timeout=10,
        )
        if check and done.returncode != 0:
            raise AssertionError(f"tmux {' '.join(args)} failed ({done.returncode}): {done.stderr.strip()}")
        return done.stdout

    def start(self, command: str, cwd: Path) -> None:
        self.run("new-session", "-d", "-s", self.target, "-x", str(WIDTH), "-y", str(HEIGHT),
                 "-c", str(cwd), command)
        self.socket_path = Path(self.run("display-message", "-p", "#{socket_path}").strip())

    def screen(self) -> str:
        return self.run("capture-pane", "-p", "-t", self.target)

    def everything(self) -> str:
        """The visible screen and the scrollback (what is left after the app leaves the alternate screen)."""
        return self.run("capture-pane", "-p", "-J", "-S", "-", "-t", self.target)

    def keys(self, *keys: str, literal: bool = False) -> None:
        self.run("send-keys", "-t", self.target, *(("-l",) if literal else ()), *keys)

    def pane(self, fmt: str) -> str:
        return self.run("display-message", "-p", "-t", self.target, fmt).strip()

    def wait_exit(self, timeout: float) -> str:
        """The app's exit status once tmux has reaped it: ``"0"``, or ``"signal N"``.

        pane_dead turns 1 when the pty closes; the status is known once tmux has reaped the
        process, a moment later. tmux 3.3 built with libutempter sets SIGCHLD to SIG_DFL for
        ~1.5 ms while its utmp helper runs when a pane closes; a child exiting in that window
        is never reaped (seen with strace: the app exits 0 and stays a zombie), so a dead
        pane without a status gets its server nudged with SIGCHLD.
        """
        deadline = time.monotonic() + timeout
        while (ended := self.pane("#{pane_dead}:#{pane_dead_status}:#{pane_dead_signal}")) in ("0::", "1::"):
            if ended == "1::":
                subprocess.run(["kill", "-CHLD", self.pane("#{pid}")], capture_output=True)
            if time.monotonic() > deadline:
                raise AssertionError(f"the app did not exit within {timeout:.0f} s; {self.stacks()}")
            time.sleep(0.1)
        _, status, signal = ended.split(":")
        return f"signal {signal}" if signal else status

    def stacks(self) -> str:
        """Where a stuck app is: SIGABRT makes faulthandler (PYTHONFAULTHANDLER) print every
        thread's stack into the pane; the pane with it, and the process's threads."""
        pid = self.pane("#{pane_pid}")
        threads = subprocess.run(["ps", "-L", "-o", "tid,stat,wchan:24,comm", "-p", pid],
                                 capture_output=True, text=True).stdout
        subprocess.run(["kill", "-ABRT", pid], capture_output=True)
        time.sleep(2)
        return f"threads of pid {pid}:\n{threads}\nthe pane after SIGABRT:\n{self.everything()}"

    def kill(self) -> None:
        self.run("kill-server", check=False)
        if self.socket_path is not None:
            self.socket_path.unlink(missing_ok=True)  # kill-server leaves the socket file behind


@pytest.fixture
def tmux(tmp_path):
    if shutil.which("tmux") is None:
        if _ci():
            pytest.fail(
                "tmux is not installed, and CI is set: the tmux smoke test must run in CI. "
                ".ci/run installs tmux with apt-get when it is missing; install it on this runner.",
                pytrace=False,
            )
        pytest.skip("tmux is not installed (apt-get install tmux, or brew install tmux)")
    server = Tmux(tmp_path)
    try:
        yield server
    finally:
        server.kill()


def wait_for(tmux: Tmux, condition, what: str, timeout: float, poll: float = 0.1) -> str:
    """Capture the screen until ``condition(screen)`` holds; the screen that satisfied it."""
    deadline = time.monotonic() + timeout
    while True:
        screen = tmux.screen()
        if condition(screen):
            return screen
        if tmux.pane("#{pane_dead}") == "1":
            raise AssertionError(
                f"the app exited (status {tmux.pane('#{pane_dead_status}')}) while waiting for {what}:\n"
                f"{tmux.everything()}"
            )
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout:.0f} s waiting for {what}; the screen:\n{screen}")
        time.sleep(poll)
