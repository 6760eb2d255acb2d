"""Hermes Agent's messages as our transcript: summary rows become markers.

Hermes keeps a message as an OpenAI message dict with extra top-level keys: its
summary flag (``_compressed_summary``), reasoning sidecars, display columns, row
bookkeeping. The same dict shape comes out of its ``state.db`` (read by
``hermes_agent/state_db.py``), its JSON snapshots (``sessions/session_<id>.json``: an
object whose ``messages`` is the list) and ``hermes sessions export`` (JSON Lines,
one session object with its ``messages`` per line).

What changes on the way in:
- A Hermes summary becomes our marker, its summary recovered from the text and
  checked by ``read_marker`` like any imported marker. An assistant-role summary is
  a micro marker (Hermes' micro-compaction only writes those); a user-role one is a
  batch summary, turned into an assistant-role marker: it is the model's account of
  earlier work, not something the user typed. Text a user did type that Hermes
  merged into the same message stays a user message, verbatim.
- A summary that does not pass the checks stays an ordinary assistant message with
  its text, so a later pass absorbs it through the summarizer like any exchange.
- Everything else of Hermes' (reasoning, display columns, row ids, timestamps) is
  kept under ``meta["hermes"]``: never sent, but not lost.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from hermes_tui.compaction import hermes_markers
from hermes_tui.compaction.markers import read_marker
from hermes_tui.core.transcript import (
    BATCH,
    MICRO,
    ROLES,
    Message,
    TranscriptError,
    check_tool_pairing,
    make_marker,
    parse_transcript,
    read_text,
)
from hermes_tui.util.untrusted import InputError, load_json

META_KEY = "hermes"

# Columns and keys of a Hermes message worth keeping as metadata (``hermes_state_common.py``
# SCHEMA_SQL, ``messages`` table; the conversation loader exposes the same names).
KEPT_KEYS = (
    "id", "session_id", "timestamp", "token_count", "finish_reason",
    "reasoning", "reasoning_content", "reasoning_details",
    "codex_reasoning_items", "codex_message_items",
    "display_kind", "display_metadata", "display_order",
    "platform_message_id", "message_id", "observed", "effect_disposition", "tool_name", "api_content",
)


@dataclass
class HermesSession:
    """One imported Hermes session: the transcript to resume, and its history."""

    session_id: str
    title: str | None
    messages: list[Message]
    # Rows Hermes keeps for display but no longer sends (compacted away, or in an
    # earlier session of a compression chain): ours to archive. Rewound rows are not here.
    archived: list[Message] = field(default_factory=list)
    chain: tuple[str, ...] = ()      # session ids root → tip, when a compression chain was followed
    markers: int = 0                 # Hermes summaries taken as our markers


def convert_messages(
    rows: Iterable[dict[str, Any]], *, source: str, check_pairing: bool = True,
) -> tuple[list[Message], int]:
    """Our messages for Hermes message dicts in order, and how many became markers.

    Roles other than the four chat roles are Hermes bookkeeping and are left out.
    History (``check_pairing=False``) may hold a call whose results were compacted
    in another generation, so only a transcript to resume is checked for pairing.
    """
    out: list[Message] = []
    markers = 0
    for n, row in enumerate(rows):
        if not isinstance(row, dict):
            raise TranscriptError(f"{source}: message {n}: expected an object, got {type(row).__name__}")
        where = f"{source}: message {row.get('id', n)}"
        if row.get("role") not in ROLES:
            continue
        converted = _summary_messages(row, where)
        if converted is None:
            converted = [_plain_message(row, where)]
        else:
            markers += 1
        out.extend(converted)
    if check_pairing:
        check_tool_pairing(out, source=source)
    return out, markers


@dataclass(frozen=True)
class SessionChoice:
    """One session of a file that holds several, as a listing shows it."""

    id: str
    title: str | None
    messages: int  # live rows


class SeveralSessions(TranscriptError):
    """A file with several sessions and none chosen, or a title prefix that fits more than one."""

    def __init__(self, problem: str, choices: list[SessionChoice], *, hint: str = "name one"):
        super().__init__(f"{problem}; {hint}")
        self.problem, self.choices = problem, choices


def parse_session_file(text: str, *, source: str, session: str | None = None) -> HermesSession:
    """A Hermes JSON snapshot or ``hermes sessions export`` file, as one session.

    An export with several sessions needs ``session`` to say which: its id, or the start of
    its title (any case).
    """
    data = _chosen(_session_objects(text, source), session, source)
    raw = data.get("messages")
    if not isinstance(raw, list):
        raise TranscriptError(f"{source}: \"messages\" must be a list of messages")
    # An export row keeps its flags: rewound rows (active 0, not compacted) are not history.
    live = [m for m in raw if not isinstance(m, dict) or _flag(m, "active", True)]
    kept = [m for m in raw if isinstance(m, dict) and not _flag(m, "active", True) and _flag(m, "compacted", False)]
    messages, markers = convert_messages(live, source=source)
    archived, _ = convert_messages(kept, source=source, check_pairing=False)
    return HermesSession(_session_id(data), _title(data), messages, archived, markers=markers)


def _chosen(sessions: list[dict[str, Any]], session: str | None, source: str) -> dict[str, Any]:
    if session is None:
        if len(sessions) == 1:
            return sessions[0]
        raise SeveralSessions(f"{source}: {len(sessions)} sessions in this file ({_ids(sessions)})", _choices(sessions))
    exact = [s for s in sessions if _session_id(s) == session]
    if exact:
        return exact[0]
    prefix = session.casefold()
    titled = [s for s in sessions if (_title(s) or "").casefold().startswith(prefix)]
    if len(titled) == 1:
        return titled[0]
    if titled:
        raise SeveralSessions(
            f"{source}: {len(titled)} sessions have a title starting {session!r} ({_ids(titled)})",
            _choices(titled), hint="name one by its id")
    raise TranscriptError(f"{source}: no session {session!r} in this file (its sessions: {_ids(sessions)})")


def _session_id(data: dict[str, Any]) -> str:
    return str(data.get("id", data.get("session_id", "")) or "")


def _title(data: dict[str, Any]) -> str | None:
    return data.get("title") if isinstance(data.get("title"), str) else None


def _ids(sessions: list[dict[str, Any]]) -> str:
    return ", ".join(_session_id(s) or "?" for s in sessions)


def _choices(sessions: list[dict[str, Any]]) -> list[SessionChoice]:
    def live(data: dict[str, Any]) -> int:
        raw = data.get("messages")
        return sum(1 for m in raw if isinstance(m, dict) and _flag(m, "active", True)) if isinstance(raw, list) else 0

    return [SessionChoice(_session_id(s) or "?", _title(s), live(s)) for s in sessions]


def read_transcript_file(path: Path | str, *, session: str | None = None) -> HermesSession:
    """Any conversation file we open: an OpenAI message list (a JSON array, or JSON Lines of
    messages), a Hermes JSON snapshot, or a ``hermes sessions export`` file (``session``: which
    of its sessions, see ``parse_session_file``).

    A plain message list comes back as a session with no id, title or history.
    """
    text = read_text(path)
    if is_session_text(text):
        return parse_session_file(text, source=str(path), session=session)
    if session is not None:
        raise TranscriptError(f"{path}: a plain message list holds one conversation: no session {session!r} to pick")
    return _message_list(text, str(path))


def _message_list(text: str, source: str) -> HermesSession:
    """A plain message list; a message Hermes flagged as its summary (``_compressed_summary``)
    becomes our marker as in its session files, whatever its role. Unflagged text stays as it
    is: a user's paste of a summary is the user's message."""
    messages = parse_transcript(text, source=source)
    if hermes_markers.SUMMARY_FLAG not in text:
        return HermesSession("", None, messages)
    stripped = text.lstrip()
    rows = load_json(text) if stripped.startswith("[") else [load_json(line) for line in text.splitlines() if line.strip()]
    out: list[Message] = []
    markers = 0
    for n, (msg, row) in enumerate(zip(messages, rows, strict=True)):
        converted = None
        if isinstance(row, dict) and _flag(row, hermes_markers.SUMMARY_FLAG, False) and not msg.is_marker:
            converted = _summary_messages(row, f"{source}: message {n}")
        if converted is None:
            out.append(msg)
        else:
            out.extend(converted)
            markers += 1
    check_tool_pairing(out, source=source)
    return HermesSession("", None, out, markers=markers)


def is_session_text(text: str) -> bool:
    """Is this a Hermes session file (an object, or JSON Lines of objects with ``messages``)?

    A message list is an array, or JSON Lines whose objects are messages (they have a role).
    """
    stripped = text.strip()
    if not stripped.startswith("{"):
        return False
    try:
        whole = load_json(stripped)
    except InputError:
        whole = None
    if isinstance(whole, dict):
        return "role" not in whole  # a one-message JSON Lines file is a message list
    try:
        first = load_json(stripped.splitlines()[0])
    except InputError:
        return False  # left to the transcript parser, which names the line
    return isinstance(first, dict) and "messages" in first and "role" not in first


def to_hermes_snapshot(
    messages: Iterable[Message], *, session_id: str, title: str | None = None, model: str | None = None,
) -> dict[str, Any]:
    """A session as a Hermes JSON snapshot (``sessions/session_<id>.json``).

    Our markers go out as Hermes writes its own summaries: the preamble, the summary and
    the end line, flagged ``_compressed_summary`` (and ``_micro_compact_marker`` saying
    which kind), so Hermes treats them as summaries and we read them back as markers.
    Messages flagged ``meta.archived`` (``export --all``) go out as compacted rows.
    """
    rows = []
    for msg in messages:
        marker = read_marker(msg) if msg.is_marker else None
        if marker is not None:
            row: dict[str, Any] = {
                "role": "assistant",
                "content": hermes_markers.render_summary(marker.summary, micro=marker.kind == MICRO),
                hermes_markers.SUMMARY_FLAG: True,
                hermes_markers.MICRO_FLAG: marker.kind == MICRO,
            }
        else:
            row = msg.to_openai()
        if msg.meta.get("archived"):
            row.update(active=0, compacted=1)
        rows.append(row)
    snapshot: dict[str, Any] = {"session_id": session_id}
    if title:
        snapshot["title"] = title
    if model:
        snapshot["model"] = model
    snapshot["messages"] = rows
    return snapshot


# --- one message ---------------------------------------------------------------------


def _plain_message(row: dict[str, Any], where: str) -> Message:
    data: dict[str, Any] = {"role": row["role"], "content": row.get("content")}
    if row.get("tool_calls"):
        data["tool_calls"] = row["tool_calls"]
    if row.get("tool_call_id"):
        data["tool_call_id"] = row["tool_call_id"]
    name = row.get("name") or (row.get("tool_name") if row["role"] == "tool" else None)
    if name:
        data["name"] = name
    msg = Message.from_openai(data, where=where)
    kept = hermes_meta(row)
    if kept:
        msg.meta[META_KEY] = kept
    return msg


def _summary_messages(row: dict[str, Any], where: str) -> list[Message] | None:
    """A Hermes summary row as our messages (marker, plus any user text it carried); None if not one."""
    role = row["role"]
    if role not in ("user", "assistant") or row.get("tool_calls") or row.get("tool_call_id"):
        return None
    parsed = hermes_markers.parse_summary(row.get("content"), flagged=_flag(row, hermes_markers.SUMMARY_FLAG, False))
    if parsed is None:
        return None
    if isinstance(row.get(hermes_markers.MICRO_FLAG), bool):
        # Said outright (our exports say it for both kinds, so a batch summary stays one).
        kind = MICRO if row[hermes_markers.MICRO_FLAG] else BATCH
    else:
        kind = MICRO if role == "assistant" else BATCH
    kept = {**hermes_meta(row), "role": role}
    candidate = make_marker(kind, parsed.summary, covers=[], extra={META_KEY: kept})
    checked = read_marker(candidate)
    if checked is not None:
        summary_part = make_marker(kind, checked.summary, covers=[], extra={META_KEY: kept})
    else:
        # Not fit to stand as a summary: an ordinary assistant message, absorbed later.
        summary_part = Message(role="assistant", content=parsed.summary, meta={META_KEY: kept})
    # The message's own text, wherever Hermes put it, is the newer message: it follows the summary.
    own = [Message(role=role, content=text, meta={META_KEY: {**kept, "merged": True}})
           for text in (parsed.before, parsed.after) if text]
    return [summary_part, *own]


def hermes_meta(row: dict[str, Any]) -> dict[str, Any]:
    """The Hermes keys worth keeping, JSON-safe, empty values left out."""
    kept: dict[str, Any] = {}
    for key in KEPT_KEYS:
        value = row.get(key)
        if value is None or value == "" or (key == "observed" and not value):
            continue
        kept[key] = value if _json_safe(value) else str(value)
    return kept


def _flag(row: dict[str, Any], key: str, default: bool) -> bool:
    value = row.get(key, default)
    return bool(value) if isinstance(value, (bool, int)) else default


def _json_safe(value: Any) -> bool:
    try:
        json.dumps(value)
    except (TypeError, ValueError):
        return False
    return True


# --- files ---------------------------------------------------------------------------


def _session_objects(text: str, source: str) -> list[dict[str, Any]]:
    stripped = text.strip()
    if not stripped:
        raise TranscriptError(f"{source}: the file is empty")
    try:
        data = load_json(stripped)
    except InputError as exc:
        if exc.line is None:  # it parsed but is past a bound (depth, size): no JSON Lines either
            raise TranscriptError(f"{source}: {exc}") from None
        data = None
    if isinstance(data, dict):
        return [data]
    if data is not None:
        raise TranscriptError(f"{source}: expected a Hermes session object with \"messages\"")
    sessions = []
    for lineno, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            item = load_json(line, first_line=lineno)
        except InputError as exc:
            raise TranscriptError(f"{source}: line {lineno}: not valid JSON ({exc.kind}: {exc.detail})") from None
        if not isinstance(item, dict):
            raise TranscriptError(f"{source}: line {lineno}: expected a Hermes session object")
        sessions.append(item)
    return sessions
