"""What the system prompt says (``session.system_prompt.build``), on real folders: the workspace
and its repository, OS, date, tools, approval mode, and the instruction files in their order,
cut and cleaned. The user's own file lives in a temp HERMES_TUI_HOME (the ``hermes_home`` fixture)."""

from __future__ import annotations

import platform
from datetime import date
from pathlib import Path

import pytest

from hermes_tui.core.tokens import EstimateCounter
from hermes_tui.session import system_prompt
from hermes_tui.session.system_prompt import MAX_FILE_BYTES, build
from hermes_tui.tools.builtin import builtin_registry

TOOLS = [spec["function"]["name"] for spec in builtin_registry().specs()]
DAY = date(2026, 3, 14)


def git_repo(path: Path) -> Path:
    (path / ".git").mkdir(parents=True)
    return path


def prompt(workspace: Path, mode: str | None = "ask", **kwargs) -> str:
    return build(workspace, mode=mode, tools=TOOLS, today=DAY, **kwargs)


def test_a_git_workspace_without_instructions(tmp_path, hermes_home):
    repo = git_repo(tmp_path / "repo")
    text = prompt(repo)
    assert f"working in the folder {repo.resolve()} (the workspace). It is a git repository." in text
    assert f"OS: {platform.system().replace('Darwin', 'macOS')}; shell: bash. Today is 2026-03-14." in text
    assert "Paths are relative to the workspace." in text
    assert "Read a file before you edit it." in text
    assert "(list_dir, glob, grep, read_file) instead of guessing" in text
    assert "answer briefly" in text
    assert "Approval mode ask: reads run; each edit and command waits for the user's approval" in text
    assert "Instructions from" not in text


def test_a_git_workspace_with_agents_md(tmp_path, hermes_home):
    repo = git_repo(tmp_path / "repo")
    (repo / "AGENTS.md").write_text("Run the tests with `uv run pytest -q`.\n")
    text = prompt(repo)
    assert text.endswith("--- AGENTS.md ---\nRun the tests with `uv run pytest -q`.")
    assert "Instructions from the project's files" in text


def test_a_workspace_below_the_repository_root_names_the_root(tmp_path, hermes_home):
    repo = git_repo(tmp_path / "repo")
    (repo / "pkg").mkdir()
    text = prompt(repo / "pkg")
    assert f"It is inside the git repository {repo.resolve()}." in text


def test_a_worktree_whose_git_is_a_file_is_a_repository(tmp_path, hermes_home):
    repo = tmp_path / "wt"
    repo.mkdir()
    (repo / ".git").write_text("gitdir: /elsewhere/.git/worktrees/wt\n")
    assert "It is a git repository." in prompt(repo)


def test_a_non_git_workspace_reads_only_its_own_folder(tmp_path, hermes_home):
    (tmp_path / "AGENTS.md").write_text("parent rules: not ours")
    work = tmp_path / "work"
    work.mkdir()
    assert "It is not a git repository." in prompt(work)
    assert "Instructions from" not in prompt(work)
    (work / "AGENTS.md").write_text("work rules")
    text = prompt(work)
    assert "--- AGENTS.md ---\nwork rules" in text
    assert "parent rules" not in text


def test_claude_md_stands_in_only_where_a_folder_has_no_agents_md(tmp_path, hermes_home):
    repo = git_repo(tmp_path / "repo")
    (repo / "AGENTS.md").write_text("agents at the root")
    (repo / "CLAUDE.md").write_text("claude at the root")
    (repo / "pkg").mkdir()
    (repo / "pkg" / "CLAUDE.md").write_text("claude in pkg")
    text = prompt(repo / "pkg")
    assert "agents at the root" in text
    assert "claude at the root" not in text
    assert "--- CLAUDE.md ---\nclaude in pkg" in text


