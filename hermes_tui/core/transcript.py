"""Messages, exchanges, the compaction marker and the wire view.

Messages are OpenAI chat messages plus a ``meta`` mapping that never goes over the
wire. Content that arrives as a list of parts (text, images, audio, files) is kept
verbatim in ``parts``; ``content`` is then its text view (``content_parts``), which is
what everything that reads a message as text reads. Compaction treats a message as
immutable once it is in a transcript: it is replaced whole (by a marker) or kept as it
is, never edited, so a cached token count on the message stays true.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from hermes_tui.core import content_parts
from hermes_tui.util.errors import AppError
from hermes_tui.util.untrusted import InputError, load_json, path_text

ROLES = ("system", "user", "assistant", "tool")

# Marker scaffolding: kept to a couple of short lines so that even a first pass,
# which pays for it against one exchange, saves tokens.
MARKER_HEADER = "[Context summary: earlier assistant work and tool results, condensed. User messages are kept verbatim.]"
MARKER_FOOTER = "[End of context summary]"

# The two kinds of compaction pass, and of the marker each leaves: the one definition, which
# the policy, the engine, the pass queues, the CLI and the app import.
MICRO = "micro"
BATCH = "batch"
MARKER_KINDS = (MICRO, BATCH)

# The meta key marking the system prompt the app builds for each turn (kept at index 0).
SYSTEM_PROMPT = "system_prompt"


class TranscriptError(AppError, ValueError):
    """A transcript that is not a valid list of OpenAI chat messages."""


def new_message_id() -> str:
    return uuid.uuid4().hex


@dataclass(eq=False)
class Message:
    """One chat message. Identity is ``id``; ``eq=False`` keeps messages hashable by object."""

    role: str
    content: str = ""
    tool_calls: list[dict[str, Any]] | None = None
    tool_call_id: str | None = None
    name: str | None = None
    meta: dict[str, Any] = field(default_factory=dict)
    id: str = field(default_factory=new_message_id)
    # Token count cache: the count and the name of the counter that produced it.
    token_count: int | None = None
    token_counter: str | None = None
    # Set once the message is in the store, so the append-only flush skips it.
    stored: bool = False
    # The content as a list of parts, verbatim, when it came as one (None: a plain string).
    # ``content`` is then the parts' text view; the wire, the store and export use the parts.
    parts: list[Any] | None = None

    # --- what kind of message this is -------------------------------------------------
    @property
    def marker_kind(self) -> str | None:
        """``"micro"`` or ``"batch"`` when this message has the shape of a compaction marker
        tagged as one, else None.

        Only an assistant message without tool calls can be one: a message with calls has
        results that answer it and must stay with them. This is the structural rule only;
        ``compaction.markers.read_marker`` decides whether what the marker says may stand.
        """
        if not self.has_marker_shape:
            return None
        kind = self.meta.get("compaction") if isinstance(self.meta, dict) else None
        return kind if kind in MARKER_KINDS else None

    @property
    def has_marker_shape(self) -> bool:
        """An assistant message without tool calls: the only kind that may stand as a marker."""
        return self.role == "assistant" and not self.tool_calls and self.tool_call_id is None

    @property
    def is_marker(self) -> bool:
        return self.marker_kind is not None

    @property
    def is_system_prompt(self) -> bool:
        """The app's own system prompt (``session.system_prompt``), not one a transcript brought."""
        return self.role == "system" and isinstance(self.meta, dict) and self.meta.get(SYSTEM_PROMPT) is True

    @property
    def call_ids(self) -> list[str]:
        return [call.get("id", "") for call in self.tool_calls or []]

    # --- new messages from this one ---------------------------------------------------
    def copy(self) -> Message:
        """A fresh message under a new id: every wire field (parts included) and its own
        ``meta``, with no cached token count and not stored."""
        return replace(self, meta=dict(self.meta), id=new_message_id(), token_count=None, token_counter=None,
                       stored=False, parts=None if self.parts is None else list(self.parts))

    def with_text_added(self, text: str) -> Message:
        """This message (same id) with ``text`` added at the end, where the wire sees it: a
        text part when the content is a list of parts. The cached token count is dropped."""
        if self.parts is not None:
            parts = [*self.parts, {"type": "text", "text": text}]
            return replace(self, content=content_parts.text_view(parts), parts=parts, meta=dict(self.meta),
                           token_count=None, token_counter=None, stored=False)
        content = f"{self.content}\n\n{text}" if self.content else text
        return replace(self, content=content, meta=dict(self.meta), token_count=None, token_counter=None, stored=False)

    # --- conversion -----------------------------------------------------------------
    def to_openai(self, *, with_meta: bool = False) -> dict[str, Any]:
        out: dict[str, Any] = {"role": self.role, "content": self.content if self.parts is None else list(self.parts)}
        if self.tool_calls:
            out["tool_calls"] = self.tool_calls
        if self.tool_call_id is not None:
            out["tool_call_id"] = self.tool_call_id
        if self.name is not None:
            out["name"] = self.name
        if with_meta and self.meta:
            out["meta"] = self.meta
        return out

    @classmethod
    def from_openai(cls, data: Any, *, where: str = "message") -> Message:
        if not isinstance(data, dict):
            raise TranscriptError(f"{where}: expected an object, got {type(data).__name__}")
        role = data.get("role")
        if role not in ROLES:
            raise TranscriptError(f"{where}: role must be one of {', '.join(ROLES)}, got {role!r}")
        content, parts = _content_fields(data.get("content"), where)
        tool_calls = data.get("tool_calls") or None
        if tool_calls is not None:
            if role != "assistant" or not isinstance(tool_calls, list):
                raise TranscriptError(f"{where}: tool_calls must be a list on an assistant message")
            for n, call in enumerate(tool_calls):
                _check_tool_call(call, f"{where}: tool_calls[{n}]")
        tool_call_id = data.get("tool_call_id")
        if tool_call_id is not None and not isinstance(tool_call_id, str):
            raise TranscriptError(f"{where}: tool_call_id must be text, got {_kind(tool_call_id)}")
        if role == "tool" and not tool_call_id:
            raise TranscriptError(f"{where}: a tool message needs a tool_call_id")
        name = data.get("name")
        if name is not None and not isinstance(name, str):
            raise TranscriptError(f"{where}: name must be text, got {_kind(name)}")
        meta = data.get("meta") or {}
        if not isinstance(meta, dict):
            raise TranscriptError(f"{where}: meta must be an object")
        kwargs: dict[str, Any] = {}
        if isinstance(meta.get("id"), str):
            kwargs["id"] = meta["id"]
        return cls(
            role=role,
            content=content,
            tool_calls=tool_calls,
            tool_call_id=tool_call_id,
            name=name,
            meta={k: v for k, v in meta.items() if k != "id"},
            parts=parts,
            **kwargs,
        )


