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

One record per conversation (``session.agent.Tools`` holds it), so it lasts across the turns
and steps of the whole session. Tools run in worker threads, so a lock guards the table.
"""

from __future__ import annotations

import os
import threading
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

    def record(self, path: Path, then: Stamp | None = None) -> None:
        """``path`` (resolved) was read or written: remember its stamp ``then``, or as it is
        now. A reader passes the stamp taken before it read, so a change made while it read
        counts as a change. A file that vanished in between is forgotten, not recorded."""
        if then is None:
            try:
                then = stamp(path)
            except OSError:
                with self._lock:
                    self._stamps.pop(path, None)
                return
        with self._lock:
            self._stamps[path] = then

    def __bool__(self) -> bool:
        """Whether any file was read (or written) in the session: an edit can succeed only then."""
        with self._lock:
            return bool(self._stamps)

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
