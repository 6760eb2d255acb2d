"""Reading Hermes Agent's ``state.db``, strictly read-only.

Hermes' home belongs to Hermes, which may be running while we read. We never write
a byte there, not even the read marks a WAL reader leaves in ``state.db-shm``:

- With no journal beside it, the database is opened ``mode=ro&immutable=1``: no
  locks, no ``-shm``, no ``-journal``, nothing created or touched.
- With a ``-wal`` (Hermes running, or crashed) or a hot ``-journal``, the database and
  that file are copied into a private temporary folder and the copy is opened: SQLite
  applies the WAL, or rolls back the journal, in our copy. The ``-shm`` is not copied
  (SQLite rebuilds it from the WAL).
Either way the files are stat-ed before and after; if Hermes wrote meanwhile, the
read is done again.

The schema read here (``hermes_state_common.py``, SCHEMA_SQL, schema version 30;
only the columns used, every one but the ids optional so older databases open):

    CREATE TABLE sessions (
        id TEXT PRIMARY KEY, source TEXT NOT NULL, model TEXT, model_config TEXT,
        parent_session_id TEXT, started_at REAL NOT NULL, ended_at REAL, end_reason TEXT,
        message_count INTEGER DEFAULT 0, title TEXT, archived INTEGER NOT NULL DEFAULT 0, ...);
    CREATE TABLE messages (
        id INTEGER PRIMARY KEY AUTOINCREMENT, session_id TEXT NOT NULL REFERENCES sessions(id),
        role TEXT NOT NULL, content TEXT, tool_call_id TEXT, tool_calls TEXT, tool_name TEXT,
        effect_disposition TEXT, timestamp REAL NOT NULL, token_count INTEGER, finish_reason TEXT,
        reasoning TEXT, reasoning_content TEXT, reasoning_details TEXT,
        codex_reasoning_items TEXT, codex_message_items TEXT, platform_message_id TEXT,
        observed INTEGER DEFAULT 0, _compressed_summary INTEGER NOT NULL DEFAULT 0,
        active INTEGER NOT NULL DEFAULT 1, compacted INTEGER NOT NULL DEFAULT 0,
        api_content TEXT, display_kind TEXT, display_metadata TEXT, display_identity BLOB,
        display_order INTEGER);

What the rows mean (``hermes_state_messages.py``): the model-fed transcript is the
session's ``active = 1`` rows in ``id`` order. In-place compaction
(``archive_and_compact``) sets the summarized rows to ``active = 0, compacted = 1``
(display history); rewind/undo sets ``active = 0, compacted = 0`` (the user took it
back: not history). Batch compaction may instead end the session with
``end_reason = 'compression'`` and continue in a child session
(``parent_session_id``) that starts with the summary. Structured content is stored
as JSON behind a ``\\x00json:`` (older) or ``\\x01json:`` prefix; ``tool_calls`` and
the reasoning/display sidecars are JSON text.
"""

from __future__ import annotations

import json
import os
import shutil
import sqlite3
import tempfile
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Literal, TypeVar
from urllib.parse import quote

from hermes_tui.core.transcript import TranscriptError
from hermes_tui.hermes_agent.sessions import HermesSession, convert_messages
from hermes_tui.util.errors import AppError

T = TypeVar("T")
FileStates = tuple[tuple[int, int] | None, ...]  # (size, mtime_ns) of each file; None: absent

CONTENT_JSON_PREFIXES = ("\x00json:", "\x01json:")
SIDECARS = ("-wal", "-journal")
READ_ATTEMPTS = 3
MAX_CHAIN = 256  # far past any real compression chain; guards against a loop in damaged data

