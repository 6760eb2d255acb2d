"""Sessions and messages on disk: append-only flush, one-transaction compaction, resume, search.

Rows written per pass are proportional to the exchange: the absorbed rows change
state, the superseded marker changes state, one marker row is inserted. Nothing a
user typed or a tool returned is ever deleted by compaction.

A session has one writer: a store writes a session's messages only while it holds
the session's lease (``acquire_lease``; ``create_session`` takes it for the creator),
and checks it inside each write transaction (see ``lease``).
"""

from __future__ import annotations

import json
import sqlite3
import time
import uuid
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import Any

from hermes_tui.compaction.state import SKIPPED_FLAG, PassResult
from hermes_tui.core.conversation import Replacement
from hermes_tui.core.transcript import Message
from hermes_tui.store import lease
from hermes_tui.store.db import StoreError, close_database, open_database, translate_errors
from hermes_tui.store.guard import GuardedConnection
from hermes_tui.store.lease import SessionBusy
from hermes_tui.util.faults import crash_point

ACTIVE, ARCHIVED = "active", "archived"
RETRY_LATER = "close it there (or wait for it to finish) and try again"
NOT_SAVED = "nothing more is saved to it here; open it again to go on"
# A chat is a conversation in the app; a replay is a transcript run through ``compact``.
SESSION_KINDS = ("chat", "replay")


@dataclass(frozen=True)
class SessionInfo:
    id: str
    title: str
    created: float
    updated: float
    model: str | None = None
    aux_model: str | None = None
    message_count: int = 0   # every message ever added (active and archived); markers, trimmed versions and
                             # our system prompts (the app's, rebuilt each turn) excluded
    active_count: int = 0    # what a resume loads, markers included
    kind: str = "chat"       # SESSION_KINDS


@dataclass(frozen=True)
class SearchHit:
    session_id: str
    title: str
    message_id: str
    role: str
    state: str
    snippet: str


