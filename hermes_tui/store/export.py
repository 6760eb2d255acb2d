"""Export a stored session as OpenAI-format JSON or as Markdown."""

from __future__ import annotations

import json

from hermes_tui.compaction.trim import is_trimmed
from hermes_tui.core.transcript import Message
from hermes_tui.store.store import ARCHIVED, SessionInfo, Store


def session_messages(store: Store, session_id: str, *, include_archived: bool) -> list[Message]:
    """Active messages, or every row in order with archived ones flagged ``meta.archived``.

    With the archive, a trimmed tool result is left out: its original is there, in full, at
    the same place (both would be two results of one call).
    """
    if not include_archived:
        return store.load_active(session_id)
    out = []
    for msg, state in store.load_all(session_id):
        if is_trimmed(msg):
            continue
        if state == ARCHIVED:
            msg.meta = {**msg.meta, "archived": True}
        out.append(msg)
    return out


def to_json(messages: list[Message]) -> str:
    return json.dumps([m.to_openai(with_meta=True) for m in messages], ensure_ascii=False, indent=1)


def to_markdown(info: SessionInfo, messages: list[Message]) -> str:
    lines = [f"# {info.title or info.id}", "", f"Session `{info.id}`", ""]
    for msg in messages:
        flags = " (archived)" if msg.meta.get("archived") else ""
        flags += " (stopped)" if msg.meta.get("stopped") else ""  # a reply the user stopped: partial
        if msg.is_marker:
            lines += [f"## Context summary ({msg.marker_kind}){flags}", "", str(msg.meta.get("summary", "")), ""]
            continue
        heading = {"tool": f"Tool result{f' ({msg.name})' if msg.name else ''}"}.get(msg.role, msg.role.capitalize())
        lines += [f"## {heading}{flags}", ""]
        if msg.content:
            lines += [_fence(msg.content) if msg.role == "tool" else msg.content, ""]
        for call in msg.tool_calls or []:
            function = call.get("function") or {}
            lines += [f"Tool call `{function.get('name', '?')}`:", "", _fence(str(function.get("arguments", ""))), ""]
    return "\n".join(lines)


def _fence(text: str) -> str:
    fence = "```"
    while fence in text:
        fence += "`"
    return f"{fence}\n{text}\n{fence}"
