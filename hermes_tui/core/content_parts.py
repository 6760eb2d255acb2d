"""Content parts: what a message holds besides text (images, audio, files), read as text.

OpenAI content is a string or a list of parts. A list is kept verbatim: stored, exported
and sent to the model as it came. Whatever reads a message as text (summarizer prompts,
search, Markdown, text-only models) reads its *text view* instead: the text parts, and
one short placeholder per other part, such as ``[image: image/png, 12 KB]``. A placeholder
never carries the payload: base64 is huge, and a data URL or a signed link can hide
anything, secrets included.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

# Part types whose text is read as text, and the key that holds it.
TEXT_KEYS = {"text": "text", "refusal": "refusal"}
# What a text-only model is told in place of each part it cannot take.
UNSEEN_NOTE = "not shown: this model reads text only"

_TYPE_NAME = re.compile(r"[^A-Za-z0-9_.-]")
_MIME = re.compile(r"[A-Za-z0-9.+-]+/[A-Za-z0-9.+-]+")
_FILENAME_LIMIT = 60


@dataclass(frozen=True)
class Attachment:
    """A part that is not text, as it is shown: ``kind`` (image, audio, file, or the part's
    own type) and ``detail`` (``image/png, 12 KB``; empty when nothing safe is known)."""

    kind: str
    detail: str = ""

    def placeholder(self, note: str = "") -> str:
        inside = "; ".join(text for text in (self.detail, note) if text)
        return f"[{self.kind}: {inside}]" if inside else f"[{self.kind}]"


def part_type(part: Any) -> str | None:
    """The part's type (a bare string counts as text), or None for a part that has none."""
    if isinstance(part, str):
        return "text"
    kind = part.get("type") if isinstance(part, dict) else None
    return kind if isinstance(kind, str) and kind else None


def part_problem(part: Any) -> str | None:
    """Why ``part`` is not a usable content part, or None. Unknown types are fine: kept as they are."""
    kind = part_type(part)
    if kind is None:
        return "a part must be an object with a type"
    if isinstance(part, dict) and kind in TEXT_KEYS and not isinstance(part.get(TEXT_KEYS[kind]), str):
        return f"a {kind} part needs a {TEXT_KEYS[kind]} string"
    return None


def part_text(part: Any) -> str | None:
    """The text of a text part; None for any other part."""
    if isinstance(part, str):
        return part
    key = TEXT_KEYS.get(part_type(part) or "")
    return part[key] if key is not None else None


def text_only(parts: list[Any]) -> str:
    """The text parts alone, one after another on their own lines."""
    return "\n".join(text for text in map(part_text, parts) if text is not None)


def attachments(parts: list[Any]) -> list[Attachment]:
    return [describe(part) for part in parts if part_text(part) is None]


def text_view(parts: list[Any], *, note: str = "") -> str:
    """Text parts as they are and a placeholder for every other part, one per line."""
    lines = []
    for part in parts:
        text = part_text(part)
        lines.append(text if text is not None else describe(part).placeholder(note))
    return "\n".join(lines)


def describe(part: dict[str, Any]) -> Attachment:
    """What can be said of a non-text part without its payload: media type, size, file name."""
    kind = part_type(part) or "part"
    if kind == "image_url":
        image = part.get("image_url")
        url = image.get("url") if isinstance(image, dict) else image
        mime, size = _data_url(url)
        return Attachment("image", _join(mime, size))  # a remote URL is not shown: it can carry a signature
    if kind == "input_audio":
        audio = _object(part.get("input_audio"))
        audio_format = audio.get("format")
        shown_format = audio_format if isinstance(audio_format, str) and audio_format.isalnum() else ""
        return Attachment("audio", _join(shown_format[:16], _base64_size(audio.get("data"))))
    if kind == "file":
        file = _object(part.get("file"))
        _, size = _data_url(file.get("file_data"))
        return Attachment("file", _join(_filename(file.get("filename")), size))
    return Attachment(_TYPE_NAME.sub("", kind)[:32] or "part")


def for_text_only_model(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Wire messages for a model that takes only text: list contents become their text view,
    each non-text part a placeholder that says the model cannot see it."""
    out = []
    for message in messages:
        content = message.get("content")
        if isinstance(content, list):
            message = {**message, "content": text_view(content, note=UNSEEN_NOTE)}
        out.append(message)
    return out


def human_size(size: int) -> str:
    if size < 1024:
        return f"{size} B"
    if size < 1024 * 1024:
        return f"{round(size / 1024)} KB"
    return f"{size / (1024 * 1024):.1f} MB"


def _object(value: Any) -> dict[str, Any]:
    """``value`` if it is a JSON object, else an empty one."""
    return value if isinstance(value, dict) else {}


def _join(*details: str) -> str:
    return ", ".join(detail for detail in details if detail)


def _data_url(url: Any) -> tuple[str, str]:
    """(media type, size) of a ``data:`` URL; ("", "") for anything else."""
    if not isinstance(url, str) or not url.startswith("data:") or "," not in url:
        return "", ""
    header, payload = url[5:].split(",", 1)
    mime = header.split(";", 1)[0]
    mime = mime if _MIME.fullmatch(mime) else ""
    size = _base64_size(payload) if header.endswith(";base64") else human_size(len(payload))
    return mime, size


def _base64_size(data: Any) -> str:
    if not isinstance(data, str) or not data:
        return ""
    padding = 2 - len(data[-2:].rstrip("="))
    return human_size(len(data) * 3 // 4 - padding)


def _filename(name: Any) -> str:
    if not isinstance(name, str):
        return ""
    shown = " ".join(name.replace("[", "(").replace("]", ")").split())
    return shown if len(shown) <= _FILENAME_LIMIT else shown[: _FILENAME_LIMIT - 1] + "…"
