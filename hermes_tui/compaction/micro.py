"""One micro-compaction pass: fold the oldest un-absorbed exchange into the rolling summary.

``plan_micro_pass`` calls the summarizer and returns a ``PassResult``; it changes
nothing. The compactor publishes the result (store first, then the in-memory
splice), so a pass that fails at any point leaves the transcript as it was.
Everything here costs O(exchange): the head and tail walks are bounded, token
counts come from per-message caches, and state is validated, not rebuilt.

Two modes (``compression.micro_compact_mode``). **merge**: the model rewrites the
whole summary with the exchange folded in, so a pass generates O(summary) tokens.
**append**: the model writes only the lines the exchange adds and the engine appends
them, so a pass generates O(exchange) tokens and the summary is a byte-stable prefix
of the next pass's prompt (a prefix cache prefills only what is new); defrag
consolidates. With the fact guard on (``compression.fact_guard``), key facts of the
exchange that the model's summary dropped are kept in a bounded "Facts" section
(``facts.py``).
"""

from __future__ import annotations

import math
import time
from collections.abc import Iterable
from dataclasses import dataclass, replace
from typing import Any

from hermes_tui.compaction import checks, facts, notes, prompts, user_floor
from hermes_tui.compaction.markers import is_marker
from hermes_tui.compaction.redaction import redact, redact_message
from hermes_tui.compaction.sizing import ModelSpeed, speed_for
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
from hermes_tui.compaction.summarizer import Completion, Summarizer, SummarizerError, runs_a_model
from hermes_tui.compaction.summary_request import SummaryRequest, failure_detail, run_summarizer
from hermes_tui.compaction.window import ContextWindow, head_end, tail_start
from hermes_tui.config import AuxiliaryCompressionConfig, CompressionConfig
from hermes_tui.core.conversation import Splice
from hermes_tui.core.tokens import TokenCounter, count_message, count_messages
from hermes_tui.core.transcript import MICRO, Message, exchange_end, make_marker

DEFRAG_MAX_RATIO = 0.6
MERGE, APPEND = "merge", "append"
MODES = (MERGE, APPEND)
# The Facts section's budget, as a share of the defrag threshold (2000 -> 300 tokens), on
# top of it: the summary is at most 1.15x the threshold before a defrag.
FACTS_BUDGET_SHARE = 0.15
# Share of the compaction threshold past which a backlog of waiting exchanges is
# folded in one defrag rather than one exchange per turn.
PRESSURE_SHARE = 0.75


@dataclass(frozen=True)
class PassContext:
    """Everything a pass reads besides the transcript and the state.

    The ``compression`` section is the window's (``settings``): one object, so the pass and
    the window it measures with cannot disagree on a value.
    """

    summarizer: Summarizer
    counter: TokenCounter
    window: ContextWindow
    # Defaults: the config schema's (auxiliary.compression.max_tokens, .timeout below).
    max_tokens_cap: int | None = AuxiliaryCompressionConfig().max_tokens
    pressure_share: float | None = PRESSURE_SHARE  # None: defrag on summary size only, as the spec
    # Append mode: a step under this many tokens gets its deterministic notes without a model
    # call: notes about it would save next to nothing, and a small local model takes 5-40 s.
    notes_below_tokens: int = 0
    # The compression model's speeds, learnt from its calls, and the time a call may take:
    # defrag and batch take their input in pieces the model finishes in time (sizing.py).
    # None: the summarizer's (``sizing.speed_for``).
    speed: ModelSpeed = None  # type: ignore[assignment]  # None only until __post_init__ sets the summarizer's
    timeout_s: float = AuxiliaryCompressionConfig().timeout

    def __post_init__(self) -> None:
        if self.speed is None:
            object.__setattr__(self, "speed", speed_for(self.summarizer))

    @property
    def settings(self) -> CompressionConfig:
        return self.window.settings

    @property
    def facts_budget_tokens(self) -> int:
        return int(FACTS_BUDGET_SHARE * self.settings.micro_compact_defrag_threshold_tokens)

    @property
    def user_floor_tokens(self) -> int:
        return user_floor.verbatim_budget(self.window, self.settings.user_verbatim_tokens)

    @property
    def quote_budget_tokens(self) -> int:
        return user_floor.quote_budget(self.user_floor_tokens)