def _kind(value: Any) -> str:
    """What a JSON value is, for an error message (never the value: it may be huge)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return "a number"
    if isinstance(value, dict):
        return "an object"
    if isinstance(value, list):
        return "a list"
    return "null" if value is None else type(value).__name__


def _check_tool_call(call: Any, where: str) -> None:
    # Every reader of a call (the store's tool-name index, prompts, the screen) takes
    # these as text; a number here used to surface later as a crash far from the file.
    if not isinstance(call, dict) or not call.get("id") or not isinstance(call.get("function"), dict):
        raise TranscriptError(f"{where} needs an id and a function")
    if not isinstance(call["id"], str):
        raise TranscriptError(f"{where}.id must be text, got {_kind(call['id'])}")
    function = call["function"]
    if not isinstance(function.get("name"), str) or not function["name"]:
        raise TranscriptError(f"{where}.function.name must be a tool name (text), got {_kind(function.get('name'))}")
    arguments = function.get("arguments")
    if arguments is not None and not isinstance(arguments, str):
        raise TranscriptError(f"{where}.function.arguments must be JSON text (a string), got {_kind(arguments)}")


def _content_fields(content: Any, where: str) -> tuple[str, list[Any] | None]:
    """(text, parts) of OpenAI content: a string, null, or a list of parts kept as it is."""
    if content is None:
        return "", None
    if isinstance(content, str):
        return content, None
    if isinstance(content, list):
        for n, part in enumerate(content):
            problem = content_parts.part_problem(part)
            if problem:
                raise TranscriptError(f"{where}: content[{n}]: {problem}")
        return content_parts.text_view(content), list(content)
    raise TranscriptError(f"{where}: content must be a string, a list of parts or null")


# --- transcripts as files ------------------------------------------------------------


def read_transcript(path: Path | str) -> list[Message]:
    """Read and parse a transcript file: every problem is a TranscriptError naming it."""
    return parse_transcript(read_text(path), source=str(path))


def read_text(path: Path | str) -> str:
    """A transcript file's text; a missing, unreadable or non-UTF-8 file is a TranscriptError naming it."""
    try:
        return Path(path).read_text(encoding="utf-8")
    except FileNotFoundError:
        raise TranscriptError(f"{path}: no such file") from None
    except UnicodeDecodeError as exc:
        raise TranscriptError(f"{path}: not UTF-8 text (bad byte at offset {exc.start})") from None
    except OSError as exc:
        raise TranscriptError(f"{path}: cannot read ({exc.strerror or exc})") from None