MESSAGE_COLUMNS = (
    "id", "session_id", "role", "content", "tool_call_id", "tool_calls", "tool_name", "effect_disposition",
    "timestamp", "token_count", "finish_reason", "reasoning", "reasoning_content", "reasoning_details",
    "codex_reasoning_items", "codex_message_items", "platform_message_id", "observed", "_compressed_summary",
    "active", "compacted", "api_content", "display_kind", "display_metadata", "display_order",
)
JSON_COLUMNS = ("reasoning_details", "codex_reasoning_items", "codex_message_items")
SESSION_COLUMNS = (
    "id", "source", "model", "title", "parent_session_id", "started_at", "ended_at", "end_reason", "message_count",
)
# Children of a compressed session that are not its continuation (``hermes_state_common.py``).
NOT_CONTINUATION_MARKERS = ("_branched_from", "_delegate_from", "_reset_from")


class HermesImportError(AppError):
    """A Hermes database that cannot be read, as one line naming it and what is wrong."""


@dataclass(frozen=True)
class HermesSessionInfo:
    id: str
    title: str | None
    source: str | None
    model: str | None
    started_at: float | None
    ended_at: float | None
    end_reason: str | None
    parent_session_id: str | None
    message_count: int | None
    active_rows: int | None = None  # what a resume in Hermes sends (listings only): the session's size
    continues: str | None = None     # the compressed session this one carries on (listings only)


def list_sessions(db_path: Path) -> list[HermesSessionInfo]:
    """Every session row, newest first (compression continuations included: each names its parent)."""
    return _read(Path(db_path), _list_sessions)


def read_session(db_path: Path, session_id: str) -> HermesSession:
    """The conversation ``session_id`` belongs to, followed along its compression chain."""
    path = Path(db_path)
    return _read(path, lambda conn: _read_session(conn, path, session_id))


# --- reading without writing ---------------------------------------------------------


def _read(path: Path, work: Callable[[sqlite3.Connection], T]) -> T:
    if not path.is_file():
        raise HermesImportError(f"{path}: no Hermes database here (is HERMES_HOME right?)")
    for _ in range(READ_ATTEMPTS):
        before = _file_states(path)
        try:
            if any(_nonempty(_sidecar(path, suffix)) for suffix in SIDECARS):
                copy = _read_copy(path, work, before)
                if not copy[1]:
                    continue
                result = copy[0]
            else:
                result = _read_immutable(path, work)
        except sqlite3.DatabaseError as exc:
            raise HermesImportError(f"{path}: cannot read the Hermes database ({exc})") from None
        if _file_states(path) == before:
            return result
    raise HermesImportError(f"{path}: Hermes kept writing to its database while it was read; try again")


def _read_immutable(path: Path, work: Callable[[sqlite3.Connection], T]) -> T:
    uri = f"file:{quote(str(path.absolute()))}?mode=ro&immutable=1"
    conn = sqlite3.connect(uri, uri=True)
    try:
        return work(conn)
    finally:
        conn.close()


def _read_copy(
    path: Path, work: Callable[[sqlite3.Connection], T], before: FileStates
) -> tuple[T, Literal[True]] | tuple[None, Literal[False]]:
    """``work`` on a private copy of the database and its journal; (None, False) if it changed while copied."""
    with tempfile.TemporaryDirectory(prefix="hermes-tui-import-") as tmp:
        copy = Path(tmp) / "state.db"
        shutil.copyfile(path, copy)
        for suffix in SIDECARS:
            if _sidecar(path, suffix).exists():
                shutil.copyfile(_sidecar(path, suffix), Path(tmp) / f"state.db{suffix}")
        if _file_states(path) != before:
            return None, False
        conn = sqlite3.connect(copy)
        try:
            return work(conn), True
        finally:
            conn.close()


def _sidecar(path: Path, suffix: str) -> Path:
    return path.with_name(path.name + suffix)


def _nonempty(path: Path) -> bool:
    try:
        return path.stat().st_size > 0
    except FileNotFoundError:
        return False


def _file_states(path: Path) -> FileStates:
    """Size and modification time of the database and its journals (the -shm changes with every reader)."""
    states: list[tuple[int, int] | None] = []
    for file in (path, *(_sidecar(path, s) for s in SIDECARS)):
        try:
            st = os.stat(file)
            states.append((st.st_size, st.st_mtime_ns))
        except FileNotFoundError:
            states.append(None)
    return tuple(states)