def plan_micro_pass(
    messages: list[Message], state: MicroState, ctx: PassContext, *, total_tokens: int | None = None
) -> PassResult:
    """Plan one pass. ``total_tokens`` (the transcript's, kept by Conversation) enables the
    pressure trigger without recounting the transcript."""
    started = time.perf_counter()
    head = head_end(messages, ctx.settings.protect_first_n)
    tail = tail_start(messages, ctx.counter, ctx.window.tail_token_budget)
    if not cursor_is_valid(messages, state):
        state = recover_state(messages, head, state)
        state = state.evolve(summary_tokens=ctx.counter.count_text(state.summary))
    cursor = normalize_cursor(messages, max(state.cursor or 0, head))

    reason = _defrag_reason(messages, state, ctx, cursor, tail, total_tokens)
    # Window pressure is relieved by folding the middle: a defrag whose piece holds none of it
    # (the next message alone is more than the model handles in time) would only re-summarize
    # the summary, pass after pass; the ordinary pass absorbs the next exchange instead.
    result = _defrag(messages, state, ctx, head, tail, need_middle=reason == "window_pressure") if (
        reason and state.defrag_wait == 0) else None
    if result is not None:
        result.stats["defrag_reason"] = reason
    else:
        if reason and state.defrag_wait > 0:
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

    The Facts section has its own budget on top of the threshold, so the guard never
    makes defrags (which lose detail) come sooner than the model's summary would.
    """
    facts_tokens = ctx.counter.count_text(facts.render_section(state.facts)) if state.facts else 0
    # The quotes have their own budget, and a defrag cannot shrink them.
    quote_tokens = user_floor.section_tokens(ctx.counter, state.quotes)
    if state.summary_tokens - facts_tokens - quote_tokens > ctx.settings.micro_compact_defrag_threshold_tokens:
        return "summary_size"
    if ctx.pressure_share is None or total_tokens is None or not state.summary:
        # No summary yet: the first pass absorbs. A defrag of nothing but the middle is a
        # batch compaction in one call, which a small model answered with a scrap.
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
    # The quotes' section is the engine's: it is kept as it is, so it is not replaced.
    replaced_tokens = exchange_tokens + state.summary_tokens - user_floor.section_tokens(ctx.counter, state.quotes)
    stats: dict[str, Any] = {"cursor": cursor, "exchange_tokens": exchange_tokens}
    # A first pass also pays for the marker's scaffolding: a summary that, with it, is larger
    # than what it replaces would make the context grow, and is rejected like any grown one.
    scaffold = 0 if state.marker_id else _scaffold_tokens(ctx)

    # The model sees the summary without the Facts and quotes sections: the engine keeps those.
    body = redact(user_floor.without_section(facts.body_of(state.summary, state.facts), state.quotes))
    redacted = [redact_message(m) for m in exchange]
    # A merge reply replaces what the model was given, the body and the exchange; the Facts
    # section it never saw is the guard's, fitted below into what the pass may spend.
    given_tokens = exchange_tokens + ctx.counter.count_text(body)
    reply: _Reply | None = None
    problems: list[str] = []
    # A model that misread the task answers the same request the same way: the second try
    # asks more strictly for less (and a pass that failed before starts there). A step too
    # small for notes to save anything gets its deterministic notes without a model call.
    first = 1 if state.failing_id == exchange[0].id else 0
    if ctx.settings.micro_compact_mode == APPEND and exchange_tokens < ctx.notes_below_tokens:
        first = ATTEMPTS
    if exchange_tokens <= scaffold:
        # Nothing written about it costs less than it does with a new marker's scaffolding
        # (a 21-token answer before the first marker): no one is asked, and it stays as it is.
        return _skipped(state, exchange, stats, checks.GROWN, end)
    for attempt in range(first, ATTEMPTS):
        try:
            reply = _ask(ctx, state, body, redacted, exchange_tokens, given_tokens, scaffold,
                         strict=attempt > 0, stats=stats)
        except SummarizerError as exc:
            return _failed(state, exchange, stats, exc.kind, end, detail=failure_detail(exc))
        if reply.problem is None:
            break
        problems.append(reply.problem)  # every rejection is a misread or a cut-off: ask again
    if problems:
        stats["rejected"] = problems
    if reply is None or reply.problem is not None:
        # No answer was a summary (or none was asked for): the exchange's own notes take its
        # place, so it never leaves the context with less kept than the extractive summarizer
        # would keep.
        reply = _fallback(ctx, body, redacted, exchange_tokens - scaffold)
        if reply.problem is not None:
            # The notes alone are larger than the exchange, and the model (at temperature 0)
            # would answer the same again: it stays as it is, at once. Counting to three
            # failures instead never ended where each `hermes-tui run` is a new process
            # (failure counts live in memory): every run asked about the same exchange again.
            return _skipped(state, exchange, stats, problems[-1] if problems else reply.problem, end)
        stats["written_by"] = NOTES_WRITER
    else:
        stats["written_by"] = MODEL_WRITER

    # What the guard may spend: the pass keeps at least half of what it would save with
    # the model's summary alone, so the guard never turns a pass that saves tokens into one
    # that costs them.
    model_saving = replaced_tokens - scaffold - reply.tokens
    keep_saving = math.ceil(min(max(0, model_saving), exchange_tokens) / 2)
    limit = replaced_tokens - scaffold - keep_saving - ctx.counter.count_text(reply.body)
    summary, kept = guard_facts(ctx, reply.body, state.facts, reply.facts, redacted, limit)
    if not summary.strip():
        return _failed(state, exchange, stats, checks.EMPTY, end)
    summary = user_floor.compose(state.quotes, summary)
    summary_tokens = ctx.counter.count_text(summary)

    removed = _with_old_marker(messages, state, range(cursor, end))
    marker = _marker(summary, summary_tokens, [m.id for m in exchange], state, kept, ctx)
    splice = Splice(tuple(removed), marker, tuple(messages[i] for i, _ in removed))
    new_state = _after_splice(state, splice, summary, summary_tokens, facts=tuple(kept), failing_id=None, failures=0)
    stats.update(_fact_stats(ctx, state, kept), rolling_summary_tokens=summary_tokens)
    return PassResult(MICRO, ABSORBED, new_state, splice=splice, stats=stats)


# Tries of the model per pass: the plain request, then a stricter one; then the notes.
ATTEMPTS = 2
# Who wrote what a pass absorbed (stats "written_by"): the model, or compaction.notes.
MODEL_WRITER, NOTES_WRITER = "model", "notes"


@dataclass
class _Reply:
    """What one answer gives: the summary body, any Facts it carried, the body's size, and why
    it is rejected (None when it is not)."""

    body: str
    facts: list[facts.Fact]
    tokens: int
    problem: str | None


def _ask(
    ctx: PassContext, state: MicroState, body: str, redacted: list[Message], exchange_tokens: int,
    replaced_tokens: int, scaffold: int, *, strict: bool, stats: dict[str, Any],
) -> _Reply:
    """One call of the model on the exchange, and its answer judged."""
    append = ctx.settings.micro_compact_mode == APPEND
    request = SummaryRequest("append" if append else "absorb", body, redacted, strict=strict)
    max_tokens = generation_budget(ctx, exchange_tokens if append else replaced_tokens, notes=append)
    completion = run_summarizer(ctx.summarizer, request, max_tokens=max_tokens, speed=ctx.speed)
    _add_usage(stats, completion)
    return _read_reply(
        ctx, completion, body, exchange_tokens=exchange_tokens - scaffold, replaced_tokens=replaced_tokens - scaffold,
        source=prompts.render_messages(redacted) if runs_a_model(ctx.summarizer) else "",
        facts_lacking=bool(facts.missing_facts(state.summary, facts.extract_facts(redacted))),
    )


def _fallback(ctx: PassContext, body: str, redacted: list[Message], room_tokens: int) -> _Reply:
    """The exchange's deterministic notes in place of the model's answer; rejected as grown when
    they take more than ``room_tokens`` (the exchange, less a first pass's marker scaffolding)."""
    added = notes.new_notes(body, redacted)
    new_body = f"{body}\n{added}" if body and added else body or added
    problem = checks.GROWN if ctx.counter.count_text(added) > room_tokens else None
    return _Reply(new_body, [], ctx.counter.count_text(new_body), problem)


def _read_reply(
    ctx: PassContext, completion: Completion, body: str, *, exchange_tokens: int, replaced_tokens: int, source: str = "",
    facts_lacking: bool = False,
) -> _Reply:
    """What a reply gives and whether it is rejected.

    Merge: the reply is the new summary, and may not be larger than the summary and
    exchange it replaces. Append: the reply holds the new lines only, appended to the
    body; the new lines may not be larger than the exchange, and notes cut off by the
    token limit keep their whole lines. (The caller takes a first pass's marker
    scaffolding off both budgets.)
    """
    text = redact(checks.clean_summary(completion.text))
    finish_reason = completion.finish_reason
    if ctx.settings.micro_compact_mode == APPEND:
        if finish_reason == "length" and "\n" in text.strip():
            text, finish_reason = text.strip().rsplit("\n", 1)[0], "stop"  # the last line is the cut one
        added = checks.new_lines(text, body)
        problem = checks.append_problem(
            text, added=added, finish_reason=finish_reason,
            new_tokens=ctx.counter.count_text(added), exchange_tokens=exchange_tokens,
            source=source, facts_lacking=facts_lacking,
        )
        added, model_facts = _split(ctx, added)
        new_body = f"{body}\n{added}" if body and added else body or added
        return _Reply(new_body, model_facts, ctx.counter.count_text(new_body), problem)
    model_tokens = ctx.counter.count_text(text)
    problem = checks.summary_problem(
        text, finish_reason=finish_reason, new_tokens=model_tokens, replaced_tokens=replaced_tokens, source=source
    )
    new_body, model_facts = _split(ctx, text)
    return _Reply(new_body, model_facts, model_tokens, problem)


def _scaffold_tokens(ctx: PassContext) -> int:
    """What a marker costs besides its summary: paid once, by the first pass."""
    return count_message(ctx.counter, make_marker(MICRO, "", covers=[]))


def _split(ctx: PassContext, text: str) -> tuple[str, list[facts.Fact]]:
    """The model's text, and the Facts section it carried over (only the guard reads one)."""
    return facts.split_section(text) if ctx.settings.fact_guard else (text, [])


def guard_facts(
    ctx: PassContext, body: str, carried: Iterable[facts.Fact], model_facts: Iterable[facts.Fact], absorbed: list[Message],
    limit_tokens: int,
) -> tuple[str, list[facts.Fact]]:
    """The summary with its Facts section: the facts of ``absorbed`` (and those carried
    over) that ``body`` does not hold, newest first within the budget and ``limit_tokens``."""
    if not ctx.settings.fact_guard:
        return body, []
    # Every fact passes the checks again, wherever it came from: what the state carried
    # may have been recovered from an imported marker.
    candidates = facts.valid_facts(facts.merge_facts(carried, model_facts, _facts_oldest_first(absorbed)))
    missing = facts.missing_facts(body, candidates)
    kept = facts.fit(body, missing, max(0, min(ctx.facts_budget_tokens, limit_tokens)), ctx.counter)
    return facts.compose(body, kept), kept


def _facts_oldest_first(messages: list[Message]) -> list[facts.Fact]:
    """The facts of each exchange in ``messages``, in the order the budget should drop them:
    older exchanges first, and within one its least telling facts first (``extract_facts``
    lists the most telling first), since the budget drops from the front."""
    groups: list[list[Message]] = []
    for msg in messages:
        if msg.role != "tool" or not groups:
            groups.append([])
        groups[-1].append(msg)
    return [fact for group in groups for fact in reversed(facts.extract_facts(group))]


def _fact_stats(ctx: PassContext, state: MicroState, kept: list[facts.Fact]) -> dict[str, int]:
    if not ctx.settings.fact_guard:
        return {}
    before = {value for _, value in state.facts}
    return {"facts_kept": len(kept), "facts_added": sum(1 for _, value in kept if value not in before)}


def _defrag(
    messages: list[Message], state: MicroState, ctx: PassContext, head: int, tail: int, *, need_middle: bool = False
) -> PassResult | None:
    """Re-summarize the summary and whatever middle remains, in one shot; it must shrink.

    The model gets the whole summary, Facts section included. The guard then re-adds
    only facts of the middle folded in now that the output lost; facts of earlier
    passes that the consolidation dropped stay dropped: that is how the section is pruned.
    """
    base = user_floor.without_section(state.summary, state.quotes)
    base_tokens = ctx.counter.count_text(base)
    # What the model can consolidate within the timeout, at its measured speeds (sizing.py).
    budget = ctx.speed.piece_tokens(ctx.timeout_s, DEFRAG_MAX_RATIO)
    if base_tokens > budget and state.marker_index is not None:
        return _defrag_piece(messages, state, ctx, budget)
    # User messages outside the floor are folded too, and quoted while they fit (user_floor).
    fold = set(user_floor.foldable_users(messages, head, tail, ctx.counter, ctx.user_floor_tokens))
    middle = [
        i for i in range(head, tail)
        if (i in fold or not _never_absorbed(messages[i])) and i != state.marker_index
    ]
    # As much of the middle as fits beside the summary; the rest is left to ordinary passes.
    middle = _fitting(messages, middle, budget - base_tokens, ctx)
    if need_middle and not middle:
        return None
    fold &= set(middle)
    middle_messages = [messages[i] for i in middle]
    input_tokens = base_tokens + count_messages(ctx.counter, middle_messages)
    stats: dict[str, Any] = {"cursor": state.cursor, "exchange_tokens": count_messages(ctx.counter, middle_messages)}

    redacted = [redact_message(m) for m in middle_messages]
    request = _defrag_request(state, redact(base), redacted)
    if request is None:
        return None
    text, failed = _consolidate(ctx, state, request, input_tokens, stats)
    if failed is not None:
        return failed

    body, model_facts = _split(ctx, text)
    # The re-added facts must not undo the shrinking the check just accepted.
    limit = int(DEFRAG_MAX_RATIO * input_tokens) - ctx.counter.count_text(body)
    summary, kept = guard_facts(ctx, body, (), model_facts, redacted, limit)
    folded = [messages[i] for i in sorted(fold)]
    floor = state.evolve(
        quotes=user_floor.fit(state.quotes + tuple(user_floor.quotes_of(folded)), ctx.quote_budget_tokens, ctx.counter),
        users_folded_total=state.users_folded_total + len(folded),
    )
    summary = user_floor.compose(floor.quotes, summary)
    summary_tokens = ctx.counter.count_text(summary)
    removed = _with_old_marker(messages, state, middle)
    marker = _marker(summary, summary_tokens, [m.id for m in middle_messages], floor, kept, ctx)
    splice = Splice(tuple(removed), marker, tuple(messages[i] for i, _ in removed))
    new_state = _after_splice(floor, splice, summary, summary_tokens, facts=tuple(kept), failing_id=None, failures=0)
    new_state = new_state.evolve(defrag_failures=0, defrag_wait=0, defrag_failed_request=None)
    stats.update(_fact_stats(ctx, state, kept), rolling_summary_tokens=summary_tokens, users_folded=len(folded))
    return PassResult(MICRO, DEFRAG, new_state, splice=splice, stats=stats)


def _defrag_request(state: MicroState, summary: str, messages: list[Message]) -> SummaryRequest | None:
    """The defrag to ask: after one that failed, the strict prompt (a length in words); None
    when that strict request is the very one that failed last, since a retry must change
    something (the same request got the same answer). A longer summary or more of the middle
    makes it another request."""
    request = SummaryRequest("defrag", summary, messages, strict=state.defrag_failures > 0)
    if request.strict and state.defrag_failed_request == _request_key(request):
        return None
    return request


def _request_key(request: SummaryRequest) -> int:
    return hash((request.summary, tuple(m.id for m in request.messages), request.strict))


def _consolidate(
    ctx: PassContext, state: MicroState, request: SummaryRequest, input_tokens: int, stats: dict[str, Any]
) -> tuple[str, PassResult | None]:
    """Ask for a defrag and judge it: the consolidated text, or the failed pass (with back-off,
    so a model that cannot shrink the summary does not loop on defrag)."""
    detail: str | None = None
    text = ""
    try:
        completion = run_summarizer(ctx.summarizer, request, max_tokens=generation_budget(ctx, input_tokens, DEFRAG_MAX_RATIO),
                                    speed=ctx.speed)
        stats.update(_usage(completion))
        text = redact(checks.clean_summary(completion.text))
        problem = checks.defrag_problem(
            text, finish_reason=completion.finish_reason, new_tokens=ctx.counter.count_text(text),
            input_tokens=input_tokens, max_ratio=DEFRAG_MAX_RATIO,
            judge_scraps=runs_a_model(ctx.summarizer),
        )
    except SummarizerError as exc:
        problem, detail = exc.kind, failure_detail(exc)
    if not problem:
        return text, None
    failures = state.defrag_failures + 1
    new_state = state.evolve(defrag_failures=failures, defrag_wait=2 ** min(failures, 4),
                             defrag_failed_request=_request_key(request) if request.strict else None)
    return text, PassResult(MICRO, DEFRAG_FAILED, new_state, failure=problem, detail=detail, stats=stats)


def _fitting(messages: list[Message], indices: list[int], room: int, ctx: PassContext) -> list[int]:
    """The first of ``indices`` whose messages fit in ``room`` tokens, never ending inside a
    tool group (a call and its results go together)."""
    kept: list[int] = []
    spent = 0
    for i in indices:
        spent += count_message(ctx.counter, messages[i])
        if spent > room and messages[i].role != "tool":
            break
        kept.append(i)
    while kept and spent > room and messages[kept[-1]].role == "tool":
        # The group that overflowed: take it back whole.
        while kept and messages[kept[-1]].role == "tool":
            kept.pop()
        if kept:
            kept.pop()
        spent = count_messages(ctx.counter, [messages[i] for i in kept])
    return kept


def _defrag_piece(messages: list[Message], state: MicroState, ctx: PassContext, budget: int) -> PassResult | None:
    """The summary alone is more than the model consolidates in time: its oldest lines, up to
    ``budget`` tokens, are consolidated and the rest stays as it is. The marker is replaced;
    no message is absorbed. Later defrags take the next piece while the summary is too long.
    """
    body = facts.body_of(user_floor.without_section(state.summary, state.quotes), state.facts)
    lines = body.split("\n")
    piece: list[str] = []
    spent = 0
    for line in lines:
        cost = ctx.counter.count_text(line) + 1
        if piece and spent + cost > budget:
            break
        piece.append(line)
        spent += cost
    piece_text = "\n".join(piece)
    input_tokens = ctx.counter.count_text(piece_text)
    stats: dict[str, Any] = {"cursor": state.cursor, "exchange_tokens": 0, "defrag_piece_tokens": input_tokens}
    request = _defrag_request(state, redact(piece_text), [])
    if request is None:
        return None
    text, failed = _consolidate(ctx, state, request, input_tokens, stats)
    if failed is not None:
        return failed
    consolidated, _ = _split(ctx, text)  # the Facts section stays the engine's, as it was
    rest = "\n".join(lines[len(piece):])
    new_body = f"{consolidated}\n{rest}" if rest else consolidated
    summary = user_floor.compose(state.quotes, facts.compose(new_body, state.facts) if ctx.settings.fact_guard else new_body)
    summary_tokens = ctx.counter.count_text(summary)
    marker = _marker(summary, summary_tokens, [], state, list(state.facts), ctx)
    # _defrag takes a piece only of a marker's summary; the marker's id is set with its index.
    assert state.marker_index is not None and state.marker_id is not None
    splice = Splice(((state.marker_index, state.marker_id),), marker, (messages[state.marker_index],))
    new_state = _after_splice(state, splice, summary, summary_tokens, failing_id=None, failures=0)
    new_state = new_state.evolve(defrag_failures=0, defrag_wait=0, defrag_failed_request=None)
    stats.update(rolling_summary_tokens=summary_tokens, users_folded=0)
    return PassResult(MICRO, DEFRAG, new_state, splice=splice, stats=stats)


def _skipped(state: MicroState, exchange: list[Message], stats: dict[str, Any], reason: str, end: int) -> PassResult:
    """Leave the exchange verbatim for good (flagged, so a new process steps over it too)."""
    new_state = state.evolve(cursor=end, cursor_anchor=exchange[-1].id, failing_id=None, failures=0)
    return PassResult(MICRO, EXCHANGE_SKIPPED, new_state, failure=reason, skipped=tuple(exchange), stats=stats)


def _failed(
    state: MicroState, exchange: list[Message], stats: dict[str, Any], reason: str, end: int, *, detail: str | None = None
) -> PassResult:
    """Count a failure; the third in a row on the same exchange skips it."""
    first_id = exchange[0].id
    failures = state.failures + 1 if state.failing_id == first_id else 1
    if failures < MAX_CONSECUTIVE_FAILURES:
        new_state = state.evolve(failing_id=first_id, failures=failures)
        return PassResult(
            MICRO, SUMMARIZE_FAILED, new_state, failure=reason, detail=detail, stats={**stats, "failures": failures}
        )
    return replace(_skipped(state, exchange, {**stats, "failures": failures}, reason, end), detail=detail)


def _never_absorbed(msg: Message) -> bool:
    return msg.role in ("user", "system") or is_marker(msg)


def _with_old_marker(messages: list[Message], state: MicroState, indices: Iterable[int]) -> list[tuple[int, str]]:
    """The indices to remove: the absorbed messages plus the marker they supersede."""
    removed = [(i, messages[i].id) for i in indices]
    if state.marker_index is not None:
        assert state.marker_id is not None  # set with marker_index (recover_state, _after_splice, a batch)
        removed.append((state.marker_index, state.marker_id))
    return sorted(set(removed))


def _marker(
    summary: str, summary_tokens: int, covers: list[str], state: MicroState, kept: list[facts.Fact], ctx: PassContext
) -> Message:
    extra: dict[str, Any] = {
        "supersedes": state.marker_id,
        "summary_tokens": summary_tokens,
        "passes_total": state.passes_total + 1,
    }
    if ctx.settings.fact_guard:
        extra["facts"] = [list(fact) for fact in kept]  # so a resume knows where the section starts
    extra.update(floor_meta(state))
    return make_marker(MICRO, summary, covers=covers, extra=extra)


def floor_meta(state: MicroState) -> dict[str, Any]:
    """What a marker records of the user-message floor, so a resume finds the quotes again."""
    meta: dict[str, Any] = {}
    if state.quotes:
        meta["user_quotes"] = [list(quote) for quote in state.quotes]
    if state.users_folded_total:
        meta["users_folded_total"] = state.users_folded_total
    return meta


def _after_splice(state: MicroState, splice: Splice, summary: str, summary_tokens: int, **changes: Any) -> MicroState:
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


# Notes about a step, whatever its size: asked for 1-4 lines, Qwen2.5-Coder 0.5B and 1.5B
# wrote 70-150 tokens; a model that loops is cut here and its whole lines kept.
NOTES_MAX_TOKENS = 200


def generation_budget(ctx: PassContext, replaced_tokens: int, ratio: float = 1.0, *, notes: bool = False) -> int:
    """Cap generation just past what the checks would accept: more could only be rejected.
    Notes get a fixed budget: a step's size says nothing about how many lines it needs.

    Our count and the model's own tokenizer can differ, hence the margin.
    """
    budget = NOTES_MAX_TOKENS if notes else max(32, int(replaced_tokens * ratio * 1.25) + 64)
    return budget if ctx.max_tokens_cap is None else min(budget, ctx.max_tokens_cap)


def _usage(completion: Completion) -> dict[str, Any]:
    return {
        "prompt_tokens": completion.prompt_tokens,
        "completion_tokens": completion.completion_tokens,
        "cached_tokens": completion.cached_tokens,
        "summarizer_ms": round(completion.duration_s * 1000),
        "prompt_tps": getattr(completion, "prompt_tps", None),
        "generation_tps": getattr(completion, "generation_tps", None),
    }


def _add_usage(stats: dict[str, Any], completion: Completion) -> None:
    """Add one call's usage to a pass's: a pass that asked twice cost both calls."""
    usage = _usage(completion)
    for key in ("prompt_tokens", "completion_tokens", "cached_tokens", "summarizer_ms"):
        if usage[key] is not None:
            stats[key] = (stats.get(key) or 0) + usage[key]
    for key in ("prompt_tps", "generation_tps"):
        stats[key] = usage[key]
    stats["model_calls"] = stats.get("model_calls", 0) + 1

