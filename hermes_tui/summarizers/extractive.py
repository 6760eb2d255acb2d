"""The extractive summarizer: deterministic notes drawn from an exchange, no model needed.

It keeps the assistant's first sentence, each tool call in brief with the first
line of its result, error lines, and the file paths mentioned. It is what the
demo and the replay benchmarks use when no model is configured
(``auxiliary.compression.provider: extractive``), and it is fast enough to
replay a whole session in seconds. A model writes far better summaries.

Its notes are append-only by nature, so append mode (``append`` requests) gets
just the new notes and merge mode the summary with them added: the same summary.
"""

from __future__ import annotations

import json
import re
import time

from hermes_tui.compaction.prompts import NOTHING_NEW
from hermes_tui.compaction.summarize import SummaryRequest
from hermes_tui.compaction.summarizer import Completion
from hermes_tui.tokens import EstimateCounter
from hermes_tui.transcript import Message
from hermes_tui.untrusted import load_json

_SENTENCE = re.compile(r"(.+?[.!?:])(\s|$)", re.S)
_PATH = re.compile(r"(?<![\w/.-])(?:\.{0,2}/)?(?:[\w.-]+/)+[\w.-]+\.\w{1,6}\b")
_ERROR = re.compile(r"^.*\b(?:Error|Exception|FAILED|Traceback|error:|fatal:)\b.*$", re.M)
MAX_LINE = 160


class ExtractiveSummarizer:
    model_name = "extractive"

    def __init__(self) -> None:
        self._counter = EstimateCounter()

    def complete(self, messages, *, max_tokens: int) -> Completion:  # pragma: no cover - protocol shape only
        raise NotImplementedError("the extractive summarizer works on requests, not prompts")

    def summarize(self, request: SummaryRequest, *, max_tokens: int) -> Completion:
        started = time.perf_counter()
        old = [line for line in request.summary.splitlines() if line.strip()]
        if request.kind == "defrag":
            lines = self._consolidate(old + self._notes(request.messages), request)
        elif request.kind == "append":
            lines = self._notes(request.messages, budget=self._budget(request.messages)) or [NOTHING_NEW]
        else:
            new = self._notes(request.messages, budget=self._budget(request.messages))
            lines = old + new
            if request.kind == "batch":
                lines = self._fit(_dedupe(lines), self._tokens("\n".join(old)) + self._budget(request.messages))
        text = "\n".join(lines)
        return Completion(
            text=text,
            finish_reason="stop",
            prompt_tokens=None,
            completion_tokens=self._tokens(text),
            duration_s=time.perf_counter() - started,
        )

    # --- notes ------------------------------------------------------------------------
    def _notes(self, messages: list[Message], budget: int | None = None) -> list[str]:
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
        if budget is not None:
            notes = self._fit(notes, budget, keep_first=True)
        return notes

    def _budget(self, messages: list[Message]) -> int:
        """Notes for an exchange take at most half of what they replace."""
        size = sum(self._tokens(m.content) for m in messages)
        return max(8, size // 2)

    def _consolidate(self, lines: list[str], request: SummaryRequest) -> list[str]:
        """Defrag: drop repeats, then keep the newest notes that fit in half the input."""
        size = self._tokens(request.summary) + sum(self._tokens(m.content) for m in request.messages)
        return self._fit(_dedupe(lines), size * 45 // 100)

    def _fit(self, lines: list[str], budget: int, keep_first: bool = False) -> list[str]:
        kept: list[str] = []
        spent = 0
        ordered = lines if keep_first else list(reversed(lines))
        for line in ordered:
            cost = self._tokens(line) + 1
            if spent + cost > budget and kept:
                break
            kept.append(line)
            spent += cost
        return kept if keep_first else list(reversed(kept))

    def _tokens(self, text: str) -> int:
        return self._counter.count_text(text)


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


def _dedupe(lines: list[str]) -> list[str]:
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
