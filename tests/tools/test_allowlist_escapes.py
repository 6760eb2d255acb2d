"""Issue 24, findings 1-6: each way out of the allowlist, rules and protected files that was
found, as a test. Real workspaces in temp folders, real files, and where a finding ran
something, the command is run for real (with bash) when the decision lets it, to show the
harm is gone, not only the verdict."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from hermes_tui.tools import Action, Mode, Rule, Workspace, build_request, builtin_registry, decide
from hermes_tui.tools.approval import rule_for
from hermes_tui.tools.command_check import programs_run

TOOLS = {tool.name: tool for tool in builtin_registry()}
A, Q, D = Action.ALLOW, Action.ASK, Action.DENY
RO, ASK, AE, FULL = Mode.READ_ONLY, Mode.ASK, Mode.AUTO_EDIT, Mode.FULL


@pytest.fixture
def layout(tmp_path, monkeypatch):
    """A workspace with a file and a symlink to a folder outside holding a secret."""
    monkeypatch.setenv("HERMES_TUI_HOME", str(tmp_path / "hermes-home"))
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    (tmp_path / "home" / ".ssh").mkdir(parents=True)
    (tmp_path / "home" / ".ssh" / "id_rsa").write_text("PRIVATE KEY\n")
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "notes.txt").write_text("b\na\n")
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret.txt").write_text("SECRET=1\n")
    (ws / "link").symlink_to(outside)
    return Workspace(ws), outside


def shell(workspace: Workspace, command: str, mode: Mode = RO, rules=(), interactive=True):
    request = build_request(TOOLS["run_shell"], {"command": command}, workspace)
    return request, decide(request, mode=mode, rules=list(rules), interactive=interactive)


def run_if_allowed(workspace: Workspace, command: str, mode: Mode = RO) -> bool:
    """Run ``command`` with bash in the workspace when the decision allows it; did it run?"""
    _, decision = shell(workspace, command, mode)
    if decision.action is not A:
        return False
    subprocess.run(["bash", "-c", command], cwd=workspace.root, capture_output=True, timeout=30)
    return True


def edit(workspace: Workspace, path: str, mode: Mode = AE, rules=(), interactive=True):
    request = build_request(TOOLS["write_file"], {"path": path, "content": "x"}, workspace)
    return decide(request, mode=mode, rules=list(rules), interactive=interactive)


# --- 1. read-only mode wrote files and ran programs through sort ------------------------------

@pytest.mark.parametrize("command", [
    "sort -o{out} notes.txt", "sort --out=written notes.txt", "sort --outp written notes.txt",
    "sort -S 64k --compress-prog=./prog notes.txt", "sort -uo{out} notes.txt",
])
def test_finding1_sort_cannot_write_or_run_in_read_only(layout, tmp_path, command):
    workspace, _ = layout
    out = tmp_path / "written"
    prog = workspace.root / "prog"
    prog.write_text(f"#!/bin/sh\ntouch {tmp_path / 'ran'}\ncat\n")
    prog.chmod(0o755)
    assert not run_if_allowed(workspace, command.format(out=out))
    assert not out.exists() and not (workspace.root / "written").exists()
    assert not (tmp_path / "ran").exists()


@pytest.mark.parametrize("command,banned", [
    ("rg --pr ./x pat", "--pre"), ("rg --hostname-b ./x pat", "--hostname-bin"),
    ("rg -z pat", "-z"), ("find . -fprintf /tmp/x %p", "-fprintf"), ("find . -okdir rm {} \\;", "-okdir"),
    ("git log --out=x", "--output"), ("git diff --ext", "--ext-diff"), ("git show --textc HEAD", "--textconv"),
])
def test_finding1_options_that_run_programs_are_banned_in_every_spelling(layout, command, banned):
    workspace, _ = layout
    request, decision = shell(workspace, command, ASK)
    assert decision.action is Q and request.command_check.banned == banned


@pytest.mark.parametrize("command,planted", [
    ("rg touch *h", "--pre=bash"),  # rg --pre=bash runs every file it searches as a script
    ("find *e -name x", "-delete"),  # find takes -delete as its action: the workspace goes
    ("grep -r touch [-x]*", "--pre=bash"),
])
def test_finding1_a_glob_that_matches_a_file_named_like_an_option_asks(layout, tmp_path, command, planted):
    """Bash hands a glob's matches to the program as words, and one that starts with '-' is an
    option to it: a file the model wrote in auto-edit, named ``--pre=bash``, made the allowlisted
    ``rg touch *h`` run ``x.sh``; one named ``-delete`` made ``find *e`` delete the workspace."""
    workspace, _ = layout
    marker = tmp_path / "ran"
    (workspace.root / "x.sh").write_text(f"touch {marker}\n")
    (workspace.root / planted).write_text("")
    for mode in (AE, ASK, RO):
        request, decision = shell(workspace, command, mode)
        assert decision.action is not A and not request.command_check.read_only, (mode, decision.reason)
    assert not run_if_allowed(workspace, command, AE)
    assert not marker.exists() and (workspace.root / "notes.txt").exists()
    (workspace.root / planted).unlink()
    _, decision = shell(workspace, command, AE)  # the same glob over ordinary names runs
    assert decision.action is A, decision.reason


# --- 2. reads outside the workspace in read-only mode --------------------------------------

@pytest.mark.parametrize("command", [
    "cat {outside_glob}/secret.txt",  # a glob in the first component
    "cat {{{outside}/secret.txt,notes.txt}}",  # a brace list
    "ls {{..,.}}",
    "cat ~+/../outside/secret.txt",  # ~+ is the working directory
    "cat ~/.ssh/id_rsa", "cat ~-/x",
    "cat link/*", "head -n1 -- ../outside/secret.txt", "wc --files0-from={outside}/list",
    "grep -f{outside}/secret.txt notes.txt",
])
def test_finding2_expansions_are_resolved_before_the_path_check(layout, command):
    workspace, outside = layout
    top = outside.parts[1]  # a glob in the first component ("/t?p/..."), where the old check looked at "."
    glob_form = "/" + top[0] + "?" + top[2:] + "/" + "/".join(outside.parts[2:])
    command = command.format(outside=outside, outside_glob=glob_form)
    request, decision = shell(workspace, command, RO)
    assert decision.action is D, decision.reason
    assert not request.command_check.read_only


@pytest.mark.parametrize("command", ["grep -R SECRET .", "grep --dereference-rec SECRET .",
                                     "rg -L SECRET", "rg --follow SECRET .", "find -L . -name '*.txt'",
                                     "ls -RL", "du -L .", "diff -r . link"])
def test_finding2_following_symlinks_out_is_screened(layout, command):
    workspace, _ = layout
    assert not run_if_allowed(workspace, command)
    _, decision = shell(workspace, command, ASK)
    assert decision.action is Q


def test_finding2_following_is_fine_when_no_symlink_leads_out(layout):
    workspace, _ = layout
    (workspace.root / "link").unlink()
    (workspace.root / "sub").mkdir()
    (workspace.root / "inner").symlink_to(workspace.root / "sub")
    assert run_if_allowed(workspace, "grep -R a .")
    assert run_if_allowed(workspace, "grep -rn a notes.txt *.txt")


# --- 3. auto-edit reached code execution through git -----------------------------------

def test_finding3_a_bare_repository_layout_asks_before_git_status_can_run_its_fsmonitor(layout, tmp_path):
    workspace, _ = layout
    marker = tmp_path / "fsmonitor-ran"
    config = (f"[core]\n\trepositoryformatversion = 0\n\tbare = false\n\tworktree = {workspace.root}\n"
              f"\tfsmonitor = touch {marker}; false\n")
    files = {"HEAD": "ref: refs/heads/main\n", "config": config, "objects/info/x": "", "refs/heads/.keep": ""}
    decisions = []
    for path, content in files.items():
        decision = edit(workspace, path)
        decisions.append(decision.action)
        if decision.action is A:
            target = workspace.root / path
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(content)
    assert Q in decisions  # the layout is never completed unasked
    subprocess.run(["git", "status"], cwd=workspace.root, capture_output=True, timeout=30,
                   env={**os.environ, "GIT_CEILING_DIRECTORIES": str(tmp_path)})
    assert not marker.exists()


@pytest.mark.parametrize("path", [
    ".GIT/config", ".Git/hooks/pre-commit", "sub/.gIt/config", ".git/config",
    ".g\u200cit/config",  # a zero-width non-joiner: ignored by HFS+ when it compares names
    ".git/../.git/HEAD",
])
def test_finding3_git_is_protected_in_any_spelling(layout, path):
    workspace, _ = layout
    decision = edit(workspace, path)
    assert decision.action is Q and "protected" in decision.reason
    assert edit(workspace, path, mode=FULL).action is A
    assert edit(workspace, path, interactive=False).action is D  # headless denies what would ask
    assert edit(workspace, path, mode=RO).action is D


def test_finding3_git_names_in_nfd_and_nfc_are_one_name(layout):
    import unicodedata
    workspace, _ = layout
    decomposed = unicodedata.normalize("NFD", "\u00e9")  # an e and a combining accent
    (workspace.root / f"caf{decomposed}").mkdir()
    assert edit(workspace, f"caf{decomposed}/x").action is A  # an ordinary name stays writable
    assert edit(workspace, ".git\u200d/config").action is Q


def test_finding3_git_asks_in_a_repository_whose_git_folder_commands_can_write(layout, tmp_path):
    """Only the workspace's own .git is bound read-only for commands: a nested repository's
    (sub/.git) and a bare layout's config are writable by any command the user let run, and
    `git diff` runs the diff.external such a config names. Git on one of those asks."""
    workspace, _ = layout
    marker = tmp_path / "external-diff-ran"
    git = ["git", "-c", "user.name=t", "-c", "user.email=t@t"]
    subprocess.run(["git", "init", "-q"], cwd=workspace.root, check=True)
    sub = workspace.root / "sub"
    sub.mkdir()
    (sub / "f.txt").write_text("one\n")
    subprocess.run(["git", "init", "-q"], cwd=sub, check=True)
    subprocess.run([*git, "add", "f.txt"], cwd=sub, check=True)
    subprocess.run([*git, "commit", "-qm", "one"], cwd=sub, check=True)
    subprocess.run(["git", "config", "diff.external", f"touch {marker}; true"], cwd=sub, check=True)
    (sub / "f.txt").write_text("two\n")
    (workspace.root / "src" / "deep").mkdir(parents=True)
    for command in ("git -C sub diff", "git -C sub/ status", "git -C sub log -p"):
        for mode in (RO, AE):
            _, decision = shell(workspace, command, mode)
            assert decision.action is not A and "sub" in decision.reason, (command, decision.reason)
        assert not run_if_allowed(workspace, command, AE)
    assert not marker.exists()
    bare = workspace.root / "lib"
    for folder in ("objects", "refs"):
        (bare / folder).mkdir(parents=True)
    (bare / "HEAD").write_text("ref: refs/heads/main\n")
    _, decision = shell(workspace, "git -C lib log", AE)
    assert decision.action is Q, decision.reason
    for command in ("git status", "git -C src/deep status", "git log --oneline", "git -C . diff"):
        _, decision = shell(workspace, command, AE)  # the workspace's own repository: as before
        assert decision.action is A, (command, decision.reason)


# --- 4. the app's own files and editor/direnv files ------------------------------------

def test_finding4_our_config_is_protected_when_the_workspace_holds_our_home(tmp_path, monkeypatch):
    home = tmp_path / "user"
    ours = home / ".config" / "hermes-tui"
    ours.mkdir(parents=True)
    (ours / "config.yaml").write_text("agent:\n  approval: ask\n")
    monkeypatch.setenv("HERMES_TUI_HOME", str(ours))
    workspace = Workspace(home)
    for mode in (ASK, AE):
        decision = edit(workspace, ".config/hermes-tui/config.yaml", mode=mode,
                        rules=[Rule.parse("write_file", A)])
        assert decision.action is Q and "hermes-tui's own files" in decision.reason
    request = build_request(TOOLS["edit_file"], {"path": ".config/hermes-tui/config.yaml",
                                                 "old_string": "ask", "new_string": "full"}, workspace)
    assert decide(request, mode=AE, interactive=False).action is D


@pytest.mark.parametrize("path", [".vscode/tasks.json", ".idea/workspace.xml", ".envrc", "sub/.ENVRC",
                                  "sub/.VSCode/settings.json"])
def test_finding4_editor_and_direnv_files_ask(layout, path):
    workspace, _ = layout
    assert edit(workspace, path).action is Q
    assert edit(workspace, path, mode=FULL).action is A
    assert edit(workspace, "src/.envrc.example").action is A  # only the name itself


# --- 5. "always" saved a broader rule than the user saw ---------------------------------

@pytest.mark.parametrize("command,rule", [
    ("CI=1 npm test", None), ("env CI=1 npm test", None), ("timeout 5 make", None),
    ("sudo ls", None), ("bash -c 'ls'", None), ("uv run sh -c ls", None), ("npx jest", None),
    ("xargs rm", None), ("python -c 'print(1)'", None), ("/bin/ls", None), ("ls $(pwd)", None),
    ("git -C sub log", "run_shell: = git -C sub log"), ("git log --oneline", "run_shell: git log"),
    ("npm test", "run_shell: npm test"), ("pytest -q tests", "run_shell: pytest"),
    ("npm install left-pad", "run_shell: = npm install left-pad"), ("make build", "run_shell: = make build"),
    ("cat notes.txt", "run_shell: = cat notes.txt"),
])
def test_finding5_always_stores_the_exact_command_or_a_curated_pair(layout, command, rule):
    workspace, _ = layout
    request, _ = shell(workspace, command, ASK)
    assert (str(request.rule_preview) if request.rule_preview else None) == rule
    assert rule_for(request) == request.rule_preview


def test_finding5_an_exact_rule_allows_that_command_only(layout):
    workspace, _ = layout
    request, _ = shell(workspace, "npm install left-pad", ASK)
    rules = [request.rule_preview]
    assert shell(workspace, "npm install left-pad", ASK, rules)[1].action is A
    assert shell(workspace, "npm install left-pad evil", ASK, rules)[1].action is Q
    assert Rule.parse("run_shell: = npm install left-pad", A) == request.rule_preview  # text form round-trips


@pytest.mark.parametrize("rule,command", [
    ("run_shell: CI=1", "CI=1 rm -rf x"),  # what older versions stored
    ("run_shell: env", "env rm -rf x"), ("run_shell: timeout", "timeout 5 rm -rf x"),
    ("run_shell: bash", "bash -c 'rm -rf x'"), ("run_shell: uv run", "uv run sh -c 'rm -rf x'"),
    ("run_shell: git", 'git -c "alias.x=!touch pwned" x'), ("run_shell: git", "git --config-env=a=b log"),
    ("run_shell: cat", "cat ~/.ssh/id_rsa"), ("run_shell: cat", "cat link/secret.txt"),
    ("run_shell: git log", "git log --output=/tmp/x"),
    ("run_shell: npm test", "CI=1 npm test"),
])
def test_finding5_allow_rules_still_check_paths_options_and_wrappers(layout, rule, command):
    workspace, _ = layout
    _, decision = shell(workspace, command, ASK, [Rule.parse(rule, A)])
    assert decision.action is Q, decision.reason


def test_finding5_a_git_rule_no_longer_runs_an_alias(layout, tmp_path):
    workspace, _ = layout
    subprocess.run(["git", "init", "-q"], cwd=workspace.root, check=True)
    marker = tmp_path / "pwned"
    command = f'git -c "alias.x=!touch {marker}" x'
    _, decision = shell(workspace, command, ASK, [Rule.parse("run_shell: git", A)])
    assert decision.action is Q
    _, decision = shell(workspace, "git status", ASK, [Rule.parse("run_shell: git", A)])
    assert decision.action is A


# --- 6. deny rules were easy to step around ---------------------------------------------

@pytest.mark.parametrize("command", [
    "rm -rf build", "/bin/rm -rf build", "command rm -rf build", "env X=1 rm x", "sudo -u root rm x",
    "timeout -s KILL 5 rm x", "nice -n 5 rm x", "xargs -n1 rm < list", 'bash -c "rm -rf build"',
    "sh -lc 'ls; rm x'", "bash -c \"bash -c 'rm x'\"", "$(echo rm) -rf build", "`echo rm` x",
    "$CMD build", "eval rm x", "find . -delete", "find . -exec rm {} ;", "ls && \\rm x",
    "uv run rm x", "echo $(rm -rf build)", "X=1 rm x", "exec rm x",
])
def test_finding6_a_deny_rule_sees_through_wrappers_paths_and_shells(layout, command):
    workspace, _ = layout
    _, decision = shell(workspace, command, FULL, [Rule.parse("run_shell: rm", D)])
    assert decision.action is D, (decision.reason, programs_run(command))


@pytest.mark.parametrize("command", ["git -c a=b push", "git -C sub push origin", "git --git-dir=.git push",
                                     "/usr/bin/git --no-pager push", "command git push"])
def test_finding6_a_git_push_deny_sees_through_global_options(layout, command):
    workspace, _ = layout
    _, decision = shell(workspace, command, FULL, [Rule.parse("run_shell: git push", D)])
    assert decision.action is D, decision.reason


@pytest.mark.parametrize("command", ["grep rm notes.txt", "echo rm", "git status", "ls -la"])
def test_finding6_deny_rules_do_not_catch_a_mere_word(layout, command):
    workspace, _ = layout
    _, decision = shell(workspace, command, FULL, [Rule.parse("run_shell: rm", D),
                                                    Rule.parse("run_shell: git push", D)])
    assert decision.action is A, decision.reason


def test_finding6_the_rm_the_deny_stopped_did_not_run(layout):
    workspace, _ = layout
    (workspace.root / "build").mkdir()
    for command in ("/bin/rm -rf build", 'bash -c "rm -rf build"', "command rm -rf build"):
        _, decision = shell(workspace, command, FULL, [Rule.parse("run_shell: rm", D)])
        if decision.action is A:
            subprocess.run(["bash", "-c", command], cwd=workspace.root, timeout=30)
    assert Path(workspace.root / "build").is_dir()
