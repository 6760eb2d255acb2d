"""Opening ``state.db`` safely, and turning SQLite failures into errors a person can act on.

The app never overwrites, truncates or deletes a database file it cannot read: it
says what is wrong with which path and what to do, and stops. Nor does it write a
byte to a database that is not its own (``ownership``): whose it is, is decided on a
read-only connection first, and again under the write lock before the first write.
"""

from __future__ import annotations

import sqlite3
import threading
import time
import urllib.parse
from collections.abc import Iterator
from contextlib import closing, contextmanager
from pathlib import Path

from hermes_tui.store.ownership import APPLICATION_ID, Ownership, inspect
from hermes_tui.store.ownership import FOREIGN as FOREIGN  # re-exported: a StoreError kind too
from hermes_tui.store.schema import SCHEMA_VERSION, migrate, user_version
from hermes_tui.util import paths
from hermes_tui.util.errors import AppError

BUSY_TIMEOUT_MS = 5_000
_SQLITE_MAGIC = b"SQLite format 3\x00"

# Database files this process has open, with how many connections. SQLite's locks are
# POSIX advisory locks, which a process loses on every descriptor of a file as soon as
# any one of them is closed: reading the header of a file this process already holds
# would drop its connections' locks, and another process would then checkpoint and
# delete the write-ahead log under them. A file open here was checked when it opened.
_open_here: dict[Path, int] = {}
_open_here_lock = threading.Lock()


# StoreError kinds: what the user can do differs for each. Also ownership.FOREIGN: another
# program's database, or a folder inside Hermes Agent's home.
LOCKED = "locked"  # another process holds the database
CANNOT_CREATE = "cannot_create"
UNREADABLE = "unreadable"  # damaged or not SQLite
NOT_WRITABLE = "not_writable"
DISK_FULL = "disk_full"
TOO_NEW = "too_new"


class StoreError(AppError):
    """A store problem, as one line naming the database and what to do; ``kind`` is one of
    the constants above, or ``"store"`` for the rest (a missing session, a misuse)."""

    kind = "store"


def open_database(path: Path) -> sqlite3.Connection:
    """Open (creating with mode 0600 if missing) and migrate the database at ``path``.

    Refuses, before writing anything to it, a database that is damaged, too new or
    another program's.
    """
    path = Path(path)
    _create_private(path)
    key = path.resolve()
    with translate_errors(path):
        with _open_here_lock:
            checked_here = _open_here.get(key, 0) > 0
        if not checked_here:
            check_ownership_read_only(path)
        conn = sqlite3.connect(path, isolation_level=None, check_same_thread=False, timeout=BUSY_TIMEOUT_MS / 1000)
        try:
            conn.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")
            conn.execute("PRAGMA query_only = ON")  # a guard: nothing writes until the checks pass
            check_readable(conn)
            found = inspect(conn)  # now with what a write-ahead log holds too
            _refuse_foreign(path, found)
            _make_private(path)
            conn.execute("PRAGMA query_only = OFF")
            conn.execute("PRAGMA foreign_keys = ON")
            if not found.current:
                migrate(conn, before=lambda locked: _claim(path, locked))
            _use_wal(conn)
            conn.execute("PRAGMA synchronous = NORMAL")
        except BaseException:
            conn.close()
            raise
    with _open_here_lock:
        _open_here[key] = _open_here.get(key, 0) + 1
    return conn


def close_database(path: Path, conn: sqlite3.Connection) -> None:
    """Close a connection ``open_database`` made for ``path``."""
    key = Path(path).resolve()
    try:
        conn.close()
    finally:
        with _open_here_lock:
            left = _open_here.get(key, 0) - 1
            if left > 0:
                _open_here[key] = left
            else:
                _open_here.pop(key, None)


def _make_private(path: Path) -> None:
    """Ours (checked): a database an older version left readable by others is made private,
    with its journal files (its full-text index holds tool output). New journal files take
    the database's permissions from SQLite."""
    for file in (path, path.with_name(path.name + "-wal"), path.with_name(path.name + "-shm")):
        if file.exists():
            paths.make_private(file)


def _create_private(path: Path) -> None:
    try:
        paths.ensure_dir(path.parent)  # refuses a folder inside Hermes Agent's home
        paths.create_private(path)  # created by us so it is private from the first byte
    except paths.HermesAgentHomeError as exc:
        raise StoreError(f"{path}: {exc.strerror}", kind=FOREIGN) from None
    except OSError as exc:
        raise StoreError(
            f"{path}: cannot create the session database ({exc.strerror or exc}): "
            f"check that the folder exists and is writable, or set {paths.HOME_ENV} to another folder",
            kind=CANNOT_CREATE,
        ) from None


