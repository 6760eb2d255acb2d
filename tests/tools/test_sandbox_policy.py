"""The sandbox policy per mode, and the macOS Seatbelt profile made from it (its text: it
cannot run here), and the launcher failing closed."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from hermes_tui.tools.approval import Mode
from hermes_tui.tools.sandbox import seatbelt
from hermes_tui.tools.sandbox.launch import EXIT_CANNOT_CONFINE
from hermes_tui.tools.sandbox.policy import Policy, git_dirs, policy_for


@pytest.fixture
def ws(tmp_path, monkeypatch) -> Path:
    monkeypatch.setenv("HERMES_TUI_HOME", str(tmp_path / "ws" / ".hermes-tui"))
    monkeypatch.setenv("HERMES_HOME", str(tmp_path / "agent-home"))
    (tmp_path / "ws" / ".git").mkdir(parents=True)
    (tmp_path / "home").mkdir()
    return (tmp_path / "ws").resolve()


def env(tmp_path: Path) -> dict[str, str]:
    return {"HOME": str(tmp_path / "home"), "PATH": os.environ.get("PATH", "")}


def test_each_mode(ws, tmp_path):
    tmp = str(tmp_path)
    read_only = policy_for(Mode.READ_ONLY, ws, tmp, env=env(tmp_path))
    assert read_only.write == (os.path.realpath(tmp),) and not read_only.network
    assert str(ws) in read_only.read and "/usr" in read_only.read
    assert not any(p == str(tmp_path / "home") for p in read_only.read)
    assert str(tmp_path / "home" / ".ssh") in read_only.hidden
    for mode in (Mode.ASK, Mode.AUTO_EDIT):
        policy = policy_for(mode, ws, tmp, env=env(tmp_path))
        assert str(ws) in policy.write and not policy.network
        assert str(ws / ".git") in policy.protected
        assert str(ws / ".hermes-tui") in policy.protected  # our home, inside the workspace
    assert policy_for(Mode.FULL, ws, tmp, env=env(tmp_path)) is None
    assert Policy.from_json(read_only.to_json()) == read_only


def test_a_gitdir_file_is_followed(tmp_path):
    main = tmp_path / "main" / ".git" / "worktrees" / "wt"
    main.mkdir(parents=True)
    (main / "commondir").write_text("../..\n")
    wt = tmp_path / "wt"
    wt.mkdir()
    (wt / ".git").write_text(f"gitdir: {main}\n")
    read, protected = git_dirs(wt)
    assert str(main.resolve()) in read and str((tmp_path / "main" / ".git").resolve()) in read
    assert str(wt / ".git") in protected and str(main.resolve()) in protected


def test_seatbelt_profile_text():
    policy = Policy(read=("/usr", "/Users/me/ws"), write=("/private/tmp/s", "/Users/me/ws"),
                    protected=("/Users/me/ws/.git",), hidden=("/Users/me/ws/.ssh",), network=False,
                    tmpdir="/private/tmp/s", mode="auto-edit")
    text = seatbelt.profile(policy)
    assert text.startswith("(version 1)\n(deny default)")
    assert "network" not in text.replace("; no network", "")
    assert '(subpath "/usr")' in text
    write = text[text.index("(allow file-write*\n"):]
    assert ('(require-all (subpath "/Users/me/ws") (require-not (literal "/Users/me/ws/.git")) '
            '(require-not (subpath "/Users/me/ws/.git"))') in write
    assert '(require-not (subpath "/Users/me/ws/.ssh"))' in write
    assert '(subpath "/private/tmp/s")' in write
    assert text.count("(") == text.count(")")
    argv = seatbelt.command(policy, ["/bin/bash", "-c", "ls"])
    assert argv[:2] == ["/usr/bin/sandbox-exec", "-p"] and argv[3:] == ["/bin/bash", "-c", "ls"]
    # Read-only: no write rule but the temp dir; a full-network policy allows it.
    ro = seatbelt.profile(Policy(read=("/usr",), write=("/tmp/s",), tmpdir="/tmp/s"))
    assert '(allow file-write*\n  (subpath "/tmp/s"))' in ro
    assert "(allow network*)" in seatbelt.profile(Policy(read=(), write=(), network=True))


def test_seatbelt_quotes_paths():
    assert seatbelt.quote('/a "b"\\c') == '"/a \\"b\\"\\\\c"'


def test_the_launcher_fails_closed():
    """A policy it cannot apply (here: not a policy) runs nothing, with exit status 126."""
    code = "import sys; from hermes_tui.tools.sandbox.launch import main; sys.exit(main())"
    out = subprocess.run([sys.executable, "-c", code, '{"read": 1}', "--", "/bin/echo", "RAN"],
                         capture_output=True, text=True)
    assert out.returncode == EXIT_CANNOT_CONFINE and "RAN" not in out.stdout
    assert "did not run" in out.stderr
