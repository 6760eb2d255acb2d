"""The workspace boundary on real files: ``..``, absolute paths, symlinks out (file and
directory), and the approval callback deciding what happens outside."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from hermes_tui.tools import OutsideAccess, ToolContext, ToolRegistry, Workspace, builtin_registry
from hermes_tui.tools.search import Grep


@pytest.fixture
def layout(tmp_path: Path) -> tuple[Path, Path]:
    """A workspace and, beside it, an outside folder with a secret."""
    ws = tmp_path / "ws"
    outside = tmp_path / "outside"
    ws.mkdir()
    outside.mkdir()
    (outside / "secret.txt").write_text("the secret\n")
    (ws / "inside.txt").write_text("hello\n")
    (ws / "link_file").symlink_to(outside / "secret.txt")
    (ws / "link_dir").symlink_to(outside)
    (ws / "link_in").symlink_to(ws / "inside.txt")
    return ws, outside


def call(ctx: ToolContext, name: str, **arguments):
    return builtin_registry().dispatch(name, json.dumps(arguments), ctx)


OUTSIDE_READS = [
    ("read_file", {"path": "../outside/secret.txt"}),
    ("read_file", {"path": "sub/../../outside/secret.txt"}),
    ("read_file", {"path": "link_file"}),
    ("read_file", {"path": "link_dir/secret.txt"}),
    ("list_dir", {"path": "link_dir"}),
    ("list_dir", {"path": ".."}),
    ("glob", {"pattern": "*.txt", "path": "link_dir"}),
    ("grep", {"pattern": "secret", "path": "link_dir"}),
    ("grep", {"pattern": "secret", "path": "link_file"}),
]


@pytest.mark.parametrize("name,arguments", OUTSIDE_READS)
def test_outside_reads_are_refused_headless(layout, name, arguments):
    ws, _ = layout
    result = call(ToolContext(workspace=Workspace(ws)), name, **arguments)
    assert result.is_error
    assert "outside the workspace" in result.content and "refused" in result.content
    assert "the secret" not in result.content


def test_absolute_path_outside_is_refused(layout):
    ws, outside = layout
    result = call(ToolContext(workspace=Workspace(ws)), "read_file", path=str(outside / "secret.txt"))
    assert result.is_error and "outside the workspace" in result.content


def test_absolute_path_inside_is_fine(layout):
    ws, _ = layout
    result = call(ToolContext(workspace=Workspace(ws)), "read_file", path=str(ws / "inside.txt"))
    assert not result.is_error
    assert result.content == "     1\thello\n"
    assert result.paths == ("inside.txt",)


def test_symlink_inside_pointing_inside_is_fine(layout):
    ws, _ = layout
    result = call(ToolContext(workspace=Workspace(ws)), "read_file", path="link_in")
    assert result.content == "     1\thello\n"


def test_the_approval_callback_is_asked_and_its_no_refuses(layout):
    ws, outside = layout
    asked: list[OutsideAccess] = []

    def no(access: OutsideAccess) -> bool:
        asked.append(access)
        return False

    result = call(ToolContext(workspace=Workspace(ws), approve_outside=no), "read_file", path="link_file")
    assert result.is_error and "not approved" in result.content
    assert [(a.tool, a.given, a.resolved, a.purpose) for a in asked] == [
        ("read_file", "link_file", (outside / "secret.txt").resolve(), "read")]


def test_an_approved_outside_read_goes_ahead(layout):
    ws, outside = layout
    ctx = ToolContext(workspace=Workspace(ws), approve_outside=lambda access: True)
    result = call(ctx, "read_file", path="link_dir/secret.txt")
    assert not result.is_error
    assert result.content == "     1\tthe secret\n"
    assert result.paths == (str((outside / "secret.txt").resolve()),)


@pytest.mark.parametrize("name,arguments", [
    ("write_file", {"path": "../outside/new.txt", "content": "x"}),
    ("write_file", {"path": "link_dir/new.txt", "content": "x"}),
    ("write_file", {"path": "link_dir/deep/er/new.txt", "content": "x"}),
    ("write_file", {"path": "link_file", "content": "overwritten"}),
    ("edit_file", {"path": "link_file", "old_string": "the secret", "new_string": "changed"}),
])
def test_writes_through_escapes_are_refused_and_touch_nothing(layout, name, arguments):
    ws, outside = layout
    before = sorted(p.relative_to(outside) for p in outside.rglob("*"))
    asked: list[OutsideAccess] = []
    ctx = ToolContext(workspace=Workspace(ws), approve_outside=lambda a: asked.append(a) or False)
    result = call(ctx, name, **arguments)
    assert result.is_error and "outside the workspace" in result.content
    assert asked and asked[0].purpose == "write"
    assert sorted(p.relative_to(outside) for p in outside.rglob("*")) == before
    assert (outside / "secret.txt").read_text() == "the secret\n"


def test_listing_and_search_do_not_follow_a_symlinked_directory_out(layout):
    ws, _ = layout
    ctx = ToolContext(workspace=Workspace(ws))
    listing = call(ctx, "list_dir")
    assert listing.content.splitlines() == ["inside.txt", "link_dir@", "link_file@", "link_in@"]
    found = call(ctx, "glob", pattern="*.txt")
    assert found.content.splitlines() == ["inside.txt"]
    for use_rg in (True, False):
        result = ToolRegistry([Grep(use_ripgrep=use_rg)]).dispatch("grep", '{"pattern": "secret"}', ctx)
        assert "the secret" not in result.content, use_rg


def test_workspace_must_be_a_directory(tmp_path):
    with pytest.raises(ValueError, match="not a directory"):
        Workspace(tmp_path / "missing")


def test_nul_in_a_path_is_an_error_result(layout):
    ws, _ = layout
    result = call(ToolContext(workspace=Workspace(ws)), "read_file", path="a\u0000b")
    assert result.is_error and "NUL" in result.content


def test_approver_for_grants_exactly_the_approved_paths(layout):
    ws, outside = layout
    workspace = Workspace(ws)
    ctx = ToolContext(workspace=workspace, approve_outside=workspace.approver_for(["../outside/secret.txt"]))
    assert call(ctx, "read_file", path="link_file").content == "     1\tthe secret\n"  # same file
    other = call(ctx, "write_file", path="../outside/other.txt", content="x")
    assert other.is_error and "not approved" in other.content
    assert not (outside / "other.txt").exists()
