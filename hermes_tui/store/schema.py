"""The database schema as numbered migrations, keyed on ``PRAGMA user_version``.

All pending migrations run in one transaction together with the version bump, so
a database is always at exactly one version. Never edit a released migration:
add the next one.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable

MIGRATIONS: list[str] = [
    # 1: sessions and messages. A message row is never deleted by compaction: absorbed
    #    rows and superseded markers become state 'archived'. Rows are ordered by
    #    (position, rowid): a marker takes the position of the last message it replaced
    #    and sorts right after it.
    """
    CREATE TABLE sessions (
        id         TEXT PRIMARY KEY,
        title      TEXT NOT NULL DEFAULT '',
        model      TEXT,
        aux_model  TEXT,
        created    REAL NOT NULL,
        updated    REAL NOT NULL,
        settings   TEXT NOT NULL DEFAULT '{}'
    );
    CREATE TABLE messages (
        rowid        INTEGER PRIMARY KEY,
        id           TEXT NOT NULL UNIQUE,
        session_id   TEXT NOT NULL REFERENCES sessions(id) ON DELETE CASCADE,
        position     INTEGER NOT NULL,
        role         TEXT NOT NULL CHECK (role IN ('system', 'user', 'assistant', 'tool')),
        content      TEXT NOT NULL,
        tool_calls   TEXT,
        tool_call_id TEXT,
        name         TEXT,
        token_count  INTEGER,
        token_counter TEXT,
        kind         TEXT NOT NULL DEFAULT 'message' CHECK (kind IN ('message', 'marker')),
        state        TEXT NOT NULL DEFAULT 'active' CHECK (state IN ('active', 'archived')),
        archived_by  TEXT,
        meta         TEXT NOT NULL DEFAULT '{}',
        created      REAL NOT NULL
    );
    CREATE INDEX messages_by_session ON messages (session_id, state, position, rowid);
    """,
    # 2: full-text search over content and tool names (archived rows included: search
    #    finds what compaction condensed). External-content FTS5 kept in step by triggers.
    """
    ALTER TABLE messages ADD COLUMN tool_names TEXT NOT NULL DEFAULT '';
    UPDATE messages SET tool_names = COALESCE(
        (SELECT group_concat(json_extract(value, '$.function.name'), ' ') FROM json_each(messages.tool_calls)),
        COALESCE(name, '')
    );
    CREATE VIRTUAL TABLE messages_fts USING fts5(
        content, tool_names, content='messages', content_rowid='rowid', tokenize='porter unicode61'
    );
    INSERT INTO messages_fts (rowid, content, tool_names) SELECT rowid, content, tool_names FROM messages;
    CREATE TRIGGER messages_ai AFTER INSERT ON messages BEGIN
        INSERT INTO messages_fts (rowid, content, tool_names) VALUES (new.rowid, new.content, new.tool_names);
    END;
    CREATE TRIGGER messages_ad AFTER DELETE ON messages BEGIN
        INSERT INTO messages_fts (messages_fts, rowid, content, tool_names)
        VALUES ('delete', old.rowid, old.content, old.tool_names);
    END;
    CREATE TRIGGER messages_au AFTER UPDATE OF content, tool_names ON messages BEGIN
        INSERT INTO messages_fts (messages_fts, rowid, content, tool_names)
        VALUES ('delete', old.rowid, old.content, old.tool_names);
        INSERT INTO messages_fts (rowid, content, tool_names) VALUES (new.rowid, new.content, new.tool_names);
    END;
    """,
    # 3: benchmark runs (hermes_tui.analysis.bench), kept so models can be compared across days.
    #    One row per model run; the machine, the settings, the per-pass rows and the
    #    medians are JSON documents whose shape bench.py owns.
    """
    CREATE TABLE bench_runs (
        id          INTEGER PRIMARY KEY,
        model       TEXT NOT NULL,
        provider    TEXT NOT NULL,
        started     REAL NOT NULL,
        duration_s  REAL,
        load_s      REAL,
        cancelled   INTEGER NOT NULL DEFAULT 0,
        machine     TEXT NOT NULL DEFAULT '{}',
        settings    TEXT NOT NULL DEFAULT '{}',
        passes      TEXT NOT NULL DEFAULT '[]',
        medians     TEXT NOT NULL DEFAULT '{}'
    );
    CREATE INDEX bench_runs_by_model ON bench_runs (model, started);
    """,
    # 4: content that came as a list of parts (text, images, files), kept verbatim as JSON.
    #    ``content`` then holds its text view (placeholders for what is not text), so
    #    search and snippets never index a base64 payload. NULL: the content is a string.
    """
    ALTER TABLE messages ADD COLUMN content_parts TEXT;
    """,
    # 5: one writer per session (hermes_tui.store.lease): the process that holds it and a
    #    random token every write transaction of the session checks.
    """
    CREATE TABLE session_leases (
        session_id  TEXT PRIMARY KEY REFERENCES sessions(id) ON DELETE CASCADE,
        token       TEXT NOT NULL,
        pid         INTEGER NOT NULL,
        host        TEXT NOT NULL,
        boot_id     TEXT NOT NULL DEFAULT '',
        started     TEXT NOT NULL DEFAULT '',
        acquired    REAL NOT NULL,
        heartbeat   REAL NOT NULL
    );
    """,
    # 6: "always" answers to tool approval prompts, per workspace (hermes_tui.store.rules).
    #    Kept here, never in the workspace: a file there could be written by the model.
    #    ``prefix`` '' = every call of the tool.
    """
    CREATE TABLE approval_rules (
        workspace   TEXT NOT NULL,
        tool        TEXT NOT NULL,
        prefix      TEXT NOT NULL DEFAULT '',
        action      TEXT NOT NULL,
        created     REAL NOT NULL,
        PRIMARY KEY (workspace, tool, prefix, action)
    );
    """,
    # 7: what a session is: 'chat' (the app's conversations, what ``--resume`` reopens) or
    #    'replay' (a transcript run through ``hermes-tui compact``). Sessions stored before
    #    cannot be told apart and count as chats.
    """
    ALTER TABLE sessions ADD COLUMN kind TEXT NOT NULL DEFAULT 'chat' CHECK (kind IN ('chat', 'replay'));
    """,
    # 8: each compression model's measured speeds (hermes_tui.store.speeds), so defrag and batch
    #    are sized to it from a session's first pass rather than from the slow default
    #    (compaction.sizing). ``model`` is the summarizer's ``speed_key``; ``measured`` the
    #    time of the measurement (Unix seconds).
    """
    CREATE TABLE model_speeds (
        model           TEXT PRIMARY KEY,
        prompt_tps      REAL NOT NULL CHECK (prompt_tps > 0),
        generation_tps  REAL NOT NULL CHECK (generation_tps > 0),
        measured        REAL NOT NULL
    );
    """,
]

SCHEMA_VERSION = len(MIGRATIONS)


def user_version(conn: sqlite3.Connection) -> int:
    version: int = conn.execute("PRAGMA user_version").fetchone()[0]
    return version


def migrate(
    conn: sqlite3.Connection, target: int = SCHEMA_VERSION, *, before: Callable[[sqlite3.Connection], None] | None = None
) -> int:
    """Bring the database up to ``target`` in one transaction; returns the version it started at.

    The version is read inside ``BEGIN IMMEDIATE`` (the write lock is held), so processes
    opening a fresh database at the same moment migrate it once: the others wait for the
    lock and find the work done. ``before(conn)``, when given, runs first inside the same
    transaction; raising there leaves the database untouched. ``conn`` must be in
    autocommit mode (isolation_level None).
    """
    conn.execute("BEGIN IMMEDIATE")
    try:
        if before is not None:
            before(conn)
        start = user_version(conn)
        if start > SCHEMA_VERSION:
            raise sqlite3.DatabaseError(
                f"schema version {start} is newer than this hermes-tui understands ({SCHEMA_VERSION}): upgrade hermes-tui"
            )
        for version in range(start + 1, target + 1):
            for statement in _statements(MIGRATIONS[version - 1]):
                conn.execute(statement)
            conn.execute(f"PRAGMA user_version = {version}")
        conn.execute("COMMIT")
    except BaseException:
        if conn.in_transaction:  # SQLite may already have rolled back (a full disk, say)
            conn.execute("ROLLBACK")
        raise
    return start


def _statements(script: str) -> list[str]:
    """Split a migration into statements (triggers contain ';' inside BEGIN ... END)."""
    statements, buffer = [], ""
    for line in script.strip().splitlines():
        buffer += line + "\n"
        if sqlite3.complete_statement(buffer):
            statements.append(buffer.strip())
            buffer = ""
    if buffer.strip():
        statements.append(buffer.strip())
    return statements
