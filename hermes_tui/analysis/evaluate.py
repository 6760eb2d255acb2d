"""Fidelity probes: does the rolling summary still carry what the absorbed exchanges said?

A transcript is replayed through the real engine (``replay``, one pass per agent
step by default). Every message a pass absorbs is seen through the persist hook
(which receives the splice before it is applied), and the facts it held are tracked
from that pass on:

* facts **found** in it by the fact guard's own extractor (``compaction.facts``: paths,
  identifiers, errors, URLs, numbers), on the redacted text, as the summarizer saw it;
* facts **planted** in it: a decision ("Decision: use X rather than Y, because Z.") or
  an open question ("Open question: should X also handle Y?") appended to every n-th
  assistant message. The guard does not extract these, so they measure the model alone.

After each pass that changed the summary, every fact absorbed so far is looked up in
the rolling summary: exact, case-sensitive text for found facts; for planted ones, at
least 60% of their content words (a model paraphrases a decision, and that is fine).
Retention is reported per kind after 10, 50 and 100 passes and at the end, for all
facts absorbed so far and for the early ones (absorbed in the first 10 passes).

Optionally (``probe``) the chat model is asked Factory-style questions about early
facts -- recall, files changed, next step, why -- on the compacted transcript, and each
answer is scored by how many of the expected facts it contains.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

from hermes_tui.analysis.fact_tracking import (
    CHECKPOINTS,
    DECISION,
    EARLY_PASSES,
    KINDS,
    OPEN_QUESTION,
    WORD_SHARE,
    Checkpoint,
    FactTracker,
    Planted,
    Tracked,
    content_words,
    plant,
    retention,
)
from hermes_tui.analysis.replay import replay
from hermes_tui.compaction import facts as factlib
from hermes_tui.compaction.engine import Compactor, PassReport
from hermes_tui.core.conversation import Conversation
from hermes_tui.core.transcript import MICRO, Message, wire_view
from hermes_tui.util.untrusted import InputError, load_json

if TYPE_CHECKING:
    from hermes_tui.chat.client import ChatClient

# The planting and tracking live in fact_tracking; these names are part of this module's API.
__all__ = [
    "CHECKPOINTS", "DECISION", "KINDS", "OPEN_QUESTION", "Checkpoint", "EvalResult", "FactTracker", "Planted",
    "Probe", "ProbeResult", "Tracked", "changed_files", "evaluate", "format_result", "format_table", "make_probes",
    "plant", "run_probes",
]

# --- the run ----------------------------------------------------------------------------


@dataclass
class EvalResult:
    transcript: str
    summarizer: str
    mode: str
    fact_guard: bool
    turns: str
    planted: int
    outcomes: dict[str, int]
    checkpoints: list[Checkpoint]
    final: Checkpoint
    trajectory: list[dict[str, Any]]   # per pass: {"pass", "all", "found"}: retention of the facts so far
    probes: list[ProbeResult] | None = None

    def mean_over_passes(self) -> dict[str, float | None]:
        """Retention averaged over the passes: less at the mercy of when the last defrag fell."""
        out: dict[str, float | None] = {}
        for key in ("all", "found"):
            values = [p[key] for p in self.trajectory if p[key] is not None]
            out[key] = sum(values) / len(values) if values else None
        return out

    def to_json(self) -> dict[str, Any]:
        return {
            "transcript": self.transcript, "summarizer": self.summarizer, "mode": self.mode,
            "fact_guard": self.fact_guard, "turns": self.turns, "planted": self.planted,
            "passes": self.final.passes, "outcomes": self.outcomes,
            "checkpoints": [c.to_json() for c in self.checkpoints], "final": self.final.to_json(),
            "trajectory": self.trajectory,
            "mean_over_passes": self.mean_over_passes(),
            "probes": None if self.probes is None else [p.to_json() for p in self.probes],
        }


def evaluate(
    messages: list[Message],
    compactor: Compactor,
    conv: Conversation,
    *,
    transcript: str = "",
    turns: str = "step",
    plant_every: int = 8,
    seed: int = 0,
    checkpoints: tuple[int, ...] = CHECKPOINTS,
    on_turn: Callable[[int, int, list[PassReport]], None] | None = None,
) -> tuple[EvalResult, FactTracker]:
    """Replay ``messages`` into ``conv`` and measure retention after every summary-changing pass."""
    messages, planted = plant(messages, plant_every, seed) if plant_every else (list(messages), [])
    tracker = FactTracker(planted)
    taken: list[Checkpoint] = []
    trajectory: list[dict[str, Any]] = []
    outcomes: dict[str, int] = {}

    def turn_done(number: int, total: int, reports: list[PassReport]) -> None:
        for report in reports:
            key = report.outcome if report.kind == MICRO else f"batch {report.outcome}"
            outcomes[key] = outcomes.get(key, 0) + 1
        before = tracker.passes
        if tracker.published(reports):
            point = tracker.measure(compactor.state.summary, compactor.state.summary_tokens)
            trajectory.append({"pass": point.passes, "all": retention(point.kinds, ("all",)),
                               "found": retention(point.kinds, factlib.KINDS)})
            taken.extend(replace(point, passes=c) for c in checkpoints if before < c <= point.passes)
        if on_turn is not None:
            on_turn(number, total, reports)

    replay(messages, conv, compactor, turns=turns, persist=tracker.persist, on_turn=turn_done)
    final = tracker.measure(compactor.state.summary, compactor.state.summary_tokens)
    result = EvalResult(
        transcript=transcript,
        summarizer=getattr(compactor.ctx.summarizer, "model_name", "?"),
        mode=compactor.settings.micro_compact_mode,
        fact_guard=compactor.settings.fact_guard,
        turns=turns,
        planted=len(planted),
        outcomes=outcomes,
        checkpoints=taken,
        final=final,
        trajectory=trajectory,
    )
    return result, tracker


# --- probes -----------------------------------------------------------------------------

_EDIT_TOOLS = {"edit", "write", "multiedit", "notebookedit", "str_replace_editor", "create_file", "apply_patch"}
_SHELL_WRITES = re.compile(
    r"\bsed\s+-i\S*\s+(?:'[^']*'|\"[^\"]*\"|\S+)\s+(\S+)"
    r"|\bcat\s+(?:<<-?\s*'?\w+'?\s*)?>\s*(\S+)"
    r"|\btee\s+(?:-a\s+)?(\S+)"
)


def changed_files(messages: list[Message]) -> list[str]:
    """Paths the assistant wrote to: edit-tool calls, ``sed -i``, ``cat > file``, ``tee``."""
    found: list[str] = []
    for msg in messages:
        for call in msg.tool_calls or []:
            function = call.get("function") or {}
            try:
                args = load_json(function.get("arguments") or "{}", model_output=True)
            except InputError:
                continue
            if not isinstance(args, dict):
                continue
            if str(function.get("name", "")).lower() in _EDIT_TOOLS:
                path = args.get("file_path") or args.get("path") or args.get("notebook_path")
                if isinstance(path, str):
                    found.append(path)
            command = args.get("command") or args.get("cmd")
            if isinstance(command, str):
                for match in _SHELL_WRITES.finditer(command.split("\n", 1)[0]):
                    path = next(g for g in match.groups() if g)
                    if "/" in path or "." in path:
                        found.append(path.strip("'\""))
    return list(dict.fromkeys(found))


@dataclass
class Probe:
    name: str                      # recall | files_changed | next_step | why
    question: str
    expected: list[str]            # exact strings, or word sets for planted facts
    by_words: bool = False

    def score(self, answer: str) -> tuple[int, float]:
        if self.by_words:
            words = set(content_words(answer))
            hits = sum(1 for e in self.expected if _words_present(content_words(e), words))
        else:
            hits = sum(1 for e in self.expected if e in answer)
        return hits, hits / len(self.expected)


def _words_present(wanted: tuple[str, ...], words: set[str]) -> bool:
    return bool(wanted) and sum(1 for w in wanted if w in words) >= WORD_SHARE * len(wanted)


@dataclass
class ProbeResult:
    probe: Probe
    answer: str | None
    hits: int = 0
    score: float | None = None
    error: str | None = None

    def to_json(self) -> dict[str, Any]:
        return {"probe": self.probe.name, "question": self.probe.question, "expected": self.probe.expected,
                "answer": self.answer, "hits": self.hits, "score": self.score, "error": self.error}


def make_probes(tracker: FactTracker, early: int = EARLY_PASSES) -> list[Probe]:
    """Factory-style questions about what the first passes absorbed (later facts if none)."""
    by_first = sorted(tracker.tracked.values(), key=lambda f: f.first_pass)
    probes: list[Probe] = []
    errors = [f.value for f in by_first if f.kind == factlib.ERROR]
    early_errors = [f.value for f in by_first if f.kind == factlib.ERROR and f.first_pass <= early]
    if errors:
        probes.append(Probe("recall", "Earlier in this session, which errors or exceptions came up? Quote them exactly.",
                            (early_errors or errors)[:5]))
    changed = []
    for _, messages in tracker.absorbed:
        changed += changed_files(messages)
    if changed:
        probes.append(Probe("files_changed", "Which files has the assistant created or changed so far? "
                            "List their paths exactly.", list(dict.fromkeys(changed))[:8]))
    facts = [f for f in by_first if f.kind == OPEN_QUESTION]
    if facts:
        probes.append(Probe("next_step", "Which open questions or next steps were noted earlier in this session?",
                            [f.value for f in facts[:3]], by_words=True))
    decisions = [f for f in by_first if f.kind == DECISION]
    planted_by_text = {p.text: p for p in tracker.planted.values()}
    if decisions and decisions[0].value in planted_by_text:
        first = planted_by_text[decisions[0].value]
        probes.append(Probe("why", f"Why did the assistant decide to use {first.subject}?", [first.detail],
                            by_words=True))
    return probes


def run_probes(chat: ChatClient, messages: list[Message], probes: list[Probe], *, max_tokens: int = 256) -> list[ProbeResult]:
    """Ask ``chat`` (a ChatClient) each probe on the compacted transcript; score the answers."""
    from hermes_tui.chat.client import ChatError

    context = wire_view(messages)
    results = []
    for probe in probes:
        question = {"role": "user", "content": f"{probe.question} Answer briefly, from this conversation only."}
        try:
            done = chat.complete(context + [question], max_tokens=max_tokens)
        except ChatError as exc:
            results.append(ProbeResult(probe, None, error=f"{exc.kind}: {exc}"))
            continue
        hits, score = probe.score(done.text)
        results.append(ProbeResult(probe, done.text, hits, score))
    return results


# --- text -------------------------------------------------------------------------------


def _cell(bucket: dict[str, int]) -> str:
    if not bucket["total"]:
        return "-"
    return f"{bucket['present']}/{bucket['total']} {100 * bucket['present'] / bucket['total']:.0f}%"


def _share(value: float | None) -> str:
    return "-" if value is None else f"{100 * value:.0f}%"


def format_table(points: list[Checkpoint], labels: list[str], attr: str = "kinds", indent: str = "  ") -> list[str]:
    """Rows per fact kind, a column per checkpoint: present/total and the share."""
    header = ["kind"] + labels
    rows = [header] + [[kind] + [_cell(getattr(p, attr)[kind]) for p in points] for kind in KINDS + ("all",)]
    widths = [max(len(r[i]) for r in rows) for i in range(len(header))]
    return [indent + "  ".join(c.ljust(w) if i == 0 else c.rjust(w) for i, (c, w) in enumerate(zip(r, widths)))
            for r in rows]


def format_result(result: EvalResult) -> str:
    points = result.checkpoints + [result.final]
    labels = [f"after {p.passes}" for p in result.checkpoints] + [f"final ({result.final.passes})"]
    mix = ", ".join(f"{k} {v}" for k, v in sorted(result.outcomes.items())) or "none"
    lines = [
        f"Fidelity of the rolling summary: {result.transcript}",
        f"  summarizer {result.summarizer}, mode {result.mode}, fact guard {'on' if result.fact_guard else 'off'}, "
        f"a pass per {'agent step' if result.turns == 'step' else 'user turn'}",
        f"  passes that changed the summary: {result.final.passes} (outcomes: {mix})",
        f"  facts tracked: {result.final.kinds['all']['total']} "
        f"({result.planted} planted decisions/open questions, "
        f"{result.final.kinds[DECISION]['total'] + result.final.kinds[OPEN_QUESTION]['total']} of them absorbed)",
        f"  final summary: {result.final.summary_tokens:,} tokens; retention of found facts averaged over the passes: "
        f"{_share(result.mean_over_passes()['found'])}",
        "",
        "Retention of every fact absorbed so far (present in the rolling summary / absorbed)",
        *format_table(points, labels),
        "",
        f"Early facts (absorbed in the first {EARLY_PASSES} passes) still present",
        *format_table(points, labels, "early"),
        "",
        "Found facts must appear verbatim (case-sensitive); planted decisions and open questions count",
        f"when {WORD_SHARE:.0%} of their content words are in the summary. The fact guard keeps found facts",
        "only, so planted ones measure the summarizer alone.",
    ]
    if result.probes is not None:
        lines += ["", "Probes (the chat model, on the compacted transcript)"]
        if not result.probes:
            lines.append("  no probe had an expected answer (no errors, changed files or planted facts absorbed)")
        for p in result.probes:
            if p.error:
                lines.append(f"  {p.probe.name:<14} error: {p.error}")
            else:
                lines.append(f"  {p.probe.name:<14} {p.hits}/{len(p.probe.expected)} expected facts in the answer"
                             f"  ({p.score:.0%})")
    return "\n".join(lines)
