"""Which files the model has read in this session, and how each was when it read it.

Why: a model that edits a file it has not read is guessing. Small local models were seen
(Qwen2.5-Coder-1.5B) calling ``edit_file`` with an ``old_string`` they made up and, worse,
``write_file`` over an existing module with a few guessed lines, destroying it, without
ever calling ``read_file``. So ``edit_file`` and ``write_file`` over an existing file run
only on a file read in this session (as Claude Code refuses an edit of a file it has not
read), and only while it is as it was then: a file changed since (by the user, a formatter,
a command) is read again, or the edit would be planned against text the model never saw.

What is kept, per resolved path: the file's ``(st_mtime_ns, st_size)`` when the model last
read it through ``read_file`` or last wrote it through our tools (a write is a read of what
was written: the model knows that text, so the next edit needs no read). Not the content:
the stat pair is what tells that the file changed, and costs nothing to keep.

A read counts from the next reply on. The agent answers a reply's calls inside
``ReadRecord.reply()``: a read made there is held back until the reply's calls are all
answered, so a ``write_file`` in the same reply as the ``read_file`` of its file is refused,
as the model wrote it before it saw the file. What our tools write counts at once.

One record per conversation (``session.agent.Tools`` holds it), so it lasts across the turns
and steps of the whole session. Tools run in worker threads, so a lock guards the table.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from enum import Enum
from pathlib import Path

Stamp = tuple[int, int]  # (st_mtime_ns, st_size)


class Seen(str, Enum):
    """How a file stands against the record."""

    UNREAD = "unread"  # never read (nor written by us) in this session
    CHANGED = "changed"  # read, but its mtime or size differ now
    CURRENT = "current"  # read, and as it was then


def stamp(path: Path) -> Stamp:
    st = os.stat(path)
    return st.st_mtime_ns, st.st_size


class ReadRecord:
    """The files read (or written by our tools) in one session, with their stamp then."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._stamps: dict[Path, Stamp] = {}
        # Reads made while a reply's calls are answered (None: no reply open): they count
        # when it closes.
        self._this_reply: dict[Path, Stamp] | None = None

    @contextmanager
    def reply(self) -> Iterator[None]:
        """Answer one reply's calls: the reads made inside count once all are answered."""
        with self._lock:
            self._this_reply = {}
        try:
            yield
        finally:
            with self._lock:
                held, self._this_reply = self._this_reply or {}, None
                self._stamps.update(held)

    def record(self, path: Path, then: Stamp | None = None, *, written: bool = False) -> None:
        """``path`` (resolved) was read, or ``written`` by our tools: remember its stamp
        ``then``, or as it is now. A reader passes the stamp taken before it read, so a change
        made while it read counts as a change. A file that vanished in between is forgotten,
        not recorded."""
        if then is None:
            try:
                then = stamp(path)
            except OSError:
                with self._lock:
                    self._stamps.pop(path, None)
                    if self._this_reply is not None:
                        self._this_reply.pop(path, None)
                return
        with self._lock:
            if written or self._this_reply is None:
                self._stamps[path] = then
                if self._this_reply is not None:
                    self._this_reply.pop(path, None)  # an older read must not undo the write
            else:
                self._this_reply[path] = then

    def __bool__(self) -> bool:
        """Whether any file was read (or written) in the session: an edit can succeed only then."""
        with self._lock:
            return bool(self._stamps or self._this_reply)

    def check(self, path: Path) -> Seen:
        """How ``path`` (resolved) stands: unread, changed since it was read, or current."""
        with self._lock:
            then = self._stamps.get(path)
        if then is None:
            return Seen.UNREAD
        try:
            now = stamp(path)
        except OSError:
            return Seen.CHANGED
        return Seen.CURRENT if now == then else Seen.CHANGED
