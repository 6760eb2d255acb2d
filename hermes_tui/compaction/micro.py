"""One micro-compaction pass: fold the oldest un-absorbed exchange into the rolling summary.

``plan_micro_pass`` calls the summarizer and returns a ``PassResult``; it changes
nothing. The compactor publishes the result (store first, then the in-memory
splice), so a pass that fails at any point leaves the transcript as it was.
Everything here costs O(exchange): the head and tail walks are bounded, token
counts come from per-message caches, and state is validated, not rebuilt.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

from hermes_tui.compaction import checks, prompts
from hermes_tui.compaction.redaction import redact, redact_message
from hermes_tui.compaction.state import (
    ABSORBED,
    DEFRAG,
    DEFRAG_FAILED,
    EXCHANGE_SKIPPED,
    MAX_CONSECUTIVE_FAILURES,
    NOTHING_TO_ABSORB,
    SUMMARIZE_FAILED,
    MicroState,
    PassResult,
    cursor_is_valid,
    normalize_cursor,
    recover_state,
)
from hermes_tui.compaction.summarize import SummaryRequest, run_summarizer
from hermes_tui.compaction.window import ContextWindow, head_end, tail_start
from hermes_tui.conversation import Splice
from hermes_tui.summarizers.base import Summarizer, SummarizerError
from hermes_tui.tokens import TokenCounter, count_messages
from hermes_tui.transcript import MICRO, Message, exchange_end, make_marker

DEFRAG_MAX_RATIO = 0.6
# Share of the compaction threshold past which a backlog of waiting exchanges is
# folded in one defrag rather than one exchange per turn.
PRESSURE_SHARE = 0.75


@dataclass(frozen=True)
class PassContext:
    """Everything a pass reads besides the transcript and the state."""

    summarizer: Summarizer
    counter: TokenCounter
    window: ContextWindow
    protect_first_n: int = 3
    defrag_threshold_tokens: int = 2000
    max_tokens_cap: int | None = None  # config auxiliary.compression.max_tokens
    pressure_share: float | None = PRESSURE_SHARE  # None: defrag on summary size only, as the spec


def plan_micro_pass(
    messages: list[Message], state: MicroState, ctx: PassContext, *, total_tokens: int | None = None
) -> PassResult:
    """Plan one pass. ``total_tokens`` (the transcript's, kept by Conversation) enables the
    pressure trigger without recounting the transcript."""
    started = time.perf_counter()
    head = head_end(messages, ctx.protect_first_n)
    tail = tail_start(messages, ctx.counter, ctx.window.tail_token_budget)
    if not cursor_is_valid(messages, state):
        state = recover_state(messages, head, state)
        state = state.evolve(summary_tokens=ctx.counter.count_text(state.summary))
    cursor = normalize_cursor(messages, max(state.cursor or 0, head))

    reason = _defrag_reason(messages, state, ctx, cursor, tail, total_tokens)
    if reason and state.defrag_wait == 0:
        result = _defrag(messages, state, ctx, head, tail)
        result.stats["defrag_reason"] = reason
    else:
        if reason:
            state = state.evolve(defrag_wait=state.defrag_wait - 1)
        result = _absorb(messages, state, ctx, cursor, tail)
    result.stats.setdefault("cursor", cursor)
    result.stats["duration_ms"] = round((time.perf_counter() - started) * 1000)
    return result


def _defrag_reason(
    messages: list[Message], state: MicroState, ctx: PassContext, cursor: int, tail: int, total_tokens: int | None
) -> str | None:
    """Why this pass should defrag, if it should.

    The spec's trigger is a baggy summary. We add window pressure: one exchange per
    turn cannot keep up when a single step lands more than the tail budget (a large
    tool output pushes several exchanges out of the tail at once), and the backlog
    would otherwise sit there until batch compaction stalls the session. Defrag is
    the spec's own way to fold "whatever middle remains" in one shot.
    """
    if state.summary_tokens > ctx.defrag_threshold_tokens:
        return "summary_size"
    if ctx.pressure_share is None or total_tokens is None:
        return None
    if total_tokens < ctx.pressure_share * ctx.window.threshold_tokens:
        return None
    end = exchange_end(messages, cursor) if cursor < tail else None
    if end is None or normalize_cursor(messages, end) >= tail:
        return None  # at most one exchange waiting: an ordinary pass absorbs it
    return "window_pressure"


def _absorb(messages: list[Message], state: MicroState, ctx: PassContext, cursor: int, tail: int) -> PassResult:
    end = exchange_end(messages, cursor) if cursor < tail else None
    if end is None or end > tail:
        return PassResult(MICRO, NOTHING_TO_ABSORB, state, stats={"cursor": cursor})
    exchange = messages[cursor:end]
    exchange_tokens = count_messages(ctx.counter, exchange)
    replaced_tokens = exchange_tokens + state.summary_tokens
    stats = {"cursor": cursor, "exchange_tokens": exchange_tokens}

    request = SummaryRequest("absorb", redact(state.summary), [redact_message(m) for m in exchange])
    max_tokens = generation_budget(ctx, replaced_tokens)
    try:
        completion = run_summarizer(ctx.summarizer, request, max_tokens=max_tokens)
    except SummarizerError as exc:
        return _failed(state, exchange, stats, exc.kind, end)
    stats.update(_usage(completion))
    summary = redact(checks.clean_summary(completion.text))
    summary_tokens = ctx.counter.count_text(summary)
    problem = checks.summary_problem(
        summary, finish_reason=completion.finish_reason, new_tokens=summary_tokens, replaced_tokens=replaced_tokens
    )
    if problem:
        return _failed(state, exchange, stats, problem, end)

    removed = _with_old_marker(messages, state, range(cursor, end))
    marker = _marker(summary, summary_tokens, [m.id for m in exchange], state)
    splice = Splice(tuple(removed), marker, tuple(messages[i] for i, _ in removed))
    new_state = _after_splice(state, splice, summary, summary_tokens, failing_id=None, failures=0)
    stats["rolling_summary_tokens"] = summary_tokens
    return PassResult(MICRO, ABSORBED, new_state, splice=splice, stats=stats)


def _defrag(messages: list[Message], state: MicroState, ctx: PassContext, head: int, tail: int) -> PassResult:
    """Re-summarize the summary and whatever middle remains, in one shot; it must shrink."""
    middle = [i for i in range(head, tail) if not _never_absorbed(messages[i]) and i != state.marker_index]
    middle_messages = [messages[i] for i in middle]
    input_tokens = state.summary_tokens + count_messages(ctx.counter, middle_messages)
    stats = {"cursor": state.cursor, "exchange_tokens": count_messages(ctx.counter, middle_messages)}

    request = SummaryRequest("defrag", redact(state.summary), [redact_message(m) for m in middle_messages])
    try:
        completion = run_summarizer(ctx.summarizer, request, max_tokens=generation_budget(ctx, input_tokens, DEFRAG_MAX_RATIO))
        stats.update(_usage(completion))
        summary = redact(checks.clean_summary(completion.text))
        summary_tokens = ctx.counter.count_text(summary)
        problem = checks.defrag_problem(
            summary, finish_reason=completion.finish_reason, new_tokens=summary_tokens,
            input_tokens=input_tokens, max_ratio=DEFRAG_MAX_RATIO,
        )
    except SummarizerError as exc:
        problem = exc.kind
    if problem:
        # Back off so a model that cannot shrink the summary does not loop on defrag.
        failures = state.defrag_failures + 1
        new_state = state.evolve(defrag_failures=failures, defrag_wait=2 ** min(failures, 4))
        return PassResult(MICRO, DEFRAG_FAILED, new_state, failure=problem, stats=stats)

    removed = _with_old_marker(messages, state, middle)
    marker = _marker(summary, summary_tokens, [m.id for m in middle_messages], state)
    splice = Splice(tuple(removed), marker, tuple(messages[i] for i, _ in removed))
    new_state = _after_splice(state, splice, summary, summary_tokens, failing_id=None, failures=0)
    new_state = new_state.evolve(defrag_failures=0, defrag_wait=0)
    stats["rolling_summary_tokens"] = summary_tokens
    return PassResult(MICRO, DEFRAG, new_state, splice=splice, stats=stats)


def _failed(state: MicroState, exchange: list[Message], stats: dict, reason: str, end: int) -> PassResult:
    """Count a failure; the third in a row on the same exchange skips it."""
    first_id = exchange[0].id
    failures = state.failures + 1 if state.failing_id == first_id else 1
    if failures < MAX_CONSECUTIVE_FAILURES:
        new_state = state.evolve(failing_id=first_id, failures=failures)
        return PassResult(MICRO, SUMMARIZE_FAILED, new_state, failure=reason, stats={**stats, "failures": failures})
    new_state = state.evolve(cursor=end, cursor_anchor=exchange[-1].id, failing_id=None, failures=0)
    return PassResult(
        MICRO, EXCHANGE_SKIPPED, new_state, failure=reason, skipped=tuple(exchange), stats={**stats, "failures": failures}
    )


def _never_absorbed(msg: Message) -> bool:
    return msg.role in ("user", "system") or msg.is_marker


def _with_old_marker(messages: list[Message], state: MicroState, indices) -> list[tuple[int, str]]:
    """The indices to remove: the absorbed messages plus the marker they supersede."""
    removed = [(i, messages[i].id) for i in indices]
    if state.marker_index is not None:
        removed.append((state.marker_index, state.marker_id))
    return sorted(set(removed))


def _marker(summary: str, summary_tokens: int, covers: list[str], state: MicroState) -> Message:
    return make_marker(
        MICRO,
        summary,
        covers=covers,
        extra={
            "supersedes": state.marker_id,
            "summary_tokens": summary_tokens,
            "passes_total": state.passes_total + 1,
        },
    )


def _after_splice(state: MicroState, splice: Splice, summary: str, summary_tokens: int, **changes) -> MicroState:
    marker_index = splice.marker_index
    return state.evolve(
        cursor=marker_index + 1,
        cursor_anchor=splice.marker.id,
        summary=summary,
        summary_tokens=summary_tokens,
        marker_index=marker_index,
        marker_id=splice.marker.id,
        **changes,
    )


def generation_budget(ctx: PassContext, replaced_tokens: int, ratio: float = 1.0) -> int:
    """Cap generation just past what the checks would accept: more could only be rejected.

    Our count and the model's own tokenizer can differ, hence the margin.
    """
    budget = max(32, int(replaced_tokens * ratio * 1.25) + 64)
    return budget if ctx.max_tokens_cap is None else min(budget, ctx.max_tokens_cap)


def _usage(completion) -> dict:
    return {
        "prompt_tokens": completion.prompt_tokens,
        "completion_tokens": completion.completion_tokens,
        "cached_tokens": completion.cached_tokens,
        "summarizer_ms": round(completion.duration_s * 1000),
    }