class Store:
    def __init__(self, path: Path):
        self.path = Path(path)
        conn = open_database(self.path)
        self.conn = GuardedConnection(self.path, conn, lambda: close_database(self.path, conn))
        self._next_position: dict[str, int] = {}
        self._leases: dict[str, _Held] = {}
        self._closed = False

    def close(self) -> None:
        """Give up every lease this store holds, then close the connection (once).

        Waits for a statement or transaction in progress on another thread; any use after
        this raises ``StoreClosed``: what a worker had not stored yet is not stored (a resume
        answers a call left without a result as "interrupted").
        """
        with self.conn.lock:
            if self._closed:
                return
            self._closed = True
            try:
                for session_id in list(self._leases):
                    self._give_up(session_id)
            except StoreError:
                pass  # left behind, the lease is taken over once this process has exited
            finally:
                self._leases.clear()
                self.conn.close()

    def __enter__(self) -> Store:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # --- sessions ----------------------------------------------------------------------
    def create_session(
        self, title: str, *, model: str | None = None, aux_model: str | None = None,
        settings: dict[str, Any] | None = None, messages: Iterable[Message] = (),
        archived: Iterable[Message] = (), kind: str = "chat",
    ) -> SessionInfo:
        """A new session, its lease held by this store (release it with ``release_lease``).
        ``messages`` (an import) go in with it, in the same transaction, so a failed import
        leaves no session behind. ``archived`` is an import's own history (what another
        program compacted away): stored as archived rows ahead of the active ones, found by
        search and ``export --all``, never loaded by a resume."""
        now = time.time()
        session_id = uuid.uuid4().hex[:12]
        token = lease.new_token()
        new = [m for m in messages if not m.stored]
        history = [m for m in archived if not m.stored]
        with self._transaction():
            self.conn.execute(
                "INSERT INTO sessions (id, title, model, aux_model, created, updated, settings, kind)"
                " VALUES (?,?,?,?,?,?,?,?)",
                (session_id, title, model, aux_model, now, now, json.dumps(settings or {}), kind),
            )
            lease.write(self.conn, session_id, token)
            for position, msg in enumerate(history):
                self._insert(session_id, msg, position, ARCHIVED)
            self._next_position[session_id] = len(history)
            self._append(session_id, new)
        self._leases[session_id] = _Held(token)
        for msg in (*history, *new):
            msg.stored = True
        return SessionInfo(
            session_id, title, now, now, model, aux_model, sum(not m.is_marker for m in (*history, *new)), len(new), kind
        )

    def list_sessions(self, kind: str | None = None) -> list[SessionInfo]:
        """Newest first; only sessions of ``kind`` when given."""
        where, params = (" WHERE s.kind = ?", (kind,)) if kind else ("", ())
        with translate_errors(self.path):
            rows = self.conn.execute(
                _SESSION_SELECT + where + " GROUP BY s.id ORDER BY s.updated DESC", params
            ).fetchall()
        return [SessionInfo(*row) for row in rows]

    def get_session(self, id_or_prefix: str) -> SessionInfo:
        """A session by id or unique id prefix (like git)."""
        with translate_errors(self.path):
            rows = self.conn.execute(
                _SESSION_SELECT + " WHERE substr(s.id, 1, ?) = ? GROUP BY s.id", (len(id_or_prefix), id_or_prefix)
            ).fetchall()
        exact = [r for r in rows if r[0] == id_or_prefix]
        if exact:
            rows = exact
        if not rows or not id_or_prefix:
            raise StoreError(f"no session {id_or_prefix!r} in {self.path} (hermes-tui sessions list shows them)")
        if len(rows) > 1:
            raise StoreError(f"session id {id_or_prefix!r} is ambiguous: {', '.join(r[0] for r in rows[:5])}")
        return SessionInfo(*rows[0])

    def rename_session(self, session_id: str, title: str) -> None:
        with self._transaction():
            self.conn.execute("UPDATE sessions SET title = ?, updated = ? WHERE id = ?", (title, time.time(), session_id))

    def delete_session(self, session_id: str) -> None:
        """Delete a session and its messages: only ever on the user's explicit request.

        Refused (SessionBusy, nothing deleted) while another live hermes-tui holds it: its
        writer would lose what it has not stored yet and fail on its next message.
        """
        with self._transaction():
            holder = self._other_live_holder(session_id)
            if holder is not None:
                raise SessionBusy(session_id, holder, "close it there first; nothing was deleted")
            lease.delete(self.conn, session_id)
            self.conn.execute("DELETE FROM messages WHERE session_id = ?", (session_id,))
            self.conn.execute("DELETE FROM sessions WHERE id = ?", (session_id,))
        self._next_position.pop(session_id, None)
        self._leases.pop(session_id, None)

    # --- the one writer of a session ---------------------------------------------------------
    def acquire_lease(self, session_id: str) -> None:
        """Become the session's one writer, before loading it to write (again, if this store already is).

        Raises SessionBusy while another live hermes-tui holds it; a lease left by a
        process that is gone is taken over.
        """
        held = self._leases.get(session_id)
        if held is not None:
            held.openers += 1
            return
        token = lease.new_token()
        with self._transaction():
            if self.conn.execute("SELECT 1 FROM sessions WHERE id = ?", (session_id,)).fetchone() is None:
                raise StoreError(f"no session {session_id!r} in {self.path} (hermes-tui sessions list shows them)")
            holder = self._other_live_holder(session_id)
            if holder is not None:
                raise SessionBusy(session_id, holder, RETRY_LATER)
            lease.write(self.conn, session_id, token)
        self._leases[session_id] = _Held(token)
        self._next_position.pop(session_id, None)  # the last holder may have written since

    def release_lease(self, session_id: str) -> None:
        """One opener is done with the session; the last one gives up the lease."""
        held = self._leases.get(session_id)
        if held is None:
            return
        held.openers -= 1
        if held.openers == 0:
            self._give_up(session_id)

    def _give_up(self, session_id: str) -> None:
        held = self._leases.pop(session_id)
        with self._transaction():
            lease.delete(self.conn, session_id, held.token)

    def check_not_open_elsewhere(self, session_id: str) -> None:
        """Raise SessionBusy when another live hermes-tui holds the session (takes nothing)."""
        with translate_errors(self.path):
            holder = self._other_live_holder(session_id)
        if holder is not None:
            raise SessionBusy(session_id, holder, RETRY_LATER)

    def _other_live_holder(self, session_id: str) -> lease.Holder | None:
        current = lease.read(self.conn, session_id)
        if current is None:
            return None
        token, holder = current
        held = self._leases.get(session_id)
        if held is not None and held.token == token:
            return None
        return holder if lease.is_alive(holder) else None

    def _check_writer(self, session_id: str) -> None:
        """Inside a write transaction: this store still holds the session (so no one else writes it)."""
        held = self._leases.get(session_id)
        current = lease.read(self.conn, session_id)
        if held is not None and current is not None and current[0] == held.token:
            lease.refresh(self.conn, session_id, held.token, current[1].heartbeat)
            return
        if held is not None:  # it was ours: taken over since (or the session deleted)
            raise SessionBusy(session_id, current[1] if current is not None else None, NOT_SAVED)
        if current is not None and lease.is_alive(current[1]):
            raise SessionBusy(session_id, current[1], "nothing was saved")
        raise StoreError(f"{self.path}: session {session_id} is not open for writing here (acquire_lease first)")

    # --- writing -------------------------------------------------------------------------
    def flush(self, session_id: str, messages: Iterable[Message]) -> int:
        """Append the messages not stored yet, in one transaction; stamp them stored."""
        new = [m for m in messages if not m.stored]
        if not new:
            return 0
        with self._transaction():
            self._check_writer(session_id)
            self._append(session_id, new)
            crash_point("flush.before_commit")
            self._touch(session_id)
        for msg in new:
            msg.stored = True
        return len(new)

    def archive_and_compact(self, session_id: str, result: PassResult) -> None:
        """Publish a pass in one transaction: archive what it absorbed, insert its marker
        (a trim: archive each result it trimmed, insert the trimmed version in its place).

        Used as the compactor's ``persist`` hook: if this raises, the pass is not
        published and the in-memory transcript stays as it was.
        """
        splice = result.splice
        # A trim's plan (compaction.trim.TrimResult) carries its replacement; not imported here, so
        # that commands which only read the store do not load the compaction config.
        replacement = getattr(result, "replacement", None)
        with self._transaction():
            self._check_writer(session_id)
            if replacement is not None:
                self._replace(session_id, replacement)
            if splice is not None:
                marker = splice.marker
                if any(not m.stored for m in splice.archived):
                    # Storing them now would put them after earlier unflushed messages.
                    raise StoreError(f"{self.path}: the pass covers messages not stored yet: flush first")
                anchor = self._position_of(session_id, splice.removed[-1][1])
                for msg in splice.archived:
                    self._archive(session_id, msg, marker.id)
                crash_point("compact.after_archive")
                self._insert(session_id, marker, anchor, ACTIVE)
            for msg in result.skipped:
                self.conn.execute(
                    "UPDATE messages SET meta = json_set(meta, ?, json('true')) WHERE id = ? AND session_id = ?",
                    (f"$.{SKIPPED_FLAG}", msg.id, session_id),
                )
            crash_point("compact.before_commit")
            self._touch(session_id)
        crash_point("compact.after_commit")
        if splice is not None:
            for msg in (*splice.archived, splice.marker):
                msg.stored = True
        if replacement is not None:
            for msg in (*replacement.archived, *replacement.messages):
                msg.stored = True

    def set_system_prompt(self, session_id: str, prompt: Message, *, replacing: Message | None = None) -> None:
        """Store the session's system prompt in one transaction: ``replacing`` (the stored prompt it
        supersedes) archived and ``prompt`` inserted at its position, or, with nothing to replace,
        ``prompt`` inserted ahead of every row (a session that began without one, or an import that
        begins with its own system message, which then follows ours)."""
        if replacing is not None and not replacing.stored:
            raise StoreError(f"{self.path}: the system prompt to replace is not stored yet")
        with self._transaction():
            self._check_writer(session_id)
            if replacing is not None:
                position = self._position_of(session_id, replacing.id)
                self._archive(session_id, replacing, prompt.id)
                self._insert(session_id, prompt, position, ACTIVE)
            else:
                # Rows are read in (position, rowid) order: one below the lowest (archived
                # history included, as an import stores it first) comes before all of them.
                lowest = self.conn.execute(
                    "SELECT min(position) FROM messages WHERE session_id = ?", (session_id,)).fetchone()[0]
                if lowest is None:
                    self._append(session_id, [prompt])
                else:
                    self._insert(session_id, prompt, lowest - 1, ACTIVE)
            self._touch(session_id)
        prompt.stored = True

    def _replace(self, session_id: str, replacement: Replacement) -> None:
        """(in a transaction) Each replaced row archived, its replacement inserted at its position."""
        if any(not m.stored for m in replacement.archived):
            raise StoreError(f"{self.path}: the trim covers messages not stored yet: flush first")
        for old, new in zip(replacement.archived, replacement.messages, strict=True):
            position = self._position_of(session_id, old.id)
            self._archive(session_id, old, new.id)
            self._insert(session_id, new, position, ACTIVE)

    # --- reading -------------------------------------------------------------------------
    def load_active(self, session_id: str) -> list[Message]:
        """What a resume loads: active rows in order (the compaction state is in the newest marker)."""
        return [msg for msg, _ in self._rows(session_id, "AND state = 'active'")]

    def load_all(self, session_id: str) -> list[tuple[Message, str]]:
        """Every row with its state, in order: archived originals where they were, markers after."""
        return self._rows(session_id, "")

    def load_appended(self, session_id: str) -> list[Message]:
        """Every row a flush appended, archived or not, in order: all but the markers passes
        inserted (a pass's marker is the one row that archived others)."""
        return [msg for msg, _ in self._rows(
            session_id, "AND id NOT IN (SELECT archived_by FROM messages WHERE archived_by IS NOT NULL)")]

    def search(self, query: str, limit: int = 50) -> list[SearchHit]:
        words = query.replace("\x00", " ").split()
        if not words:
            return []
        # Every word quoted (no FTS syntax from user input); the last one as a prefix,
        # so search-as-you-type finds matches before a word is complete.
        terms = " ".join('"' + word.replace('"', '""') + '"' for word in words) + "*"
        with translate_errors(self.path):
            rows = self.conn.execute(
                """SELECT m.session_id, s.title, m.id, m.role, m.state,
                          snippet(messages_fts, -1, '[', ']', '...', 12)
                   FROM messages_fts
                   JOIN messages m ON m.rowid = messages_fts.rowid
                   JOIN sessions s ON s.id = m.session_id
                   WHERE messages_fts MATCH ? ORDER BY rank LIMIT ?""",
                (terms, limit),
            ).fetchall()
        return [SearchHit(*row) for row in rows]

    def count_rows(self) -> int:
        count: int = self.conn.execute("SELECT count(*) FROM messages").fetchone()[0]
        return count

    # --- internals -----------------------------------------------------------------------
    def _transaction(self) -> _Transaction:
        return _Transaction(self)

    def _position(self, session_id: str) -> int:
        if session_id not in self._next_position:
            row = self.conn.execute(
                "SELECT max(position) FROM messages WHERE session_id = ?", (session_id,)
            ).fetchone()
            self._next_position[session_id] = (row[0] + 1) if row[0] is not None else 0
        return self._next_position[session_id]

    def _position_of(self, session_id: str, message_id: str) -> int:
        row = self.conn.execute(
            "SELECT position FROM messages WHERE id = ? AND session_id = ?", (message_id, session_id)
        ).fetchone()
        if row is None:
            raise StoreError(f"{self.path}: message {message_id} is not in session {session_id}")
        position: int = row[0]
        return position

    def _append(self, session_id: str, messages: list[Message]) -> None:
        """Insert messages at the end of the session (inside the caller's transaction)."""
        position = self._position(session_id)
        for offset, msg in enumerate(messages):
            self._insert(session_id, msg, position + offset, ACTIVE)
        self._next_position[session_id] = position + len(messages)

    def _insert(self, session_id: str, msg: Message, position: int, state: str) -> None:
        self.conn.execute(
            """INSERT INTO messages (id, session_id, position, role, content, content_parts, tool_calls,
                   tool_call_id, name, token_count, token_counter, kind, state, meta, created, tool_names)
               VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)""",
            (
                msg.id, session_id, position, msg.role, *_content_columns(msg),
                json.dumps(msg.tool_calls) if msg.tool_calls else None,
                msg.tool_call_id, msg.name, msg.token_count, msg.token_counter,
                "marker" if msg.is_marker else "message", state, json.dumps(msg.meta), time.time(),
                " ".join(_tool_names(msg)),
            ),
        )

    def _archive(self, session_id: str, msg: Message, marker_id: str) -> None:
        cursor = self.conn.execute(
            "UPDATE messages SET state = 'archived', archived_by = ? WHERE id = ? AND session_id = ? AND state = 'active'",
            (marker_id, msg.id, session_id),
        )
        if cursor.rowcount != 1:
            raise StoreError(f"{self.path}: message {msg.id} is not an active row of session {session_id}")

    def _touch(self, session_id: str) -> None:
        self.conn.execute("UPDATE sessions SET updated = ? WHERE id = ?", (time.time(), session_id))

    def _rows(self, session_id: str, where: str) -> list[tuple[Message, str]]:
        with translate_errors(self.path):
            rows = self.conn.execute(
                f"""SELECT id, role, content, content_parts, tool_calls, tool_call_id, name, token_count,
                           token_counter, meta, state
                    FROM messages WHERE session_id = ? {where} ORDER BY position, rowid""",
                (session_id,),
            ).fetchall()
        out = []
        for mid, role, content, parts, tool_calls, tool_call_id, name, tokens, counter, meta, state in rows:
            msg = Message(
                role=role, tool_calls=json.loads(tool_calls) if tool_calls else None,
                tool_call_id=tool_call_id, name=name, meta={} if meta == "{}" else json.loads(meta), id=mid,
                token_count=tokens, token_counter=counter, stored=True, **_content_fields(content, parts),
            )
            out.append((msg, state))
        return out