# --- the queries ---------------------------------------------------------------------


def _columns(conn: sqlite3.Connection, table: str) -> set[str]:
    return {row[1] for row in conn.execute(f"PRAGMA table_info({table})")}


def _require_schema(conn: sqlite3.Connection) -> tuple[set[str], set[str]]:
    sessions, messages = _columns(conn, "sessions"), _columns(conn, "messages")
    missing = [f"sessions.{c}" for c in ("id",) if c not in sessions]
    missing += [f"messages.{c}" for c in ("id", "session_id", "role", "content") if c not in messages]
    if missing:
        raise HermesImportError(f"not a Hermes Agent state database: no {', '.join(missing)}")
    return sessions, messages


def _select(columns: tuple[str, ...], present: set[str]) -> str:
    return ", ".join(f'"{c}"' if c in present else f'NULL AS "{c}"' for c in columns)


def _list_sessions(conn: sqlite3.Connection) -> list[HermesSessionInfo]:
    present, message_columns = _require_schema(conn)
    order = "started_at DESC, id DESC" if "started_at" in present else "id DESC"
    live = " AND m.active = 1" if "active" in message_columns else ""
    size = f"(SELECT count(*) FROM messages m WHERE m.session_id = sessions.id{live})"
    rows = conn.execute(f"SELECT {_select(SESSION_COLUMNS, present)}, {size} FROM sessions ORDER BY {order}")
    sessions = [replace(_session_info(row[:-1]), active_rows=row[-1]) for row in rows.fetchall()]
    continued = {}
    for parent in sessions:
        if parent.end_reason == "compression":
            child = _continuation(conn, present, parent.id)
            if child is not None:
                continued[child.id] = parent.id
    return [replace(s, continues=continued.get(s.id)) for s in sessions]


def _session_info(row: tuple[Any, ...]) -> HermesSessionInfo:
    return HermesSessionInfo(**dict(zip(SESSION_COLUMNS, row)))


def _session(conn: sqlite3.Connection, present: set[str], session_id: str) -> HermesSessionInfo | None:
    row = conn.execute(
        f"SELECT {_select(SESSION_COLUMNS, present)} FROM sessions WHERE id = ?", (session_id,)
    ).fetchone()
    return _session_info(row) if row else None


def _chain(conn: sqlite3.Connection, present: set[str], start: HermesSessionInfo) -> list[HermesSessionInfo]:
    """Sessions root → tip of the compression chain ``start`` is part of."""
    root, seen = start, {start.id}
    while root.parent_session_id and len(seen) < MAX_CHAIN:
        parent = _session(conn, present, root.parent_session_id)
        if parent is None or parent.end_reason != "compression" or parent.id in seen:
            break
        continuation = _continuation(conn, present, parent.id)
        if continuation is None or continuation.id != root.id:
            break  # a branch (or delegate, reset) off a compressed session is a conversation of its own
        seen.add(parent.id)
        root = parent
    chain = [root]
    while chain[-1].end_reason == "compression" and len(chain) < MAX_CHAIN:
        child = _continuation(conn, present, chain[-1].id)
        if child is None or child.id in {s.id for s in chain}:
            break
        chain.append(child)
    return chain


def _continuation(conn: sqlite3.Connection, present: set[str], parent_id: str) -> HermesSessionInfo | None:
    """The child that continues a compressed session: the newest that is not a branch, delegate, reset or tool run."""
    if "parent_session_id" not in present:
        return None
    where = ["parent_session_id = ?"]
    if "model_config" in present:
        safe = "(CASE WHEN json_valid(model_config) THEN model_config ELSE '{}' END)"
        where += [f"json_extract({safe}, '$.{key}') IS NULL" for key in NOT_CONTINUATION_MARKERS]
    if "source" in present:
        where.append("COALESCE(source, '') != 'tool'")
    order = "started_at DESC, id DESC" if "started_at" in present else "id DESC"
    row = conn.execute(
        f"SELECT {_select(SESSION_COLUMNS, present)} FROM sessions WHERE {' AND '.join(where)} ORDER BY {order} LIMIT 1",
        (parent_id,),
    ).fetchone()
    return _session_info(row) if row else None


