"""Read before edit, on real files: with a ``ReadRecord`` in the context (the agent always
sets one), ``edit_file`` and ``write_file`` change an existing file only after ``read_file``
read it and while it is as it was then; without one (tools used standalone) they do as before."""

from __future__ import annotations

import json
import os
import threading
from pathlib import Path

import pytest

from hermes_tui.tools import ToolContext, Workspace, builtin_registry
from hermes_tui.tools.base import ToolError
from hermes_tui.tools.files import EditFile, WriteFile
from hermes_tui.tools.read_record import ReadRecord, Seen

PRICING = "def price(n):\n    return n * 2\n\n\ndef tax(n):\n    return n // 10\n"


@pytest.fixture
def ws(tmp_path: Path) -> Path:
    root = tmp_path / "ws"
    (root / "shopkit").mkdir(parents=True)
    (root / "shopkit" / "pricing.py").write_text(PRICING)
    return root


@pytest.fixture
def ctx(ws: Path) -> ToolContext:
    return ToolContext(workspace=Workspace(ws), read_record=ReadRecord())


def call(ctx: ToolContext, name: str, **arguments):
    return builtin_registry().dispatch(name, json.dumps(arguments), ctx)


def edit(ctx: ToolContext, old: str, new: str, path: str = "shopkit/pricing.py"):
    return call(ctx, "edit_file", path=path, old_string=old, new_string=new)


def moved_on(path: Path) -> None:
    """Give ``path`` another mtime, its content and size unchanged (a touch by another program)."""
    st = path.stat()
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns + 5_000_000_000))


def refusal(tool: str, why: str = "was not read in this session (edits apply only to a file read first)") -> str:
    return (f"shopkit/pricing.py {why}, so nothing was changed. Here it is now (read for you); "
            f"call {tool} again with text copied from it exactly:\n")


def test_an_edit_of_a_file_not_read_is_refused_and_writes_nothing(ws, ctx):
    result = edit(ctx, "n * 2", "n * 3")
    assert result.is_error
    assert result.content.startswith(refusal("edit_file"))
    # the refusal holds the file as read_file shows it: the next call can make the change
    assert result.content.removeprefix(refusal("edit_file")) == call(ctx, "read_file", path="shopkit/pricing.py").content
    assert (ws / "shopkit" / "pricing.py").read_text() == PRICING


def test_the_refusal_is_the_read_so_the_edit_applies_next(ws, ctx):
    assert edit(ctx, "n * 2", "n * 3").is_error
    result = edit(ctx, "n * 2", "n * 3")
    assert not result.is_error, result.content
    assert (ws / "shopkit" / "pricing.py").read_text() == PRICING.replace("n * 2", "n * 3")


def test_the_preview_refuses_too_so_no_one_is_asked_to_approve_it(ws, ctx):
    """The approval prompt shows ``preview``'s diff: the refusal comes before it."""
    with pytest.raises(ToolError, match="was not read in this session.*call edit_file again"):
        EditFile().preview({"path": "shopkit/pricing.py", "old_string": "n * 2", "new_string": "n * 3"}, ctx)
    (ws / "shopkit" / "pricing.py").write_text(PRICING + "\n")  # changed since the refusal read it
    with pytest.raises(ToolError, match="changed since it was read; read it with read_file before writing over it"):
        WriteFile().preview({"path": "shopkit/pricing.py", "content": "x = 1\n"}, ctx)
    (ws / "shopkit" / "pricing.py").write_text(PRICING)
    assert (ws / "shopkit" / "pricing.py").read_text() == PRICING


def test_after_a_read_the_edit_applies(ws, ctx):
    assert not call(ctx, "read_file", path="shopkit/pricing.py").is_error
    result = edit(ctx, "n * 2", "n * 3")
    assert not result.is_error, result.content
    assert (ws / "shopkit" / "pricing.py").read_text() == PRICING.replace("n * 2", "n * 3")


@pytest.mark.parametrize("window", [{"offset": 5, "limit": 1}, {"offset": 0, "limit": 1}, {"limit": 2}])
def test_a_read_of_any_part_counts(ws, ctx, window):
    read = call(ctx, "read_file", path="shopkit/pricing.py", **window)
    assert not read.is_error and read.truncated
    assert not edit(ctx, "n // 10", "n // 5").is_error
    assert "n // 5" in (ws / "shopkit" / "pricing.py").read_text()


def test_a_read_that_failed_or_found_a_binary_file_is_no_read(ws, ctx):
    past = call(ctx, "read_file", path="shopkit/pricing.py", offset=99)
    assert past.is_error and "past the end" in past.content
    assert "was not read in this session" in edit(ctx, "n * 2", "n * 3").content
    (ws / "blob.bin").write_bytes(b"\0\1\2")
    assert "binary" in call(ctx, "read_file", path="blob.bin").content
    assert ctx.read_record is not None
    assert ctx.read_record.check((ws / "blob.bin").resolve()) is Seen.UNREAD


def test_an_empty_file_read_is_a_read(ws, ctx):
    (ws / "empty.txt").write_text("")
    assert call(ctx, "read_file", path="empty.txt").content == "empty.txt is empty"
    assert call(ctx, "write_file", path="empty.txt", content="now\n").content == "wrote empty.txt (4 bytes)\n"