def check_ownership_read_only(path: Path) -> None:
    """Refuse another program's (or a too new) database without changing a byte on disk.

    A rollback-journal file is read under SQLite's locks with ``mode=ro``, which creates
    nothing. A WAL file is read as ``immutable``: a read-only connection would create its
    ``-wal`` and ``-shm`` files, or write its read marks into a ``-shm`` another program
    has open. That view is the last checkpoint, which shows our tables (or our mark) in
    a database of ours at any moment: a checkpoint copies page 1, where the mark and the
    version live, first. The write connection checks again, with the log's content and
    under the write lock, before anything is written.
    """
    try:
        with open(path, "rb") as handle:
            header = handle.read(100)
    except FileNotFoundError:
        return
    if not header:
        return  # an empty file: ours to initialise
    wal_mode = header.startswith(_SQLITE_MAGIC) and header[18:20] == b"\x02\x02"
    if wal_mode:
        try:
            found = _inspect_at(path, immutable=True)
        except sqlite3.DatabaseError:
            found = None  # damaged: the checks on the write connection say how
    else:
        found = _inspect_at(path, immutable=False)
    if found is not None:
        _refuse_foreign(path, found)
        _refuse_newer(found.version)


def _inspect_at(path: Path, *, immutable: bool) -> Ownership:
    uri = f"file:{urllib.parse.quote(str(path.absolute()))}?mode=ro" + ("&immutable=1" if immutable else "")
    with closing(sqlite3.connect(uri, uri=True, isolation_level=None, timeout=BUSY_TIMEOUT_MS / 1000)) as conn:
        conn.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")
        return inspect(conn)


def _claim(path: Path, conn: sqlite3.Connection) -> None:
    """Inside the first write transaction: whose it is, once more; then mark it ours."""
    found = inspect(conn)
    _refuse_foreign(path, found)
    if not found.stamped:
        conn.execute(f"PRAGMA application_id = {APPLICATION_ID}")


def _refuse_foreign(path: Path, found: Ownership) -> None:
    if found.kind == FOREIGN:
        raise StoreError(
            f"{path}: not a hermes-tui database ({found.reason}); it was left untouched: "
            f"if another program uses it, set {paths.HOME_ENV} to another folder for hermes-tui",
            kind=FOREIGN,
        )


def _refuse_newer(version: int) -> None:
    if version > SCHEMA_VERSION:
        raise sqlite3.DatabaseError(
            f"schema version {version} is newer than this hermes-tui understands ({SCHEMA_VERSION}): upgrade hermes-tui"
        )


def _use_wal(conn: sqlite3.Connection) -> None:
    """Switch to WAL, once the database is known to be ours.

    Not inside a transaction (SQLite refuses), and the switch needs every other
    connection to let go for a moment: a process opening the same fresh database can
    hold a read lock right then, so a busy answer is retried until the busy timeout.
    """
    if conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal":
        return
    deadline = time.monotonic() + BUSY_TIMEOUT_MS / 1000
    while True:
        try:
            if conn.execute("PRAGMA journal_mode = WAL").fetchone()[0] == "wal":
                return
        except sqlite3.OperationalError as exc:
            if "locked" not in str(exc) and "busy" not in str(exc):
                raise
            if time.monotonic() >= deadline:
                raise
        else:
            if time.monotonic() >= deadline:
                return  # a filesystem without WAL support: rollback journaling still works
        time.sleep(0.01)


def check_readable(conn: sqlite3.Connection) -> None:
    """Refuse a damaged or too-new database before writing a byte to it.

    ``quick_check`` reads every page (it is fast: a few hundred ms for a large
    store), so a corrupt page is found now rather than after we have written.
    """
    _refuse_newer(user_version(conn))
    result = conn.execute("PRAGMA quick_check(1)").fetchone()[0]
    if result != "ok":
        detail = " ".join(result.replace("*** in database main ***", "").split())
        raise sqlite3.DatabaseError(f"database disk image is malformed ({detail})")


@contextmanager
def translate_errors(path: Path) -> Iterator[None]:
    """Re-raise SQLite and OS errors as one-line ``StoreError``s that say what to do."""
    try:
        yield
    except StoreError:
        raise
    except sqlite3.DatabaseError as exc:
        kind, message = _explain(path, exc)
        raise StoreError(message, kind=kind) from None
    except OSError as exc:
        raise StoreError(f"{path}: {exc.strerror or exc}") from None


def _explain(path: Path, exc: sqlite3.DatabaseError) -> tuple[str, str]:
    text = str(exc)
    lowered = text.lower()
    if any(sign in lowered for sign in ("not a database", "malformed", "corrupt", "vtable constructor failed")):
        return UNREADABLE, (
            f"{path}: not a readable SQLite database ({text}). It was left untouched: "
            f"move it aside (or restore a backup) and start again, or set {paths.HOME_ENV} to use another folder"
        )
    if "locked" in lowered or "busy" in lowered:
        return LOCKED, (
            f"{path}: the database is locked by another process (waited {BUSY_TIMEOUT_MS / 1000:g} s): "
            "close the other hermes-tui and try again"
        )
    if "full" in lowered:
        return DISK_FULL, f"{path}: the disk is full ({text}): free some space; nothing was lost, the last turn was not saved"
    if "readonly" in lowered or "read-only" in lowered or "unable to open" in lowered:
        return NOT_WRITABLE, (
            f"{path}: cannot write the database ({text}): check that it and its folder are writable, "
            f"or set {paths.HOME_ENV} to another folder"
        )
    if "newer than this hermes-tui" in lowered:
        return TOO_NEW, f"{path}: {text}"
    return StoreError.kind, f"{path}: database error ({text})"
