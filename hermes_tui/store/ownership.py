"""Is a database file hermes-tui's? Decided by reading alone, before anything writes to it.

Our databases carry ``PRAGMA application_id = APPLICATION_ID``. Those made before the
mark existed are recognised by their schema: a ``user_version`` we released, with exactly
the tables (and their columns) our migrations up to that version create. A file with
no schema at all is ours to initialise. Anything else belongs to another program
(Hermes Agent keeps a ``state.db`` of its own, with ``sessions`` and ``messages`` tables
that are not ours) and is never written to.
"""

from __future__ import annotations

import re
import sqlite3
from dataclasses import dataclass
from typing import Final, Literal

from hermes_tui.store import schema

APPLICATION_ID = 0x48545549  # "HTUI"

Kind = Literal["empty", "ours", "foreign"]
EMPTY: Final = "empty"
OURS: Final = "ours"
FOREIGN: Final = "foreign"

_MODULE = re.compile(r"\bUSING\s+(\w+)", re.IGNORECASE)


@dataclass(frozen=True)
class Ownership:
    kind: Kind
    version: int          # PRAGMA user_version
    stamped: bool         # carries our application_id
    reason: str = ""      # for FOREIGN: what gives it away, as a phrase

    @property
    def current(self) -> bool:
        """Ours, marked, and at the schema this hermes-tui writes: nothing to do on open."""
        return self.kind == OURS and self.stamped and self.version == schema.SCHEMA_VERSION


def inspect(conn: sqlite3.Connection) -> Ownership:
    """Whose database ``conn`` is; only reads (works on a read-only or immutable connection).

    All in one read transaction: statement by statement, another process's commit could
    land in between and show the mark of the empty file beside the tables of the full one.
    """
    if conn.in_transaction:
        return _inspect(conn)
    conn.execute("BEGIN")
    try:
        return _inspect(conn)
    finally:
        conn.execute("COMMIT")


def _inspect(conn: sqlite3.Connection) -> Ownership:
    app_id = conn.execute("PRAGMA application_id").fetchone()[0]
    version = schema.user_version(conn)
    if app_id == APPLICATION_ID:
        return Ownership(OURS, version, stamped=True)
    if app_id != 0:
        return Ownership(FOREIGN, version, False, f"its application_id {app_id:#x} is another program's")
    found = tables(conn)
    if version == 0 and not found and not conn.execute("SELECT count(*) FROM sqlite_master").fetchone()[0]:
        return Ownership(EMPTY, 0, stamped=False)
    if 1 <= version <= schema.SCHEMA_VERSION and found == reference_tables(version):
        return Ownership(OURS, version, stamped=False)
    names = ", ".join(sorted(found)) or "none"
    return Ownership(FOREIGN, version, False, f"user_version {version} and tables {names} are not hermes-tui's")


def tables(conn: sqlite3.Connection) -> dict[str, tuple[str, ...]]:
    """Each table's name and columns (a virtual table: its module), SQLite's own excluded."""
    rows = conn.execute(
        "SELECT name, sql FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite\\_%' ESCAPE '\\'"
    ).fetchall()
    found: dict[str, tuple[str, ...]] = {}
    for name, sql in rows:
        if (sql or "").lstrip().upper().startswith("CREATE VIRTUAL"):
            # Reading a virtual table's columns needs its module, which another program's may lack.
            module = _MODULE.search(sql)
            found[name] = ("virtual", module.group(1).lower() if module else "")
        else:
            found[name] = tuple(r[0] for r in conn.execute("SELECT name FROM pragma_table_info(?)", (name,)))
    return found


def reference_tables(version: int) -> dict[str, tuple[str, ...]]:
    """The tables our migrations 1..``version`` create, built in memory."""
    conn = sqlite3.connect(":memory:", isolation_level=None)
    try:
        schema.migrate(conn, target=version)
        return tables(conn)
    finally:
        conn.close()
