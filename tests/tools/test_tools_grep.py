"""grep on real files, by ripgrep and by the Python search: one output format, .gitignore
and .git skipped, binary files skipped, results capped."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from hermes_tui.tools import ToolContext, ToolRegistry, Workspace
from hermes_tui.tools.search import Grep, find_ripgrep

HAVE_RG = find_ripgrep() is not None
# Under CI (.ci/run installs ripgrep) a missing rg fails these tests instead of skipping them.
SKIP_RG = not HAVE_RG and not os.environ.get("CI")
BACKENDS = [pytest.param(False, id="python"),
            pytest.param(True, id="ripgrep",
                         marks=pytest.mark.skipif(SKIP_RG, reason="rg is not on PATH"))]


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    ws = tmp_path / "ws"
    (ws / ".git").mkdir(parents=True)
    (ws / ".git" / "HEAD").write_text("needle in git\n")
    (ws / ".gitignore").write_text("ignored/\n*.tmp\n")
    (ws / "ignored").mkdir()
    (ws / "ignored" / "x.txt").write_text("needle ignored\n")
    (ws / "junk.tmp").write_text("needle tmp\n")
    (ws / "b.txt").write_text("no\nneedle two\nNEEDLE upper\n")
    (ws / "a.py").write_text("needle = 1\n")
    (ws / "sub").mkdir()
    (ws / "sub" / ".gitignore").write_text("local.txt\n")
    (ws / "sub" / "local.txt").write_text("needle local\n")
    (ws / "sub" / "c.py").write_text("x\nneedle three\n")
    (ws / ".hidden.txt").write_text("needle hidden\n")
    (ws / "blob.bin").write_bytes(b"needle\0\1\2")
    (ws / "long.txt").write_text("needle " + "z" * 1000 + "\n")
    return ws


def grep(ws: Path, use_rg: bool, **arguments):
    ctx = ToolContext(workspace=Workspace(ws))
    return ToolRegistry([Grep(use_ripgrep=use_rg)]).dispatch("grep", json.dumps(arguments), ctx)


EXPECTED = [
    ".hidden.txt:1:needle hidden",
    "a.py:1:needle = 1",
    "b.txt:2:needle two",
    "long.txt:1:needle " + "z" * 293 + "…",
    "sub/c.py:2:needle three",
    "[5 matches in 5 files]",  # counted for the model: small models miscount lines
]


@pytest.mark.parametrize("use_rg", BACKENDS)
def test_matches_in_one_format_skipping_ignored_git_and_binary(tree, use_rg):
    result = grep(tree, use_rg, pattern="needle")
    assert not result.is_error, result.content
    assert result.content.splitlines() == EXPECTED


@pytest.mark.parametrize("use_rg", BACKENDS)
def test_options(tree, use_rg):
    assert grep(tree, use_rg, pattern="needle", ignore_case=True, path="b.txt").content.splitlines() == [
        "b.txt:2:needle two", "b.txt:3:NEEDLE upper", "[2 matches in 1 file]"]
    assert grep(tree, use_rg, pattern="needle", glob="*.py").content.splitlines() == [
        "a.py:1:needle = 1", "sub/c.py:2:needle three", "[2 matches in 2 files]"]
    assert grep(tree, use_rg, pattern="needle", path="sub").content.splitlines() == [
        "sub/c.py:2:needle three", "[1 match in 1 file]"]
    assert grep(tree, use_rg, pattern="absent").content == "no matches for 'absent'\n"


@pytest.mark.parametrize("use_rg", BACKENDS)
def test_results_are_capped(tree, use_rg):
    (tree / "many.txt").write_text("hit\n" * 500)
    result = grep(tree, use_rg, pattern="hit", max_results=7)
    lines = result.content.splitlines()
    assert lines[:7] == [f"many.txt:{i}:hit" for i in range(1, 8)]
    assert lines[7] == "[stopped at 7 matches; narrow the pattern, path or glob]"
    assert len(lines) == 8 and result.truncated


@pytest.mark.parametrize("use_rg", BACKENDS)
def test_an_invalid_pattern_is_an_error_result(tree, use_rg):
    result = grep(tree, use_rg, pattern="(unclosed")
    assert result.is_error and result.content.startswith("invalid pattern")


@pytest.mark.parametrize("use_rg", BACKENDS)
def test_a_binary_file_named_explicitly_gives_nothing(tree, use_rg):
    assert grep(tree, use_rg, pattern="needle", path="blob.bin").content == "no matches for 'needle'\n"


@pytest.mark.skipif(SKIP_RG, reason="rg is not on PATH")
def test_ripgrep_and_python_agree_on_this_source_tree():
    root = Path(__file__).resolve().parents[2] / "hermes_tui"
    by_rg = grep(root, True, pattern=r"def \w+_result", max_results=1000)
    by_py = grep(root, False, pattern=r"def \w+_result", max_results=1000)
    assert by_rg.content.splitlines() and by_rg.content == by_py.content
