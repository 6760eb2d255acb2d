"""Text helpers for the message views: one-line summaries, arguments, attachments, columns."""

from __future__ import annotations

import json
import time
from collections.abc import Iterable
from datetime import datetime, timedelta
from typing import Any

from hermes_tui.core.content_parts import Attachment, text_only
from hermes_tui.core.transcript import Message
from hermes_tui.util.untrusted import load_json

SHORT = 68  # a one-line summary of a call or result, in cells



def one_line(text: str, limit: int = SHORT) -> str:
    line = " ".join(text.split())
    return line if len(line) <= limit else line[: limit - 1] + "…"



def first_line(text: str) -> str:
    for line in text.splitlines():
        if line.strip():
            return line.strip()
    return ""



def short_args(arguments: Any) -> str:
    """``{"command": "ls -la"}`` -> ``ls -la``; several keys -> ``path=a.py, line=3``."""
    if isinstance(arguments, str):
        try:
            arguments = load_json(arguments)
        except (ValueError, TypeError):
            return one_line(arguments)
    if isinstance(arguments, dict):
        if len(arguments) == 1:
            value = next(iter(arguments.values()))
            return one_line(value if isinstance(value, str) else json.dumps(value, ensure_ascii=False))
        parts = [f"{key}={value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)}"
                 for key, value in arguments.items()]
        return one_line(", ".join(parts))
    return one_line(json.dumps(arguments, ensure_ascii=False))



# A part that is not text shows as a row of its own: its kind and what is known of it.
ATTACHMENT_ICONS = {"image": "🖼", "audio": "🔊", "file": "📎"}



def attachment_label(attachment: Attachment) -> str:
    """``🖼 image (image/png, 12 KB)``: the row a non-text part shows as (never its payload)."""
    icon = ATTACHMENT_ICONS.get(attachment.kind, "◻")
    return f"{icon} {attachment.kind}" + (f" ({attachment.detail})" if attachment.detail else "")



def body_text(message: Message) -> str:
    """What a message's body shows: its text, without the placeholders of its other parts
    (those get rows of their own, ``attachment_rows``)."""
    return message.content if message.parts is None else text_only(message.parts)



def pretty_args(arguments: Any) -> str:
    if isinstance(arguments, str):
        try:
            return json.dumps(load_json(arguments), indent=2, ensure_ascii=False)
        except (ValueError, TypeError):
            return arguments
    return json.dumps(arguments, indent=2, ensure_ascii=False)



def columns(rows: Iterable[tuple[str, str]], gap: int = 2) -> str:
    """Two aligned columns of plain text (lighter than a Markdown table in a small terminal)."""
    rows = list(rows)
    width = max((len(name) for name, _ in rows), default=0) + gap
    return "\n".join(f"{name:<{width}}{value}" for name, value in rows)


def human_time(ts: float, now: float | None = None) -> str:
    """``just now``, ``5 min ago``, ``today 14:03``, ``yesterday 09:12``, ``Mon 14:03``, ``3 Mar``, ``3 Mar 2023``."""
    now = time.time() if now is None else now
    delta = now - ts
    then, today = datetime.fromtimestamp(ts), datetime.fromtimestamp(now).date()
    if 0 <= delta < 60:
        return "just now"
    if 0 <= delta < 3600:
        return f"{int(delta // 60)} min ago"
    if then.date() == today:
        return f"today {then:%H:%M}"
    if then.date() == today - timedelta(days=1):
        return f"yesterday {then:%H:%M}"
    if timedelta(0) < today - then.date() < timedelta(days=7):
        return f"{then:%a %H:%M}"
    if then.year == today.year:
        return f"{then.day} {then:%b}"
    return f"{then.day} {then:%b %Y}"
