"""What a fidelity run tracks: the planted decisions and open questions, and every fact absorbed,
looked up in the rolling summary after each pass that changed it (``evaluate`` runs it)."""

from __future__ import annotations

import random
import re
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from hermes_tui.compaction import facts as factlib
from hermes_tui.compaction.engine import PassReport
from hermes_tui.compaction.redaction import redact_message
from hermes_tui.compaction.state import PassResult
from hermes_tui.core.transcript import Message

DECISION, OPEN_QUESTION = "decision", "open_question"
KINDS = factlib.KINDS + (DECISION, OPEN_QUESTION)
CHECKPOINTS = (10, 50, 100)
EARLY_PASSES = 10
WORD_SHARE = 0.6  # share of a planted fact's content words that must be in the summary
SUMMARY_OUTCOMES = ("absorbed", "defrag", "compressed")  # passes that change the rolling summary

_WORD = re.compile(r"[a-z][a-z0-9]{3,}")
_STOPWORDS = frozenset(["also", "because", "handle", "rather", "than", "should", "that", "this", "with", "from", "into", "keep", "have"])


def content_words(text: str) -> tuple[str, ...]:
    return tuple(dict.fromkeys(w for w in _WORD.findall(text.lower()) if w not in _STOPWORDS))


# --- planting ---------------------------------------------------------------------------

_SUBJECTS = [
    "the circuit breaker", "the lockfile parser", "a bloom filter", "the quota ledger", "the webhook relay",
    "the snapshot codec", "the token bucket", "the audit journal", "the feature flag registry",
    "the dead letter queue", "the vector clock", "the shard allocator",
]
_ALTERNATIVES = [
    "a global singleton", "a second cache", "a cron job", "an ad hoc retry loop", "a hand-written parser",
    "a thread pool", "an environment variable",
]
_REASONS = [
    "the vendored client already retries idempotent calls",
    "benchmarks showed it halves cold starts",
    "compliance requires an append-only history",
    "it keeps the migration reversible",
    "the staging cluster pins protobuf three",
    "operators asked for one knob instead of four",
    "flaky timestamps broke replication ordering",
]
_CASES = [
    "leap seconds", "unicode filenames", "partial uploads", "clock skew between replicas", "empty tenants",
    "revoked certificates", "daylight saving transitions",
]


@dataclass(frozen=True)
class Planted:
    kind: str            # DECISION | OPEN_QUESTION
    text: str            # the sentence added to the message
    subject: str
    detail: str          # the reason (decision) or the case (open question)
    message_id: str

    @property
    def words(self) -> tuple[str, ...]:
        return content_words(f"{self.subject} {self.detail}")


def plant(messages: list[Message], every: int = 8, seed: int = 0) -> tuple[list[Message], list[Planted]]:
    """A copy of ``messages`` with a decision or an open question added to every
    ``every``-th assistant message (alternating), seeded; and what was planted."""
    rng = random.Random(seed)
    out: list[Message] = []
    planted: list[Planted] = []
    seen = 0
    for msg in messages:
        if msg.role == "assistant" and every > 0:
            seen += 1
            if seen % every == 0:
                subject = _SUBJECTS[len(planted) % len(_SUBJECTS)]
                if len(planted) % 2 == 0:
                    detail = rng.choice(_REASONS)
                    text = f"Decision: use {subject} rather than {rng.choice(_ALTERNATIVES)}, because {detail}."
                    kind = DECISION
                else:
                    detail = rng.choice(_CASES)
                    text = f"Open question: should {subject} also handle {detail}?"
                    kind = OPEN_QUESTION
                msg = msg.with_text_added(text)
                planted.append(Planted(kind, text, subject, detail, msg.id))
        out.append(msg)
    return out, planted


# --- tracking ---------------------------------------------------------------------------


@dataclass
class Tracked:
    kind: str
    value: str
    first_pass: int                  # the pass that absorbed it (1-based)
    words: tuple[str, ...] = ()      # planted facts are matched on these, not on the exact text

    def present(self, summary: str, summary_words: set[str]) -> bool:
        if not self.words:
            return self.value in summary
        found = sum(1 for w in self.words if w in summary_words)
        return found >= WORD_SHARE * len(self.words)


@dataclass
class Checkpoint:
    passes: int
    kinds: dict[str, dict[str, int]]   # kind -> {"present", "total"} over facts absorbed so far
    early: dict[str, dict[str, int]]   # the same over facts absorbed in the first EARLY_PASSES passes
    summary_tokens: int

    def to_json(self) -> dict[str, Any]:
        return {"passes": self.passes, "summary_tokens": self.summary_tokens,
                "kinds": _with_rates(self.kinds), "early": _with_rates(self.early)}


def retention(kinds: dict[str, dict[str, int]], keys: tuple[str, ...]) -> float | None:
    """The share of the facts of the kinds ``keys`` that the summary still holds (a
    ``Checkpoint``'s ``kinds`` or ``early``); None when none of them was absorbed."""
    total = sum(kinds[k]["total"] for k in keys)
    return sum(kinds[k]["present"] for k in keys) / total if total else None


def _with_rates(kinds: dict[str, dict[str, int]]) -> dict[str, dict[str, Any]]:
    return {k: {**v, "retention": (v["present"] / v["total"]) if v["total"] else None} for k, v in kinds.items()}


class FactTracker:
    """Facts of everything the passes absorbed, and how many the summary still holds."""

    def __init__(self, planted: Iterable[Planted] = ()):
        self.planted = {p.message_id: p for p in planted}
        self.tracked: dict[tuple[str, str], Tracked] = {}
        self.absorbed: list[tuple[int, list[Message]]] = []  # (pass, redacted messages)
        self.passes = 0
        self._pending: list[list[Message]] = []

    def persist(self, result: PassResult) -> None:
        """The engine's persist hook: note what the pass is about to absorb."""
        if result.splice is not None:
            self._pending.append([redact_message(m) for m in result.splice.archived if not m.is_marker])

    def published(self, reports: list[PassReport]) -> int:
        """After a turn: count its summary-changing passes and track what they absorbed."""
        changed = [r for r in reports if r.outcome in SUMMARY_OUTCOMES]
        for _report, messages in zip(changed, self._pending):
            self.passes += 1
            self.absorbed.append((self.passes, messages))
            for kind, value in factlib.extract_facts(messages):
                self.tracked.setdefault((kind, value), Tracked(kind, value, self.passes))
            for msg in messages:
                planted = self.planted.get(msg.id)
                if planted is not None:
                    self.tracked.setdefault(
                        (planted.kind, planted.text), Tracked(planted.kind, planted.text, self.passes, planted.words)
                    )
        self._pending.clear()
        return len(changed)

    def measure(self, summary: str, summary_tokens: int) -> Checkpoint:
        words = set(content_words(summary))
        kinds = {k: {"present": 0, "total": 0} for k in KINDS + ("all",)}
        early = {k: {"present": 0, "total": 0} for k in KINDS + ("all",)}
        for fact in self.tracked.values():
            hit = fact.present(summary, words)
            buckets = [kinds] + ([early] if fact.first_pass <= EARLY_PASSES else [])
            for bucket in buckets:
                for key in (fact.kind, "all"):
                    bucket[key]["total"] += 1
                    bucket[key]["present"] += hit
        return Checkpoint(self.passes, kinds, early, summary_tokens)
