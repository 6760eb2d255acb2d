"""Whether this machine has a sandbox, and one session's sandbox for the commands it runs.

``available()`` says once (cached) which mechanism confines commands here, or why none
does; the app tells the user when none does, and then asks before every command that is
not on the allowlist (``session.agent``). ``Sandbox`` is what a tool context carries: the
mode it was made in, the workspace and the session's private temp dir; ``wrap`` turns a
command's argv and environment into the confined ones (unchanged in full mode; where there
is no sandbox, only git's ``GIT_SETTINGS`` are added).
"""

from __future__ import annotations

import functools
import os
import shutil
import sys
import tempfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from hermes_tui.tools.approval import Mode

from . import landlock, seatbelt
from .policy import Policy, policy_for

# Run with -I (isolated: no PYTHON* variables, no user site, not the current directory on
# sys.path): the launcher starts in the workspace, whose files must not be imported before
# the sandbox is on. The package's folder is put on sys.path by hand instead.
_PACKAGE_ROOT = str(Path(__file__).resolve().parents[3])
_LAUNCH = (f"import sys; sys.path.insert(0, {_PACKAGE_ROOT!r}); "
           "from hermes_tui.tools.sandbox.launch import main; sys.exit(main())")

TMP_VARS = ("TMPDIR", "TMP", "TEMP", "TEMPDIR")

# What git, run by any command but in full mode, takes from no repository: its fsmonitor and
# its hooks, programs an allowlisted `git status` would run unasked. The sandbox cannot keep a
# command from making a repository where none is bound read-only (a workspace's missing
# .git, sub/.git anywhere: Landlock rules name existing files), so a command the user let run
# could plant one. Given as GIT_CONFIG_COUNT/KEY/VALUE (git 2.31+), which outrank every config
# file, after any the environment already holds; where no sandbox is available too.
GIT_SETTINGS = (("core.fsmonitor", "false"), ("core.hooksPath", "/dev/null"))


def git_settings(env: Mapping[str, str]) -> dict[str, str]:
    """The variables that add ``GIT_SETTINGS`` to the ``git -c`` settings ``env`` holds."""
    try:
        count = max(int(env.get("GIT_CONFIG_COUNT", "0")), 0)
    except ValueError:
        count = 0  # git refuses a bad count: ours replace it
    out = {"GIT_CONFIG_COUNT": str(count + len(GIT_SETTINGS))}
    for i, (key, value) in enumerate(GIT_SETTINGS, start=count):
        out[f"GIT_CONFIG_KEY_{i}"], out[f"GIT_CONFIG_VALUE_{i}"] = key, value
    return out


@dataclass(frozen=True)
class SandboxSupport:
    available: bool
    mechanism: str  # "landlock" | "seatbelt" | "none"
    reason: str  # one line: what confines commands here, or why nothing does


@functools.cache
def available() -> SandboxSupport:
    """The sandbox this machine offers (looked up once)."""
    if sys.platform == "darwin":
        if os.access(seatbelt.SANDBOX_EXEC, os.X_OK):
            return SandboxSupport(True, "seatbelt", "macOS Seatbelt (sandbox-exec): files and network")
        return SandboxSupport(False, "none", f"{seatbelt.SANDBOX_EXEC} is missing")
    if sys.platform != "linux":
        return SandboxSupport(False, "none", f"no sandbox for {sys.platform}")
    abi = landlock.abi_version()
    if abi < 1:
        return SandboxSupport(False, "none", "Landlock is not available (Linux 5.13 or later, "
                                             "with landlock in the lsm= boot list)")
    if not landlock.seccomp_supported():
        return SandboxSupport(False, "none", "seccomp is not available, so sockets cannot be denied")
    tcp = "files and TCP" if abi >= 4 else "files (TCP by the socket filter alone)"
    return SandboxSupport(True, "landlock", f"Landlock ABI {abi} ({tcp}) and a seccomp socket filter")


def make_tmpdir() -> str:
    """A private temp dir for one session's commands (0700: mkdtemp's)."""
    return tempfile.mkdtemp(prefix="hermes-tui-")


@dataclass(frozen=True)
class Sandbox:
    """The sandbox of one call: the mode it runs in, the workspace, the session's temp dir."""

    mode: Mode
    workspace: Path
    tmpdir: str

    def policy(self, env: Mapping[str, str], *, read_only: bool = False,
               extra_read: Sequence[str | Path] = ()) -> Policy | None:
        mode = Mode.READ_ONLY if read_only and self.mode is not Mode.FULL else self.mode
        return policy_for(mode, self.workspace, self.tmpdir, env=env, extra_read=extra_read)

    def wrap(self, argv: list[str], env: Mapping[str, str], *, read_only: bool = False,
             extra_read: Sequence[str | Path] = ()) -> tuple[list[str], dict[str, str]]:
        """``argv`` and ``env`` as the command runs them: through the launcher (Linux) or
        ``sandbox-exec`` (macOS), with TMPDIR the session's; unchanged in full mode; where no
        sandbox is available, only with ``GIT_SETTINGS`` added."""
        env = dict(env)
        policy = self.policy(env, read_only=read_only, extra_read=extra_read)
        if policy is None:
            return argv, env
        env.update(git_settings(env))
        support = available()
        if not support.available:
            return argv, env
        env.update(dict.fromkeys(TMP_VARS, policy.tmpdir))
        program = shutil.which(argv[0], path=env.get("PATH")) or argv[0]
        argv = [program, *argv[1:]]
        if support.mechanism == "seatbelt":
            return seatbelt.command(policy, argv), env
        return [sys.executable, "-I", "-c", _LAUNCH, policy.to_json(), "--", *argv], env