def _read_session(conn: sqlite3.Connection, path: Path, session_id: str) -> HermesSession:
    session_columns, message_columns = _require_schema(conn)
    start = _session(conn, session_columns, session_id)
    if start is None:
        raise HermesImportError(f"{path}: no Hermes session {session_id!r}")
    chain = _chain(conn, session_columns, start)
    tip = chain[-1]
    placeholders = ",".join("?" for _ in chain)
    rows = [
        _decoded(path, dict(zip(MESSAGE_COLUMNS, row)))
        for row in conn.execute(
            f"SELECT {_select(MESSAGE_COLUMNS, message_columns)} FROM messages "
            f"WHERE session_id IN ({placeholders}) ORDER BY id",
            [s.id for s in chain],
        )
    ]
    active = [r for r in rows if r["session_id"] == tip.id and _is_set(r["active"], default=True)]
    active_ids = {r["id"] for r in active}
    # Display history Hermes keeps: compacted rows, and every live row of the earlier sessions.
    # Rewound rows (active 0, compacted 0) were taken back and are left out.
    history = [
        r for r in rows
        if r["id"] not in active_ids and (_is_set(r["compacted"], default=False)
                                          or (r["session_id"] != tip.id and _is_set(r["active"], default=True)))
    ]
    source = f"{path}: session {tip.id}"
    try:
        messages, markers = convert_messages(active, source=source)
        archived, _ = convert_messages(_without_copies(history, active), source=source, check_pairing=False)
    except TranscriptError as exc:
        raise HermesImportError(str(exc)) from None
    title = next((s.title for s in reversed(chain) if s.title), None)
    return HermesSession(tip.id, title, messages, archived, chain=tuple(s.id for s in chain), markers=markers)


def _is_set(value: Any, *, default: bool) -> bool:
    return default if value is None else bool(value)


def _copy_key(row: dict[str, Any]) -> tuple[Any, ...]:
    # Compaction copies the protected head and tail into each generation verbatim (Hermes'
    # own display dedupe keys on these fields).
    return (row["role"], json.dumps(row["content"], sort_keys=True), row["timestamp"], row["tool_call_id"],
            json.dumps(row["tool_calls"], sort_keys=True), row["tool_name"])


def _without_copies(history: list[dict[str, Any]], active: list[dict[str, Any]]) -> list[dict[str, Any]]:
    seen = {_copy_key(r) for r in active}
    out = []
    for row in history:
        key = _copy_key(row)
        if key not in seen:
            seen.add(key)
            out.append(row)
    return out


def _decoded(path: Path, row: dict[str, Any]) -> dict[str, Any]:
    content = row["content"]
    if isinstance(content, str) and content.startswith(CONTENT_JSON_PREFIXES):
        try:
            row["content"] = json.loads(content[len(CONTENT_JSON_PREFIXES[0]):])
        except json.JSONDecodeError:
            raise HermesImportError(f"{path}: messages row {row['id']}: content is not valid JSON") from None
    if row["tool_calls"]:
        try:
            row["tool_calls"] = json.loads(row["tool_calls"])
        except (json.JSONDecodeError, TypeError):
            raise HermesImportError(f"{path}: messages row {row['id']}: tool_calls is not valid JSON") from None
    for column in JSON_COLUMNS:
        if isinstance(row[column], str):
            try:
                row[column] = json.loads(row[column])
            except json.JSONDecodeError:
                pass  # kept as the text Hermes stored
    row["display_metadata"] = _display_metadata(row["display_metadata"])
    if isinstance(row["display_order"], bytes):
        row["display_order"] = None
    return row


def _display_metadata(raw: Any) -> dict[str, Any] | None:
    """Hermes' display metadata object; rows from older builds are JSON-encoded twice."""
    value = raw
    for _ in range(2):
        if not isinstance(value, str):
            break
        try:
            value = json.loads(value)
        except json.JSONDecodeError:
            return None
    return value if isinstance(value, dict) else None
