"""The compactor: runs passes, publishes them, and keeps the session's compaction state.

A pass is planned (the summarizer is called; nothing changes) and then published:
the store is written first, and only if that succeeds is the splice applied to the
in-memory conversation and the new state adopted. Every pass ends in exactly one
telemetry line. ``finalize_turn`` is best-effort: any exception is logged and the
conversation is left as it was.

What runs after an exchange is the policy's decision (``policy.py``); several micro
passes of one decision are planned one on top of the other (``plan_micro_passes``) and
published together, so the chat model's cache sees one splice.

The trim stage (``trim.py``, no model) runs first wherever passes run: its in-place
replacements land in the same publish as the decision's passes (one cache break), and the
passes then fold the trimmed exchanges (less for a slow summarizer to read). On its own it
runs only when the transcript is over the threshold (before batch compaction, which it may
make unnecessary) and in the fit guard: an in-place change breaks the chat model's prefix
cache from the first trimmed message on, so it rides on splices that happen anyway except
when the window would otherwise overflow.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from hermes_tui.compaction import telemetry
from hermes_tui.compaction.batch import plan_batch
from hermes_tui.compaction.micro import PassContext, plan_micro_pass
from hermes_tui.compaction.policy import CompactionPolicy, Decision
from hermes_tui.compaction.state import (
    ABSORBED,
    DEFRAG,
    DEFRAG_FAILED,
    ERROR,
    EXCHANGE_SKIPPED,
    MAX_CONSECUTIVE_FAILURES,
    NOTHING_TO_ABSORB,
    SKIPPED_FLAG,
    STALE,
    STORE_FAILED,
    SUMMARIZE_FAILED,
    MicroState,
    PassResult,
    cursor_is_valid,
    normalize_cursor,
    recover_state,
)
from hermes_tui.compaction.trim import TRIM, TRIMMED, TrimResult, plan_trim
from hermes_tui.compaction.window import head_end
from hermes_tui.config import CompressionConfig
from hermes_tui.core.conversation import Conversation, StaleSplice
from hermes_tui.core.tokens import TokenCounter, count_message, count_messages
from hermes_tui.core.transcript import BATCH, MICRO, Message

log = logging.getLogger("hermes_tui.compaction")

# Said once per session, when the floor policy first folds user messages (README
# "What the user typed").
FIRST_FOLD_NOTICE = (
    "{n} of your older messages left the context so that it stays inside the window. They are "
    "kept in the archive and quoted word for word in the summary while they fit."
)

# Called with a published-to-be result before the in-memory splice; raising means
# the store did not take it, and the pass is then not published (``store_failed``).
Persist = Callable[[PassResult], None]


@dataclass
class PassReport:
    """A published pass, as the UI and the CLI see it: the telemetry payload."""

    kind: str
    outcome: str
    fields: dict[str, Any] = field(default_factory=dict)
    detail: str | None = None  # why it failed, in one redacted line (the telemetry holds counts only)
    notice: str | None = None  # something the user should hear once (the first user messages folded)


def pass_cost(stats: dict[str, Any], duration_ms: int | None) -> dict[str, Any]:
    """Where a pass's time went: prefill (prompt minus cached), generation, and the rest.

    A backend that does not report cached tokens is taken to have prefilled the whole
    prompt. Nulls where the summarizer did not say (the extractive one has no prompt).
    """
    prompt, cached = stats.get("prompt_tokens"), stats.get("cached_tokens")
    summarizer_ms = stats.get("summarizer_ms")
    return {
        "prefill_tokens": None if prompt is None else max(0, prompt - (cached or 0)),
        "generated_tokens": stats.get("completion_tokens"),
        "overhead_ms": None if summarizer_ms is None or duration_ms is None else max(0, duration_ms - summarizer_ms),
        "prompt_tps": _rounded(stats.get("prompt_tps")),
        "generation_tps": _rounded(stats.get("generation_tps")),
    }


def counts_as_pass(result: PassResult) -> bool:
    """A micro pass that found something to work on, as Hermes counts its passes: one that
    found nothing to absorb did no work and is not counted (it still logs its line)."""
    return result.kind == MICRO and result.outcome != NOTHING_TO_ABSORB


def _rounded(value: float | None) -> float | None:
    return None if value is None else round(value, 1)


def counted_state(result: PassResult, counter: TokenCounter) -> MicroState:
    """The state a published ``result`` leaves: its own, with the pass and the tokens its
    splice saved counted (the marker carries the running total)."""
    state = result.state
    if result.splice is not None:
        removed = count_messages(counter, list(result.splice.archived))
        saved = removed - count_message(counter, result.splice.marker)
        state = state.evolve(tokens_saved_total=state.tokens_saved_total + saved)
        result.splice.marker.meta["tokens_saved_total"] = state.tokens_saved_total
    if counts_as_pass(result):
        state = state.evolve(passes_total=state.passes_total + 1)
    return state


def trim_counted(state: MicroState, result: PassResult) -> MicroState:
    """``state`` with the tokens a published trim saved counted in ``tokens_saved_total``."""
    saved = result.stats.get("trimmed_tokens_before", 0) - result.stats.get("trimmed_tokens_after", 0)
    return state.evolve(tokens_saved_total=state.tokens_saved_total + max(0, saved))


class Compactor:
    def __init__(self, ctx: PassContext, *, session_id: str = "", main_model: str | None = None):
        self.ctx = ctx
        self.session_id = session_id
        self.main_model = main_model
        self.state = MicroState()
        self.policy = CompactionPolicy(ctx.window)
        self.batch_compactions = 0

    @property
    def settings(self) -> CompressionConfig:
        """The ``compression`` section the passes read (their window's)."""
        return self.ctx.settings

    # --- the turn hook ------------------------------------------------------------
    def decide(self, conv: Conversation, *, turn_ended: bool = True) -> Decision:
        """Count one completed exchange with the policy and say what runs now (the one rule:
        the app, the agent loop and replay all ask here)."""
        return self.policy.after_exchange(conv.total_tokens, turn_ended=turn_ended)

    def finalize_turn(
        self, conv: Conversation, persist: Persist | None = None, *, turn_ended: bool = True
    ) -> list[PassReport]:
        """After a completed exchange, synchronously: what the policy decided (micro passes,
        or batch), then what the policy says follows the micro splice (``after_splice``)."""
        decision = self.decide(conv, turn_ended=turn_ended)
        reports: list[PassReport] = []
        if not self.settings.enabled:
            return reports
        over = conv.total_tokens > self.ctx.window.threshold_tokens
        if decision.kind == MICRO or over:
            reports += self.trim(conv, persist)
        if decision.kind == MICRO:
            micro = self.micro_passes(conv, decision, persist)
            if reports and not micro:  # the trim alone brought it under the mark
                self.policy.landed(conv.total_tokens)
            reports += micro
            if self.policy.after_splice(MICRO, conv.total_tokens) == BATCH:
                reports.append(self.compress(conv, persist=persist))
        elif decision.kind == BATCH and conv.total_tokens > self.ctx.window.threshold_tokens:
            # (the trim before it may have been enough)
            reports.append(self.compress(conv, persist=persist))
        return reports

    # --- the trim stage -------------------------------------------------------------
    def plan_trim(
        self, messages: list[Message], *, epoch: int | None = None, total_tokens: int | None = None
    ) -> TrimResult | None:
        """The trim of ``messages`` (no model, nothing changes), or None: trim off, nothing bulky.
        Over the threshold the tail is trimmed too when no pass could bring it back (trim.py)."""
        if not (self.settings.enabled and self.settings.trim):
            return None
        started = time.perf_counter()
        result = plan_trim(
            messages, self.ctx.counter, protect_first_n=self.settings.protect_first_n,
            tail_budget=self.ctx.window.tail_token_budget, threshold_tokens=self.settings.trim_threshold_tokens,
            state=self.state, window_tokens=self.ctx.window.threshold_tokens, total_tokens=total_tokens,
        )
        if result is not None:
            result.epoch = epoch
            result.stats["duration_ms"] = round((time.perf_counter() - started) * 1000)
        return result

    def trim(self, conv: Conversation, persist: Persist | None = None) -> list[PassReport]:
        """Trim now and publish it: no report when there is nothing to trim."""
        try:
            result = self.plan_trim(list(conv.messages), epoch=conv.epoch, total_tokens=conv.total_tokens)
        except Exception:  # best-effort: a bug must not break the session
            log.exception("trim raised; the transcript is unchanged")
            return []
        return [] if result is None else [self.publish(conv, result, persist)]

    def micro_passes(self, conv: Conversation, decision: Decision, persist: Persist | None = None) -> list[PassReport]:
        """The passes of one decision, back to back (no chat request between them)."""
        reports: list[PassReport] = []
        while decision.down_to is None or conv.total_tokens > decision.down_to:
            reports.append(self.micro_pass(conv, persist))
            if not CompactionPolicy.again(decision, reports[-1].outcome, conv.total_tokens, len(reports)):
                break
        if reports:
            self.policy.landed(conv.total_tokens)
        return reports

    def plan_micro_passes(
        self, messages: list[Message], decision: Decision, *, epoch: int | None = None,
        publish_trim: Callable[[TrimResult], bool] | None = None,
    ) -> list[PassResult]:
        """Plan the passes of one decision on a copy, each on the result of the one before
        (summarizer calls; nothing changes). ``publish_all`` then applies them together.

        ``publish_trim``: offered the trim (no model) before the passes are planned; when it
        says it published it, the trim is not among the results (the passes are planned on
        the trimmed copy either way)."""
        work = Conversation(messages, counter=self.ctx.counter)
        state = self.state
        results: list[PassResult] = []
        try:
            trimmed = self.plan_trim(list(work.messages), epoch=epoch, total_tokens=work.total_tokens)
        except Exception:
            log.exception("trim raised while planning; the passes go on without it")
            trimmed = None
        if trimmed is not None:
            if publish_trim is None or not publish_trim(trimmed):
                results.append(trimmed)
            assert trimmed.replacement is not None  # a trim plan always carries one (compaction.trim)
            work.apply(trimmed.replacement)
        trims_planned = len(results)
        while decision.down_to is None or work.total_tokens > decision.down_to:
            try:
                result = plan_micro_pass(list(work.messages), state, self.ctx, total_tokens=work.total_tokens)
            except Exception:
                if not any(r.kind == MICRO for r in results):
                    raise
                log.exception("micro pass raised while planning; the passes planned before it still land")
                break
            result.epoch = epoch
            results.append(result)
            if result.splice is not None:
                work.apply(result.splice)
            state = counted_state(result, self.ctx.counter)
            if not CompactionPolicy.again(decision, result.outcome, work.total_tokens, len(results) - trims_planned):
                break
        if results:  # where the passes got to on their snapshot, whatever is appended meanwhile
            results[-1].stats["tokens_reached"] = work.total_tokens
        return results

    def publish_all(
        self, conv: Conversation, results: list[PassResult], persist: Persist | None = None
    ) -> list[PassReport]:
        """Publish planned passes in order; after one that did not land as planned, the rest
        (planned on top of it) are dropped."""
        reports = []
        for result in results:
            reports.append(self.publish(conv, result, persist))
            if reports[-1].outcome != result.outcome:
                break
        if any(r.kind in (MICRO, TRIM) for r in reports):
            reached = results[len(reports) - 1].stats.get("tokens_reached")
            self.policy.landed(conv.total_tokens if reached is None else min(reached, conv.total_tokens))
        return reports

    def micro_pass(self, conv: Conversation, persist: Persist | None = None) -> PassReport:
        return self._run(
            MICRO, conv, persist,
            lambda: plan_micro_pass(list(conv.messages), self.state, self.ctx, total_tokens=conv.total_tokens),
        )

    def compress(self, conv: Conversation, *, focus: str | None = None, persist: Persist | None = None) -> PassReport:
        """Batch compaction now (threshold crossed, or ``/compact``)."""
        return self._run(BATCH, conv, persist, lambda: plan_batch(list(conv.messages), self.state, self.ctx, focus))

    def _run(self, kind: str, conv: Conversation, persist: Persist | None, plan: Callable[[], PassResult]) -> PassReport:
        started = time.perf_counter()
        epoch = conv.epoch
        try:
            result = plan()
            result.epoch = epoch
        except Exception as exc:  # best-effort: a bug must not break the session
            log.exception("%s compaction pass raised; the transcript is unchanged", kind)
            result = PassResult(kind, ERROR, self.state, failure=type(exc).__name__)
        return self.publish(conv, result, persist, started=started)

    # --- publishing ---------------------------------------------------------------
    def publish(
        self, conv: Conversation, result: PassResult, persist: Persist | None = None, *, started: float | None = None
    ) -> PassReport:
        """Store, then splice, then adopt the state; any failure leaves everything as it was."""
        messages_before, tokens_before = len(conv), conv.total_tokens
        folded_before = self.state.users_folded_total
        outcome, failure, state = result.outcome, result.failure, result.state
        replacement = result.replacement if isinstance(result, TrimResult) else None
        try:
            if result.epoch is not None and result.epoch != conv.epoch:
                raise StaleSplice("the transcript was replaced while the pass ran")
            if result.splice is not None:
                conv.check(result.splice)
            if replacement is not None:
                conv.check(replacement)
            # A trim moves nothing the state tracks (cursor, summary): the state stays the live
            # one, with what the trim saved counted.
            state = trim_counted(self.state, result) if replacement is not None else counted_state(result, conv.counter)
            if persist is not None and (result.splice is not None or result.skipped or replacement is not None):
                persist(result)
            for msg in result.skipped:
                msg.meta[SKIPPED_FLAG] = True
            if replacement is not None:
                conv.apply(replacement)
            if result.splice is not None:
                conv.apply(result.splice)
            self.state = state
        except StaleSplice:  # dropped unseen and planned again: not a pass of its own
            outcome, failure = STALE, None
        except Exception as exc:  # noqa: BLE001 - the store refused: nothing is published
            log.error("compaction store write failed (%s: %s); the transcript is unchanged", type(exc).__name__, exc)
            outcome, failure = STORE_FAILED, type(exc).__name__
            self.state = self.state.evolve(passes_total=self.state.passes_total + counts_as_pass(result))
        fields = self._telemetry(result, outcome, failure, messages_before, tokens_before, conv, started)
        detail = result.detail if outcome == result.outcome else None
        notice = None
        if folded_before == 0 and self.state.users_folded_total > 0:
            notice = FIRST_FOLD_NOTICE.format(n=self.state.users_folded_total)
            telemetry.log_human(notice)
        self._human_lines(result, outcome, fields, detail)
        if result.kind == MICRO:
            telemetry.log_micro(fields)
        elif result.kind == TRIM:
            telemetry.log_trim(fields)
        else:
            if outcome == "compressed":
                self.batch_compactions += 1
            telemetry.log_batch(fields)
        return PassReport(result.kind, outcome, fields, detail=detail, notice=notice)

    # --- cursor, for tests and the UI --------------------------------------------
    def cursor(self, messages: list[Message]) -> int:
        """The normalized cursor: from memory when valid, else recovered from the transcript."""
        state = self.state
        if not cursor_is_valid(messages, state):
            state = recover_state(messages, head_end(messages, self.settings.protect_first_n), state)
        return normalize_cursor(messages, max(state.cursor or 0, head_end(messages, self.settings.protect_first_n)))

    @property
    def rolling_summary(self) -> str:
        return self.state.summary

    # --- lines ----------------------------------------------------------------------
    def _telemetry(
        self, result: PassResult, outcome: str, failure: str | None,
        messages_before: int, tokens_before: int, conv: Conversation, started: float | None,
    ) -> dict[str, Any]:
        window = self.ctx.window
        limit_known = window.limit is not None
        stats = result.stats
        fields: dict[str, Any] = {
            "event": "micro_compaction" if result.kind == MICRO else "batch_compaction",
            "session_id": self.session_id,
            "outcome": outcome,
            "failure": failure,
            "messages_before": messages_before,
            "messages_after": len(conv),
            "tokens_before": tokens_before,
            "tokens_after": conv.total_tokens,
            "tokens_delta": conv.total_tokens - tokens_before,
            "duration_ms": round((time.perf_counter() - started) * 1000) if started else stats.get("duration_ms"),
            "threshold_tokens": window.threshold_tokens if limit_known else None,
            "context_limit": window.limit,
            "occupancy_pct": window.occupancy_pct(conv.total_tokens),
            "main_model": self.main_model,
            "aux_model": getattr(self.ctx.summarizer, "model_name", None),
            "prompt_tokens": stats.get("prompt_tokens"),
            "completion_tokens": stats.get("completion_tokens"),
            "users_folded": stats.get("users_folded") if outcome == result.outcome else None,
            "quotes": len(self.state.quotes),
        }
        if result.kind == TRIM:
            fields["event"] = "trim_compaction"
            fields.update({key: stats.get(key) for key in ("results_trimmed", "trimmed_tokens_before",
                                                           "trimmed_tokens_after")})
            fields["tail_results_trimmed"] = stats.get("tail_results_trimmed", 0)
            fields["tokens_saved_total"] = self.state.tokens_saved_total
        elif result.kind == MICRO:
            fields.update(
                exchange_tokens=stats.get("exchange_tokens"),
                rolling_summary_tokens=self.state.summary_tokens,
                cursor=stats.get("cursor"),
                passes_total=self.state.passes_total,
                tokens_saved_total=self.state.tokens_saved_total,
                cached_tokens=stats.get("cached_tokens"),
                summarizer_ms=stats.get("summarizer_ms"),
                mode=self.settings.micro_compact_mode,
                facts_kept=stats.get("facts_kept"),
                facts_added=stats.get("facts_added"),
                # Who wrote what was absorbed, and why the model's answers were not taken (reasons only).
                written_by=stats.get("written_by"),
                rejected=stats.get("rejected"),
                model_calls=stats.get("model_calls"),
                # Why a defrag ran, and the tokens of the summary's piece it consolidated (None:
                # the whole summary and the middle).
                defrag_reason=stats.get("defrag_reason"),
                defrag_piece_tokens=stats.get("defrag_piece_tokens"),
                # Failures in a row on the exchange a skip left verbatim (None: skipped at once,
                # its own notes larger than it).
                consecutive_failures=stats.get("failures"),
                **pass_cost(stats, fields["duration_ms"]),
            )
        else:
            fields.update(
                absorbed_tokens=stats.get("absorbed_tokens"),
                summary_tokens=stats.get("summary_tokens"),
                summarizer_calls=stats.get("summarizer_calls"),
                chunks_by_notes=stats.get("chunks_by_notes"),
                rejected=stats.get("rejected"),
                facts_kept=stats.get("facts_kept"),
                # Tokens of the summary's oldest notes that gave way (nothing else was left to
                # absorb); None when the batch absorbed messages.
                summary_gave_way_tokens=stats.get("summary_gave_way_tokens"),
            )
        return fields

    def _human_lines(self, result: PassResult, outcome: str, fields: dict[str, Any], detail: str | None) -> None:
        before, after = fields["messages_before"], fields["messages_after"]
        said = f": {detail}" if detail else ""
        if result.kind == TRIM:
            if outcome == TRIMMED:
                telemetry.log_human(
                    f"Trim: {fields['results_trimmed']} tool results, {fields['trimmed_tokens_before']:,} -> "
                    f"{fields['trimmed_tokens_after']:,} tokens (originals archived)"
                )
        elif outcome == ABSORBED:
            telemetry.log_human(f"Micro-compaction: {before} -> {after} messages")
        elif outcome == DEFRAG:
            telemetry.log_human(
                f"Micro-compaction defrag: rolling summary re-summarized ({len(self.state.summary)} chars)"
            )
        elif outcome == EXCHANGE_SKIPPED:
            why = (f"after {MAX_CONSECUTIVE_FAILURES} consecutive failures" if result.stats.get("failures")
                   else "at once: its own notes are larger than it")
            telemetry.log_human(f"Micro-compaction: skipping exchange at cursor {fields.get('cursor')} {why}{said}")
        elif outcome == SUMMARIZE_FAILED:
            telemetry.log_human(
                f"Micro-compaction failed ({result.failure}) on exchange at cursor {fields.get('cursor')}, "
                f"attempt {result.stats.get('failures')} of {MAX_CONSECUTIVE_FAILURES}{said}"
            )
        elif outcome == DEFRAG_FAILED:
            telemetry.log_human(f"Micro-compaction defrag failed ({result.failure}); backing off{said}")
        elif result.kind != MICRO and outcome == "compressed":
            gave_way = result.stats.get("summary_gave_way_tokens")
            why = (f" (nothing else left to absorb: the summary's oldest notes gave way, {gave_way:,} tokens)"
                   if gave_way is not None else "")
            telemetry.log_human(f"Context compression: {before} -> {after} messages{why}")
        elif result.kind != MICRO and detail:
            telemetry.log_human(f"Context compression failed ({result.failure}){said}")