def test_nested_files_go_from_the_repository_root_down_to_the_workspace(tmp_path, hermes_home):
    repo = git_repo(tmp_path / "repo")
    (tmp_path / "AGENTS.md").write_text("above the repository")
    deep = repo / "a" / "b"
    deep.mkdir(parents=True)
    (repo / "sibling").mkdir()
    (deep / "below").mkdir()
    for folder, text in [(repo, "root"), (repo / "a", "middle"), (deep, "workspace"),
                         (repo / "sibling", "sibling"), (deep / "below", "below")]:
        (folder / "AGENTS.md").write_text(f"rules of {text}")
    (hermes_home / "AGENTS.md").write_text("rules of the user")
    text = prompt(deep)
    order = ["rules of the user", "rules of root", "rules of middle", "rules of workspace"]
    positions = [text.index(rule) for rule in order]
    assert positions == sorted(positions)
    assert "--- ../../AGENTS.md ---" in text and "--- your AGENTS.md ---" in text
    for absent in ("above the repository", "rules of sibling", "rules of below"):
        assert absent not in text


def test_the_user_file_comes_from_our_home_and_alone_is_enough(tmp_path, hermes_home):
    work = tmp_path / "work"
    work.mkdir()
    (hermes_home / "AGENTS.md").write_text("Always answer in French.")
    assert "--- your AGENTS.md ---\nAlways answer in French." in prompt(work)


def test_an_oversized_file_is_cut_at_a_line_and_says_so(tmp_path, hermes_home):
    repo = git_repo(tmp_path / "repo")
    lines = [f"rule {n}: keep going" for n in range(2_000)]
    (repo / "AGENTS.md").write_text("\n".join(lines) + "\nTHE LAST RULE\n")
    size = (repo / "AGENTS.md").stat().st_size
    text = prompt(repo)
    assert "rule 0: keep going" in text
    assert "THE LAST RULE" not in text
    assert f"[AGENTS.md was cut here: it is {size:,} bytes and only the first {MAX_FILE_BYTES:,} are included" in text
    kept = text.split("--- AGENTS.md ---\n")[1].split("\n[AGENTS.md was cut")[0]
    assert kept.endswith("keep going")  # whole lines only
    assert len(kept.encode()) <= MAX_FILE_BYTES


def test_a_cut_through_a_character_leaves_no_broken_one(tmp_path):
    path = tmp_path / "AGENTS.md"
    path.write_text("é" * 100)  # two bytes each: a cut at an odd byte splits one
    text = system_prompt.read_instructions(path, limit=51)
    assert text.startswith("é" * 25 + "\n[AGENTS.md was cut")
    assert "\ufffd" not in text


def test_terminal_control_sequences_are_stripped(tmp_path, hermes_home):
    repo = git_repo(tmp_path / "repo")
    (repo / "AGENTS.md").write_bytes(
        b"\x1b]52;c;ZXZpbA==\x07Use tabs\x1b[2J\x1b[31m here\x1b[0m.\r\n\x1b]8;;http://x\x1b\\link\x1b]8;;\x1b\\\x00\x07\x9b\n")
    text = prompt(repo)
    assert "--- AGENTS.md ---\nUse tabs here.\nlink" in text
    assert not any(ord(ch) < 32 and ch not in "\n\t" or 0x7F <= ord(ch) <= 0x9F for ch in text)


@pytest.mark.parametrize(("interactive", "expected"), [
    (True, "Approval mode ask: reads run; each edit and command waits for the user's approval"),
    (False, "Approval mode ask: reads run; edits and commands are refused (no one is there to approve them)."),
])
def test_the_mode_says_what_happens_with_and_without_someone_to_ask(tmp_path, hermes_home, interactive, expected):
    assert expected in prompt(tmp_path, interactive=interactive)


@pytest.mark.parametrize("mode", ["read-only", "ask", "auto-edit", "full"])
def test_every_mode_is_explained(tmp_path, hermes_home, mode):
    line = next(line for line in prompt(tmp_path, mode=mode).splitlines() if line.startswith("Approval mode"))
    assert line.startswith(f"Approval mode {mode}: ") and len(line) > len("Approval mode full: ") + 30


def test_without_tools_it_says_so_and_gives_no_tool_advice(tmp_path, hermes_home):
    text = prompt(tmp_path, mode=None)
    assert "You have no tools in this chat" in text
    assert "Approval mode" not in text and "read_file" not in text


def test_the_fixed_part_is_short(tmp_path, hermes_home):
    repo = git_repo(tmp_path / "a-rather-long-folder-name" / "repository")
    tokens = EstimateCounter().count_text(prompt(repo / ".", interactive=False))
    assert tokens < 300, tokens