@dataclass
class _Held:
    """A lease this store holds, and how many openers (app screens, commands) hold it here."""

    token: str
    openers: int = 1


class _Transaction:
    """BEGIN IMMEDIATE ... COMMIT; any exception rolls back, and SQLite errors become StoreErrors."""

    def __init__(self, store: Store):
        self.store = store

    def __enter__(self) -> None:
        # Held from BEGIN to COMMIT: the store closes between transactions, never inside one.
        self.store.conn.lock.acquire()
        try:
            with translate_errors(self.store.path):
                self.store.conn.execute("BEGIN IMMEDIATE")
        except BaseException:
            self.store.conn.lock.release()
            raise

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> bool:
        try:
            return self._end(exc_type, exc)
        finally:
            self.store.conn.lock.release()

    def _end(self, exc_type: type[BaseException] | None, exc: BaseException | None) -> bool:
        conn = self.store.conn
        if exc_type is None:
            try:
                with translate_errors(self.store.path):
                    conn.execute("COMMIT")
                return False
            except StoreError:
                self._rollback()
                raise
        self._rollback()
        if isinstance(exc, (sqlite3.DatabaseError, OSError)):
            with translate_errors(self.store.path):
                raise exc
        return False

    def _rollback(self) -> None:
        if self.store.conn.in_transaction:
            self.store.conn.execute("ROLLBACK")
        self.store._next_position.clear()  # positions handed out inside were not kept


_SESSION_SELECT = """
    SELECT s.id, s.title, s.created, s.updated, s.model, s.aux_model,
           count(CASE WHEN m.kind = 'message' AND json_extract(m.meta, '$.trimmed') IS NULL
                      AND json_extract(m.meta, '$.system_prompt') IS NULL THEN 1 END),
           count(CASE WHEN m.state = 'active' THEN 1 END), s.kind
    FROM sessions s LEFT JOIN messages m ON m.session_id = s.id
"""


def _content_columns(msg: Message) -> tuple[str, str | None]:
    """(content, content_parts) of a row: the text (a list's text view) and the list, verbatim, as JSON."""
    return msg.content, None if msg.parts is None else json.dumps(msg.parts)


def _content_fields(content: str, parts: str | None) -> dict[str, Any]:
    """The ``Message`` fields of a row's two content columns (``_content_columns`` read back)."""
    return {"content": content, "parts": None if parts is None else json.loads(parts)}


def _tool_names(msg: Message) -> list[str]:
    names = [str((call.get("function") or {}).get("name", "")) for call in msg.tool_calls or []]
    if msg.role == "tool" and msg.name:
        names.append(msg.name)
    return [n for n in names if n]