def parse_transcript(text: str, *, source: str = "transcript") -> list[Message]:
    """Parse a JSON array (or JSONL) of OpenAI messages, checking tool pairing.

    Errors name the source and the message (or line) at fault.
    """
    stripped = text.lstrip()
    if not stripped:
        raise TranscriptError(f"{source}: the file is empty")
    raw: list[tuple[str, Any]] = []
    if stripped.startswith("["):
        try:
            data = load_json(text)
        except InputError as exc:
            raise TranscriptError(_unloadable(source, exc, "message")) from None
        if not isinstance(data, list):
            raise TranscriptError(f"{source}: expected a JSON array of messages")
        raw = [(f"{source}: message {n}", item) for n, item in enumerate(data)]
    else:
        for lineno, line in enumerate(text.splitlines(), start=1):
            if not line.strip():
                continue
            try:
                raw.append((f"{source}: line {lineno}", load_json(line, first_line=lineno)))
            except InputError as exc:
                raise TranscriptError(_unloadable(source, exc, f"line {lineno}")) from None
    messages = [Message.from_openai(item, where=where) for where, item in raw]
    check_tool_pairing(messages, source=source)
    return messages


def _unloadable(source: str, exc: InputError, unit: str) -> str:
    """One line for JSON that did not load: by line and column, or by message and field."""
    if exc.line is not None or not exc.path:
        return f"{source}: {exc}"
    path = exc.path
    if unit == "message" and isinstance(path[0], int):  # the array's index is the message number
        unit, path = f"message {path[0]}", path[1:]
    field_name = f"{path_text(path)}: " if path else ""
    return f"{source}: {unit}: {field_name}{exc.kind}: {exc.detail}"


def check_tool_pairing(messages: list[Message], *, source: str = "transcript") -> None:
    """Every tool message answers an open call of the assistant message before it."""
    open_calls: set[str] = set()
    for n, msg in enumerate(messages):
        if msg.role == "tool":
            if msg.tool_call_id not in open_calls:
                raise TranscriptError(
                    f"{source}: message {n}: tool result {msg.tool_call_id!r} answers no open tool call"
                )
            open_calls.discard(msg.tool_call_id)
        else:
            open_calls = set(msg.call_ids) if msg.role == "assistant" else set()


