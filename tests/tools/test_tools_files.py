"""The file tools on real files: numbered reads with offset/limit and caps, binary
files, listings and globs that follow .gitignore, exact-replacement edits and writes."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from hermes_tui.tools import ToolContext, Workspace, builtin_registry
from hermes_tui.tools.files import EditFile, WriteFile


@pytest.fixture
def ws(tmp_path: Path) -> Path:
    root = tmp_path / "ws"
    root.mkdir()
    return root


def call(root: Path, name: str, max_output_bytes: int = 32_000, **arguments):
    ctx = ToolContext(workspace=Workspace(root), max_output_bytes=max_output_bytes)
    return builtin_registry().dispatch(name, json.dumps(arguments), ctx)


# --- read_file ------------------------------------------------------------------------

def test_read_numbers_lines_and_honours_offset_and_limit(ws):
    (ws / "f.txt").write_text("".join(f"line {i}\n" for i in range(1, 11)))
    whole = call(ws, "read_file", path="f.txt")
    assert whole.content.splitlines()[0] == "     1\tline 1"
    assert whole.content.splitlines()[-1] == "    10\tline 10"
    assert not whole.truncated
    part = call(ws, "read_file", path="f.txt", offset=4, limit=3)
    assert part.content == ("     4\tline 4\n     5\tline 5\n     6\tline 6\n"
                            "[lines 4-6 of 10 shown; call read_file with offset=7 to read on]\n")
    assert part.truncated


def test_offset_zero_reads_from_the_first_line(ws):
    """Small models count lines from 0 (recorded: Qwen2.5-Coder-1.5B's read_file with offset 0)."""
    (ws / "f.txt").write_text("a\nb\nc\n")
    result = call(ws, "read_file", path="f.txt", offset=0, limit=2)
    assert not result.is_error
    assert result.content.splitlines()[:2] == ["     1\ta", "     2\tb"]


def test_read_past_the_end_says_how_long_the_file_is(ws):
    (ws / "f.txt").write_text("a\nb\n")
    result = call(ws, "read_file", path="f.txt", offset=5)
    assert result.is_error and "has 2 lines" in result.content


def test_read_is_capped_by_bytes_and_says_where_to_go_on(ws):
    (ws / "big.txt").write_text("".join(f"{'x' * 90} {i}\n" for i in range(1, 5001)))
    result = call(ws, "read_file", max_output_bytes=4000, path="big.txt")
    assert len(result.content.encode()) <= 4000
    last_line = result.content.splitlines()[-2]
    last = int(last_line.split("\t")[0])
    assert 20 < last < 45
    assert result.content.splitlines()[-1] == (
        f"[lines 1-{last} of 5000 shown; call read_file with offset={last + 1} to read on]")


def test_very_long_lines_are_cut(ws):
    (ws / "min.js").write_text("y" * 10_000 + "\n")
    result = call(ws, "read_file", path="min.js")
    assert "[8000 chars cut]" in result.content
    assert len(result.content) < 2100


def test_binary_file_gives_a_notice_not_bytes(ws):
    data = bytes(range(256)) * 40
    (ws / "blob.bin").write_bytes(data)
    result = call(ws, "read_file", path="blob.bin")
    assert not result.is_error
    assert result.content == "blob.bin is a binary file (10.0 KB); not shown"
    assert result.bytes == len(data)


def test_empty_missing_and_directory(ws):
    (ws / "empty.txt").write_text("")
    (ws / "d").mkdir()
    assert call(ws, "read_file", path="empty.txt").content == "empty.txt is empty"
    missing = call(ws, "read_file", path="nope.txt")
    assert missing.is_error and missing.content == "nope.txt: no such file"
    assert "is a directory" in call(ws, "read_file", path="d").content


def test_non_utf8_text_is_shown_with_replacements(ws):
    (ws / "latin.txt").write_bytes("caf\xe9\n".encode("latin-1"))
    assert call(ws, "read_file", path="latin.txt").content == "     1\tcaf\ufffd\n"


# --- list_dir and glob ----------------------------------------------------------------

@pytest.fixture
def tree(ws: Path) -> Path:
    (ws / ".git").mkdir()
    (ws / ".git" / "config").write_text("[core]\n")
    (ws / ".gitignore").write_text("*.log\nbuild/\n!keep.log\n")
    (ws / "src" / "pkg").mkdir(parents=True)
    (ws / "src" / "a.py").write_text("import os\n")
    (ws / "src" / "pkg" / "b.py").write_text("print('b')\n")
    (ws / "src" / "pkg" / ".gitignore").write_text("generated.py\n")
    (ws / "src" / "pkg" / "generated.py").write_text("x = 1\n")
    (ws / "build").mkdir()
    (ws / "build" / "out.py").write_text("built\n")
    (ws / "debug.log").write_text("noise\n")
    (ws / "keep.log").write_text("kept\n")
    (ws / ".github").mkdir()
    (ws / ".github" / "ci.yml").write_text("on: push\n")
    return ws


def test_list_dir_skips_git_and_ignored(tree):
    assert call(tree, "list_dir").content.splitlines() == [
        ".github/", ".gitignore", "keep.log", "src/"]
    # inside a folder, each entry is a path from the workspace, as glob and grep give theirs
    assert call(tree, "list_dir", path="src/pkg").content.splitlines() == ["src/pkg/.gitignore", "src/pkg/b.py"]
    assert call(tree, "list_dir", path="./src/pkg/").content.splitlines() == ["src/pkg/.gitignore", "src/pkg/b.py"]
    # a worktree's or a submodule's .git is a file: git's all the same
    (tree / "src" / "pkg" / ".git").write_text("gitdir: /elsewhere/.git/worktrees/pkg\n")
    assert call(tree, "list_dir", path="src/pkg").content.splitlines() == ["src/pkg/.gitignore", "src/pkg/b.py"]
    assert call(tree, "glob", pattern="src/pkg/*").content.splitlines() == ["src/pkg/.gitignore", "src/pkg/b.py"]


def test_glob_follows_nested_gitignores(tree):
    assert call(tree, "glob", pattern="*.py").content.splitlines() == ["src/a.py", "src/pkg/b.py"]
    assert call(tree, "glob", pattern="src/*.py").content.splitlines() == ["src/a.py"]
    assert call(tree, "glob", pattern="*.log").content.splitlines() == ["keep.log"]
    assert call(tree, "glob", pattern="**/*.yml").content.splitlines() == [".github/ci.yml"]
    assert call(tree, "glob", pattern="*.py", path="src/pkg").content.splitlines() == ["src/pkg/b.py"]
    # a pattern from the workspace, as the results are shown, finds the same under its path
    assert call(tree, "glob", pattern="src/pkg/*.py", path="src/pkg").content.splitlines() == ["src/pkg/b.py"]
    assert call(tree, "glob", pattern="src/*", path="src/").content == call(tree, "glob", pattern="src/*").content
    assert call(tree, "glob", pattern="*.rs").content == "no files match '*.rs'\n"


def test_a_line_of_gitignore_git_passes_over_leaves_the_rest_in_force(ws):
    # "!" alone and a lone backslash are lines git skips; pathspec refuses a file holding one
    (ws / ".gitignore").write_text("!\n*.log\n\\\nbuild/\n")
    (ws / "app.log").write_text("x\n")
    (ws / "build").mkdir()
    (ws / "main.py").write_text("print('log')\n")
    assert call(ws, "list_dir", path=".").content.splitlines() == [".gitignore", "main.py"]
    assert call(ws, "glob", pattern="**/*").content.splitlines() == [".gitignore", "main.py"]
    found = call(ws, "grep", pattern="x|log").content
    assert "main.py:1:" in found and "app.log" not in found


def test_glob_caps_its_results(ws):
    for i in range(250):
        (ws / f"f{i:03}.txt").write_text("")
    result = call(ws, "glob", pattern="*.txt")
    lines = result.content.splitlines()
    assert len(lines) == 201 and lines[-1] == "[50 more matches not shown; narrow the pattern or the path]"
    assert result.truncated


# --- edit_file ------------------------------------------------------------------------

def test_edit_replaces_exactly_once_and_returns_a_diff(ws):
    (ws / "m.py").write_text("def f():\n    return 1\n")
    result = call(ws, "edit_file", path="m.py", old_string="return 1", new_string="return 2")
    assert not result.is_error
    assert result.content == "edited m.py: 1 replacement (+1 -1 lines)\n"
    assert (ws / "m.py").read_text() == "def f():\n    return 2\n"
    assert result.diff == ("--- a/m.py\n+++ b/m.py\n@@ -1,2 +1,2 @@\n def f():\n"
                           "-    return 1\n+    return 2\n")
    assert result.metadata()["diff"] == result.diff


def test_edit_refuses_missing_and_ambiguous_text(ws):
    (ws / "m.py").write_text("x = 1\nx = 1\n")
    missing = call(ws, "edit_file", path="m.py", old_string="y = 1", new_string="y = 2")
    assert missing.is_error and "not found" in missing.content
    twice = call(ws, "edit_file", path="m.py", old_string="x = 1", new_string="x = 2")
    assert twice.is_error and "occurs 2 times" in twice.content
    assert (ws / "m.py").read_text() == "x = 1\nx = 1\n"
    both = call(ws, "edit_file", path="m.py", old_string="x = 1", new_string="x = 2", replace_all=True)
    assert both.content == "edited m.py: 2 replacements (+2 -2 lines)\n"
    assert (ws / "m.py").read_text() == "x = 2\nx = 2\n"


def test_edit_keeps_crlf_and_file_mode(ws):
    path = ws / "w.txt"
    path.write_bytes(b"one\r\ntwo\r\n")
    os.chmod(path, 0o755)
    result = call(ws, "edit_file", path="w.txt", old_string="one\ntwo", new_string="1\n2")
    assert not result.is_error
    assert path.read_bytes() == b"1\r\n2\r\n"
    assert path.stat().st_mode & 0o777 == 0o755


def test_edit_refuses_binary_and_same_text(ws):
    (ws / "b.bin").write_bytes(b"\0\1\2abc")
    assert "binary" in call(ws, "edit_file", path="b.bin", old_string="abc", new_string="d").content
    (ws / "t.txt").write_text("a")
    assert "the same" in call(ws, "edit_file", path="t.txt", old_string="a", new_string="a").content


def test_edit_preview_is_the_diff_and_writes_nothing(ws):
    (ws / "m.py").write_text("a\n")
    ctx = ToolContext(workspace=Workspace(ws))
    diff = EditFile().preview({"path": "m.py", "old_string": "a", "new_string": "b"}, ctx)
    assert diff == "--- a/m.py\n+++ b/m.py\n@@ -1 +1 @@\n-a\n+b\n"
    assert (ws / "m.py").read_text() == "a\n"


# --- write_file -----------------------------------------------------------------------

def test_write_creates_parents_and_diffs_against_the_old_content(ws):
    created = call(ws, "write_file", path="new/deep/f.txt", content="one\n")
    assert created.content == "created new/deep/f.txt (4 bytes)\n"
    assert (ws / "new" / "deep" / "f.txt").read_text() == "one\n"
    assert created.diff == "--- /dev/null\n+++ b/new/deep/f.txt\n@@ -0,0 +1 @@\n+one\n"
    replaced = call(ws, "write_file", path="new/deep/f.txt", content="two\n")
    assert replaced.content == "wrote new/deep/f.txt (4 bytes)\n"
    assert replaced.diff == "--- a/new/deep/f.txt\n+++ b/new/deep/f.txt\n@@ -1 +1 @@\n-one\n+two\n"
    assert sorted(p.name for p in (ws / "new" / "deep").iterdir()) == ["f.txt"]  # no temp left


def test_write_preview_writes_nothing(ws):
    ctx = ToolContext(workspace=Workspace(ws))
    diff = WriteFile().preview({"path": "x/y.txt", "content": "hi\n"}, ctx)
    assert diff == "--- /dev/null\n+++ b/x/y.txt\n@@ -0,0 +1 @@\n+hi\n"
    assert not (ws / "x").exists()


def test_write_refuses_a_directory(ws):
    (ws / "d").mkdir()
    result = call(ws, "write_file", path="d", content="x")
    assert result.is_error and "is a directory" in result.content