@pytest.mark.parametrize("change", ["mtime", "content"])
def test_a_file_changed_since_it_was_read_is_read_again_first(ws, ctx, change):
    path = ws / "shopkit" / "pricing.py"
    call(ctx, "read_file", path="shopkit/pricing.py")
    if change == "mtime":
        moved_on(path)
    else:
        path.write_text(PRICING + "\n\ndef discount(n):\n    return 0\n")
    changed = path.read_text()
    result = edit(ctx, "n * 2", "n * 3")
    assert result.is_error
    assert result.content.startswith(refusal("edit_file", "changed since it was read"))
    assert path.read_text() == changed
    assert not edit(ctx, "n * 2", "n * 3").is_error  # the refusal read it again: the edit applies


def test_edits_in_a_row_after_one_read(ws, ctx):
    call(ctx, "read_file", path="shopkit/pricing.py")
    assert not edit(ctx, "n * 2", "n * 3").is_error
    assert not edit(ctx, "n // 10", "n // 5").is_error
    assert not call(ctx, "write_file", path="shopkit/pricing.py", content="PRICE = 3\n").is_error
    assert not edit(ctx, "PRICE = 3", "PRICE = 4").is_error
    assert (ws / "shopkit" / "pricing.py").read_text() == "PRICE = 4\n"


def test_write_file_over_a_file_not_read_is_refused_and_leaves_it(ws, ctx):
    result = call(ctx, "write_file", path="shopkit/pricing.py", content="def price(n):\n    pass\n")
    assert result.is_error
    assert result.content == ("shopkit/pricing.py was not read in this session (edits apply only to a file read "
                              "first); read it with read_file before writing over it, or change a part of it "
                              "with edit_file")
    assert (ws / "shopkit" / "pricing.py").read_text() == PRICING
    # a whole-file write is not read for the model: the same blind write is refused again
    again = call(ctx, "write_file", path="shopkit/pricing.py", content="def price(n):\n    pass\n")
    assert again.is_error and (ws / "shopkit" / "pricing.py").read_text() == PRICING


def test_write_file_creates_a_new_file_unread_and_it_can_be_edited_next(ws, ctx):
    created = call(ctx, "write_file", path="shopkit/cart.py", content="ITEMS = []\n")
    assert created.content == "created shopkit/cart.py (11 bytes)\n"
    assert not edit(ctx, "ITEMS = []", "ITEMS: list = []", path="shopkit/cart.py").is_error
    assert (ws / "shopkit" / "cart.py").read_text() == "ITEMS: list = []\n"


def test_a_path_is_one_file_however_it_is_written(ws, ctx):
    call(ctx, "read_file", path="./shopkit/../shopkit/pricing.py")
    assert not edit(ctx, "n * 2", "n * 3", path=str(ws / "shopkit" / "pricing.py")).is_error


def test_without_a_record_the_tools_do_as_before(ws):
    ctx = ToolContext(workspace=Workspace(ws))
    assert ctx.read_record is None
    assert not edit(ctx, "n * 2", "n * 3").is_error
    assert not call(ctx, "write_file", path="shopkit/pricing.py", content="x = 1\n").is_error
    assert (ws / "shopkit" / "pricing.py").read_text() == "x = 1\n"


def test_the_record_stands_threads_recording_at_once(tmp_path):
    files = []
    for n in range(20):
        files.append(tmp_path / f"f{n}.txt")
        files[-1].write_text(str(n))
    record = ReadRecord()
    threads = [threading.Thread(target=lambda p=p: [record.record(p) for _ in range(50)]) for p in files]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert all(record.check(p) is Seen.CURRENT for p in files)
    files[0].unlink()
    assert record.check(files[0]) is Seen.CHANGED
    record.record(files[0])  # gone: forgotten, not recorded
    assert record.check(files[0]) is Seen.UNREAD


def test_a_read_counts_from_the_next_reply_on(ws, ctx):
    """The agent answers a reply's calls inside ``reply()``: a write in the same reply as the
    read of its file was written before the model saw the file."""
    record = ctx.read_record
    assert record is not None
    with record.reply():
        assert not call(ctx, "read_file", path="shopkit/pricing.py").is_error
        blind = call(ctx, "write_file", path="shopkit/pricing.py", content="def price(n):\n    pass\n")
        assert blind.is_error and "was not read in this session" in blind.content
    assert (ws / "shopkit" / "pricing.py").read_text() == PRICING
    with record.reply():  # the next reply: the read counts
        assert not edit(ctx, "n * 2", "n * 3").is_error


def test_what_our_tools_write_counts_at_once_in_the_same_reply(ws, ctx):
    record = ctx.read_record
    assert record is not None
    with record.reply():
        assert not call(ctx, "write_file", path="shopkit/cart.py", content="ITEMS = []\n").is_error
        assert not edit(ctx, "ITEMS = []", "ITEMS: list = []", path="shopkit/cart.py").is_error
        # a read after the write in the same reply does not take the write's count back
        call(ctx, "read_file", path="shopkit/cart.py")
        assert not edit(ctx, "ITEMS: list", "ITEMS: tuple", path="shopkit/cart.py").is_error
    assert (ws / "shopkit" / "cart.py").read_text() == "ITEMS: tuple = []\n"