def dump_transcript(messages: Iterable[Message]) -> str:
    return json.dumps([m.to_openai(with_meta=True) for m in messages], ensure_ascii=False, indent=1)


# --- exchanges -----------------------------------------------------------------------


def exchange_end(messages: list[Message], start: int) -> int | None:
    """End (exclusive) of the exchange starting at ``start``, an assistant message.

    An exchange is the assistant message plus the tool results that answer its calls.
    Returns None when the exchange is incomplete (a call not answered yet).
    """
    first = messages[start]
    pending = set(first.call_ids)
    end = start + 1
    while end < len(messages) and messages[end].role == "tool" and messages[end].tool_call_id in pending:
        pending.discard(messages[end].tool_call_id)
        end += 1
    return None if pending else end


def group_start(messages: list[Message], index: int) -> int:
    """Move ``index`` back to the start of its tool group so a cut never splits one."""
    while 0 < index < len(messages) and messages[index].role == "tool":
        index -= 1
    return index


def group_end(messages: list[Message], index: int) -> int:
    """Move ``index`` forward past any tool results, so a cut never splits a group."""
    while index < len(messages) and messages[index].role == "tool":
        index += 1
    return index


def iter_turns(messages: list[Message]) -> Iterator[tuple[int, int]]:
    """(start, end) of each turn: a user message and all that follows up to the next one.

    Anything before the first user message (a system prompt) is its own leading turn.
    """
    start = 0
    for n, msg in enumerate(messages):
        if msg.role == "user" and n > start:
            yield start, n
            start = n
    if start < len(messages):
        yield start, len(messages)


def iter_steps(messages: list[Message]) -> Iterator[tuple[int, int]]:
    """(start, end) of each agent-loop step: a message and any tool results that follow it."""
    n = 0
    while n < len(messages):
        end = group_end(messages, n + 1)
        yield n, end
        n = end


# --- markers -------------------------------------------------------------------------


def make_marker(kind: str, summary: str, *, covers: list[str], extra: dict[str, Any] | None = None) -> Message:
    """The one summary marker: a short header, the summary, and an end line.

    The raw summary lives in ``meta`` so a resume never has to parse the content.
    """
    meta: dict[str, Any] = {"compaction": kind, "summary": summary, "covers": list(covers)}
    if extra:
        meta.update(extra)
    return Message(role="assistant", content=f"{MARKER_HEADER}\n{summary}\n{MARKER_FOOTER}", meta=meta)


# --- wire view -----------------------------------------------------------------------


def wire_view(messages: Iterable[Message], *, merge_same_role: bool = True) -> list[dict[str, Any]]:
    """The messages as sent to a model: no meta, adjacent same-role messages merged.

    Chat templates that need alternating roles reject two user (or two assistant)
    messages in a row, which compaction can produce (a marker between turns, user
    prompts that stay verbatim). The stored transcript keeps them separate. Content
    parts go out as they are (a merge makes one list of them).
    """
    out: list[dict[str, Any]] = []
    for msg in messages:
        item = msg.to_openai()
        prev = out[-1] if out else None
        if (
            merge_same_role
            and prev is not None
            and prev["role"] == item["role"]
            and item["role"] in ("user", "assistant", "system")
            and not prev.get("tool_calls")
        ):
            prev["content"] = _merged_content(prev["content"], item["content"])
            if item.get("tool_calls"):
                prev["tool_calls"] = item["tool_calls"]
        else:
            out.append(item)
    return out


def _merged_content(first: str | list[Any], second: str | list[Any]) -> str | list[Any]:
    """Two contents as one: strings joined by a blank line; with a list, one list of parts
    (each part unchanged, a string becoming a text part)."""
    if isinstance(first, str) and isinstance(second, str):
        return "\n\n".join(text for text in (first, second) if text)

    def as_parts(content: str | list[Any]) -> list[Any]:
        if isinstance(content, list):
            return content
        return [{"type": "text", "text": content}] if content else []

    return [*as_parts(first), *as_parts(second)]
