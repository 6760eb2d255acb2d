"""The store's connection, shared by the UI and worker threads, and closed only once no one uses it.

The connection is opened with ``check_same_thread=False``: a reply, a pass or a tool
writes from its own thread. Closing it while another thread is inside a statement (a
worker finishing a reply as the app quits) is undefined behaviour in SQLite and can
crash the process. Every use goes through one reentrant lock: a statement runs and its
rows are read under it, a transaction holds it from BEGIN to COMMIT, and ``close`` takes
it, so it waits for the one in progress. After ``close`` every use raises a one-line
``StoreError`` and never touches the closed connection.
"""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from hermes_tui.store.db import StoreError


class StoreClosed(StoreError):
    """A write (or read) after the store was closed: nothing more is saved by this process."""

    kind = "closed"


class Rows:
    """A statement's outcome, its rows already read (under the lock)."""

    def __init__(self, cursor: sqlite3.Cursor):
        self.rows = cursor.fetchall()
        self.rowcount = cursor.rowcount
        self.lastrowid = cursor.lastrowid
        self._next = 0

    def fetchone(self) -> Any:
        if self._next >= len(self.rows):
            return None
        self._next += 1
        return self.rows[self._next - 1]

    def fetchall(self) -> list[Any]:
        rest, self._next = self.rows[self._next:], len(self.rows)
        return rest

    def __iter__(self) -> Iterator[Any]:
        return iter(self.fetchall())


class GuardedConnection:
    """The one door to a store's sqlite3 connection (see the module's docstring)."""

    def __init__(self, path: Path, conn: sqlite3.Connection, close: Callable[[], None]):
        self.path = path
        self.lock = threading.RLock()
        self._conn: sqlite3.Connection | None = conn
        self._close = close

    @property
    def closed(self) -> bool:
        return self._conn is None

    def _open(self) -> sqlite3.Connection:
        if self._conn is None:
            raise StoreClosed(f"{self.path}: the session store is closed (the app is quitting); nothing more is saved")
        return self._conn

    def execute(self, sql: str, params: Any = ()) -> Rows:
        with self.lock:
            return Rows(self._open().execute(sql, params))

    @property
    def total_changes(self) -> int:
        with self.lock:
            return self._open().total_changes

    @property
    def in_transaction(self) -> bool:
        with self.lock:
            return self._conn is not None and self._conn.in_transaction

    def close(self) -> None:
        """Close once the statement or transaction in progress on another thread is over."""
        with self.lock:
            if self._conn is None:
                return
            self._conn = None
            self._close()
