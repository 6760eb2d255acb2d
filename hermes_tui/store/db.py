"""Opening ``state.db`` safely, and turning SQLite failures into errors a person can act on.

The app never overwrites, truncates or deletes a database file it cannot read: it
says what is wrong with which path and what to do, and stops.
"""

from __future__ import annotations

import os
import sqlite3
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

import sqlite_utils

from hermes_tui.store.schema import SCHEMA_VERSION, migrate, user_version

BUSY_TIMEOUT_MS = 5_000


class StoreError(Exception):
    """A store problem, as one line naming the database and what to do."""


def open_database(path: Path) -> sqlite_utils.Database:
    """Open (creating with mode 0600 if missing) and migrate the database at ``path``."""
    path = Path(path)
    try:
        path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        if not path.exists():
            # Create the file ourselves so it is private from the first byte.
            os.close(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600))
    except FileExistsError:
        pass
    except OSError as exc:
        raise StoreError(
            f"{path}: cannot create the session database ({exc.strerror or exc}): "
            "check that the folder exists and is writable, or set HERMES_HOME to another folder"
        ) from None
    with translate_errors(path):
        conn = sqlite3.connect(path, isolation_level=None, check_same_thread=False, timeout=BUSY_TIMEOUT_MS / 1000)
        try:
            conn.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")
            check_readable(conn)  # before anything writes to the file
            conn.execute("PRAGMA journal_mode = WAL")
            conn.execute("PRAGMA synchronous = NORMAL")
            conn.execute("PRAGMA foreign_keys = ON")
            migrate(conn)
        except BaseException:
            conn.close()
            raise
    return sqlite_utils.Database(conn)


def check_readable(conn: sqlite3.Connection) -> None:
    """Refuse a damaged or too-new database before writing a byte to it.

    ``quick_check`` reads every page (it is fast: a few hundred ms for a large
    store), so a corrupt page is found now rather than after we have written.
    """
    version = user_version(conn)
    if version > SCHEMA_VERSION:
        raise sqlite3.DatabaseError(
            f"schema version {version} is newer than this hermes-tui understands ({SCHEMA_VERSION}): upgrade hermes-tui"
        )
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
        raise StoreError(_explain(path, exc)) from None
    except OSError as exc:
        raise StoreError(f"{path}: {exc.strerror or exc}") from None


def _explain(path: Path, exc: sqlite3.DatabaseError) -> str:
    text = str(exc)
    lowered = text.lower()
    if any(sign in lowered for sign in ("not a database", "malformed", "corrupt", "vtable constructor failed")):
        return (
            f"{path}: not a readable SQLite database ({text}). It was left untouched: "
            "move it aside (or restore a backup) and start again, or set HERMES_HOME to use another folder"
        )
    if "locked" in lowered or "busy" in lowered:
        return (
            f"{path}: the database is locked by another process (waited {BUSY_TIMEOUT_MS / 1000:g} s): "
            "close the other hermes-tui and try again"
        )
    if "full" in lowered:
        return f"{path}: the disk is full ({text}): free some space; nothing was lost, the last turn was not saved"
    if "readonly" in lowered or "read-only" in lowered or "unable to open" in lowered:
        return (
            f"{path}: cannot write the database ({text}): check that it and its folder are writable, "
            "or set HERMES_HOME to another folder"
        )
    if "newer than this hermes-tui" in lowered:
        return f"{path}: {text}"
    return f"{path}: database error ({text})"
