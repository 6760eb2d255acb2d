"""Deterministic notes of an exchange: what is kept of it when no model writes them.

The assistant's first sentence, each tool call in brief with the first line of its
result (or its first error line), and the file paths mentioned. The extractive
summarizer is made of these notes, and a pass falls back on them when the model's
answer is not a summary (``micro.py``): an exchange never leaves the context with less
kept than this.
"""

from __future__ import annotations

import json
import re

from hermes_tui.compaction.checks import looks_like_instructions
from hermes_tui.core.transcript import Message
from hermes_tui.util.untrusted import load_json

_SENTENCE = re.compile(r"(.+?[.!?:])(\s|$)", re.S)
_PATH = re.compile(r"(?<![\w/.-])(?:\.{0,2}/)?(?:[\w.-]+/)+[\w.-]+\.\w{1,6}\b")
_ERROR = re.compile(r"^.*\b(?:Error|Exception|FAILED|Traceback|error:|fatal:)\b.*$", re.M)
MAX_LINE = 160


def exchange_notes(messages: list[Message]) -> list[str]:
    """One line per thing worth keeping of ``messages``, each starting with "- "."""
    notes: list[str] = []
    results = {m.tool_call_id: m.content for m in messages if m.role == "tool"}
    for msg in messages:
        if msg.role != "assistant":
            continue
        if msg.content.strip():
            notes.append(f"- {_first_sentence(msg.content)}")
        for call in msg.tool_calls or []:
            function = call.get("function") or {}
            result = results.get(call.get("id"), "")
            outcome = _first_line(result)
            errors = _ERROR.findall(result)
            note = f"- {function.get('name', 'tool')}: {_brief_args(function.get('arguments', ''))}"
            if errors:
                note += f" -> {_clip(errors[0].strip())}"
            elif outcome:
                note += f" -> {_clip(outcome)}"
            notes.append(note)
    paths = _paths("\n".join(m.content for m in messages))
    if paths:
        notes.append(f"- files: {', '.join(paths)}")
    return notes


def new_notes(summary: str, messages: list[Message]) -> str:
    """The notes of ``messages`` that ``summary`` does not hold yet, one per line, each once.

    What stands in for a model's answer (a micro pass's exchange, a batch chunk) that failed
    or was rejected. The notes quote tool output, so each line passes the instruction check,
    as the model's own text would as a whole."""
    held = {line.strip() for line in summary.splitlines()}
    return "\n".join(
        line for line in dedupe(exchange_notes(messages))
        if line.strip() not in held and not looks_like_instructions(line)
    )


def _first_sentence(text: str) -> str:
    text = " ".join(text.split())
    match = _SENTENCE.match(text)
    return _clip(match.group(1) if match else text)


def _first_line(text: str) -> str:
    for line in text.splitlines():
        line = line.strip()
        if line and not line.startswith("<returncode>"):
            return re.sub(r"</?output>", "", line).strip()
    return ""


def _brief_args(arguments: str) -> str:
    try:
        data = load_json(arguments)
    except (TypeError, ValueError):
        return _clip(str(arguments))
    if isinstance(data, dict):
        for key in ("command", "cmd", "file_path", "path", "pattern", "query", "description"):
            if isinstance(data.get(key), str):
                return _clip(data[key].strip().splitlines()[0] if data[key].strip() else "")
        return _clip(json.dumps(data, ensure_ascii=False))
    return _clip(str(data))


def _paths(text: str, limit: int = 6) -> list[str]:
    seen: list[str] = []
    for path in _PATH.findall(text):
        if path not in seen:
            seen.append(path)
        if len(seen) == limit:
            break
    return seen


def dedupe(lines: list[str]) -> list[str]:
    seen: set[str] = set()
    out = []
    for line in lines:
        if line not in seen:
            seen.add(line)
            out.append(line)
    return out


def _clip(text: str) -> str:
    text = " ".join(text.split())
    return text if len(text) <= MAX_LINE else text[: MAX_LINE - 3] + "..."
