"""The extractive summarizer: deterministic notes drawn from an exchange, no model needed.

Its notes are those of ``compaction.notes``: the assistant's first sentence, each tool call
in brief with the first line of its result, error lines, and the file paths mentioned. It is what the
demo and the replay benchmarks use when no model is configured
(``auxiliary.compression.provider: extractive``), and it is fast enough to
replay a whole session in seconds. A model writes far better summaries.

Its notes are append-only by nature, so append mode (``append`` requests) gets
just the new notes and merge mode the summary with them added: the same summary.
"""

from __future__ import annotations

import time
from typing import Any

from hermes_tui.compaction.notes import dedupe, exchange_notes
from hermes_tui.compaction.prompts import NOTHING_NEW
from hermes_tui.compaction.summarizer import Completion
from hermes_tui.compaction.summary_request import SummaryRequest
from hermes_tui.core.tokens import EstimateCounter
from hermes_tui.core.transcript import Message


class ExtractiveSummarizer:
    model_name = "extractive"
    no_model = True  # not sized to a model's speed, nor judged for a model's misreadings: runs_a_model

    def __init__(self) -> None:
        self._counter = EstimateCounter()

    def complete(self, messages: list[dict[str, Any]], *, max_tokens: int) -> Completion:  # pragma: no cover - protocol shape only
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
                lines = self._fit(dedupe(lines), self._tokens("\n".join(old)) + self._budget(request.messages))
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
        notes = exchange_notes(messages)
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
        return self._fit(dedupe(lines), size * 45 // 100)

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
