"""Batch compaction: condense the whole middle at once when the window fills anyway.

The backstop behind micro-compaction. Head and token-budgeted tail stay verbatim,
tool groups are never split, user messages are never summarized (they stay in
place, in order), and the previous summary (micro or batch) is folded into the
new one, so there is still exactly one marker. A large middle is condensed in
chunks, each folded into the summary so far. Publishing it resets the micro state.

Batch runs because the window is full, so it must not fail because the model did: a chunk
whose call fails (a timeout, an unreachable server) or whose answer is rejected (a refusal,
a scrap, instructions) gets its deterministic notes (``compaction.notes``, what the
extractive summarizer keeps) appended to the summary instead, and so does every chunk after
a failed call (a model that ran out of time on one chunk runs out on the next), and every
chunk from the first whose call could not finish within the timeout at the model's measured
speed (the call writes the summary so far back: a slow CPU model's minutes). The pass
still fails when what it writes does not shrink the context.

With the fact guard on, the Facts section is the engine's here as in a pass: the model gets
the previous summaries without theirs, and the new marker's section holds the facts its
summary lacks, of what the batch absorbed and of the sections it supersedes, in the room the
window leaves (``_facts_room``) and never more than the marker saves. When nothing is left to
absorb and the window is still full (the newest step fills the tail), the summary's oldest
notes give way (``_newest_half``): before, batch failed and the window stayed full.
"""

from __future__ import annotations

import time
from typing import Any

from hermes_tui.compaction import checks, facts, notes, user_floor
from hermes_tui.compaction.markers import MarkerSummary, read_marker
from hermes_tui.compaction.micro import PassContext, floor_meta, generation_budget, guard_facts
from hermes_tui.compaction.redaction import redact, redact_message
from hermes_tui.compaction.state import (
    BATCH_FAILED,
    COMPRESSED,
    NOTHING_TO_ABSORB,
    MicroState,
    PassResult,
)
from hermes_tui.compaction.summarizer import SummarizerError
from hermes_tui.compaction.summary_request import SummaryRequest, run_summarizer
from hermes_tui.compaction.window import head_end, tail_start
from hermes_tui.core.conversation import Splice
from hermes_tui.core.tokens import count_message, count_messages
from hermes_tui.core.transcript import BATCH, Message, make_marker

# Input per summarizer call: small enough for a small local model's window; less for a model
# too slow to read that much in time (sizing.py).
CHUNK_TOKENS = 8_000
# What a batch call writes, as a share of what it reads, for sizing its pieces.
BATCH_OUTPUT_RATIO = 0.5
# Why a chunk got its notes without a call: the call could not finish within the timeout.
WOULD_TIME_OUT = "would_time_out"


def plan_batch(messages: list[Message], state: MicroState, ctx: PassContext, focus: str | None = None) -> PassResult:
    started = time.perf_counter()
    head = head_end(messages, ctx.settings.protect_first_n)
    tail = tail_start(messages, ctx.counter, ctx.window.tail_token_budget)
    read = {i: found for i, m in enumerate(messages) if (found := read_marker(m)) is not None}
    markers = sorted(read)
    # User messages outside the floor are folded too, and quoted while they fit (user_floor).
    fold, absorb = _foldable(messages, head, tail, read, ctx, ctx.user_floor_tokens)
    full = count_messages(ctx.counter, messages) > ctx.window.threshold_tokens
    if not absorb and full:
        # The window is full of what the user said: the floor gives way (all but the last
        # user message are folded, and quoted while they fit), so the session still fits.
        fold, absorb = _foldable(messages, head, tail, read, ctx, 0)
    # Every marker's history is kept: a transcript from elsewhere may hold more than one.
    # Their quotes stay the engine's: the summarizer gets the rest.
    # Their Facts sections are the engine's too: carried, not shown to the model.
    previous = "\n\n".join(
        rest for i in markers
        if (rest := facts.body_of(user_floor.without_section(read[i].summary, read[i].quotes), read[i].facts))
    )
    carried_facts = tuple(fact for i in markers for fact in read[i].facts)
    folded = [messages[i] for i in sorted(fold)]
    carried = tuple(quote for i in markers for quote in read[i].quotes)
    quotes = user_floor.fit(carried + tuple(user_floor.quotes_of(folded)), ctx.quote_budget_tokens, ctx.counter)
    stats: dict[str, Any] = {
        "absorbed_tokens": count_messages(ctx.counter, [messages[i] for i in absorb]), "summarizer_calls": 0,
        "users_folded": len(folded),
    }
    given_way: list[facts.Fact] = []
    if not absorb:
        if not (full and (previous or carried_facts)):
            # A failure: batch runs because the window is full, and it stays full.
            return PassResult(BATCH, NOTHING_TO_ABSORB, state, failure=NOTHING_TO_ABSORB, stats=_timed(stats, started))
        # Nothing is left to absorb and the window is still full (a large newest step in the
        # tail): the summary gives way. Its oldest notes go (they stay archived with the
        # marker they were in); their facts are the guard's, within the room there is.
        previous, dropped = _newest_half(previous, ctx)
        given_way = facts.extract_facts([Message(role="assistant", content=dropped)]) if dropped else []
        stats["summary_gave_way_tokens"] = ctx.counter.count_text(dropped)

    summary = previous
    summary_tokens = ctx.counter.count_text(summary)
    prompt_tokens = completion_tokens = 0
    # Pieces the model finishes in time (sizing.py), beside the summary so far.
    chunk_tokens = min(CHUNK_TOKENS, ctx.speed.piece_tokens(ctx.timeout_s, BATCH_OUTPUT_RATIO))
    rejected: list[str] = []
    failed_call: SummarizerError | None = None
    too_slow = False
    absorbed: list[Message] = []  # redacted, as the model saw them: where the guard finds facts
    for chunk in _chunks(messages, absorb, ctx, chunk_tokens) if absorb else []:
        chunk_tokens = count_messages(ctx.counter, chunk)
        redacted = [redact_message(m) for m in chunk]
        absorbed += redacted
        problem: str | None = None
        if failed_call is None and not too_slow and _would_time_out(ctx, summary_tokens, chunk_tokens):
            # The call rewrites the summary so far beside the chunk: at the model's measured
            # speed it cannot finish in time, and waiting out the timeout only stalls the
            # session. The summary only grows, so no later chunk asks either.
            too_slow, problem = True, WOULD_TIME_OUT
        elif failed_call is None and not too_slow:
            request = SummaryRequest("batch", summary, redacted, focus)
            try:
                budget = generation_budget(ctx, summary_tokens + chunk_tokens)
                completion = run_summarizer(ctx.summarizer, request, max_tokens=budget, speed=ctx.speed)
            except SummarizerError as exc:
                failed_call, problem = exc, exc.kind
            else:
                stats["summarizer_calls"] += 1
                prompt_tokens += completion.prompt_tokens or 0
                completion_tokens += completion.completion_tokens or 0
                text = redact(checks.clean_summary(completion.text))
                text_tokens = ctx.counter.count_text(text)
                problem = checks.summary_problem(
                    text, finish_reason=completion.finish_reason, new_tokens=text_tokens,
                    replaced_tokens=summary_tokens + chunk_tokens,
                )
        if problem is not None:
            rejected.append(problem)
        if failed_call is not None or too_slow or problem is not None:
            text = _with_notes(summary, redacted)
            text_tokens = ctx.counter.count_text(text)
            stats["chunks_by_notes"] = stats.get("chunks_by_notes", 0) + 1
        summary, summary_tokens = text, text_tokens
    if rejected:
        stats["rejected"] = rejected

    floor = MicroState(quotes=quotes, users_folded_total=state.users_folded_total + len(folded))
    removed = sorted({(i, messages[i].id) for i in absorb} | {(i, messages[i].id) for i in markers})
    removed_tokens = count_messages(ctx.counter, [messages[i] for i, _ in removed])

    def make(body: str, kept: list[facts.Fact]) -> Message:
        text = user_floor.compose(quotes, body)
        return make_marker(
            BATCH,
            text,
            covers=[messages[i].id for i in absorb],
            extra={
                "supersedes": messages[markers[-1]].id if markers else None,
                "summary_tokens": ctx.counter.count_text(text),
                "passes_total": state.passes_total,
                **({"facts": [list(fact) for fact in kept]} if ctx.settings.fact_guard else {}),
                **floor_meta(floor),
            },
        )

    kept: list[facts.Fact] = []
    marker = make(summary, kept)
    if ctx.settings.fact_guard:
        body, model_facts = facts.split_section(summary)
        bare = make(body, [])
        # The section never makes the batch fail: it takes no more than the marker saves.
        room = min(_facts_room(messages, set(absorb) | set(markers), quotes, body, ctx),
                   removed_tokens - count_message(ctx.counter, bare) - 1)
        guarded, kept = guard_facts(ctx, body, (*given_way, *carried_facts), model_facts, absorbed, room)
        marker = make(guarded, kept)
        if kept and count_message(ctx.counter, marker) >= removed_tokens:  # counts are not quite additive
            marker, kept = bare, []
        stats["facts_kept"] = len(kept)
    summary_tokens = marker.meta["summary_tokens"]
    summary = marker.meta["summary"]
    if count_message(ctx.counter, marker) >= removed_tokens:
        # Batch runs because the window is full: a splice that does not shrink it (a few
        # short user messages folded into a marker and its quotes) only spends the cache.
        return PassResult(BATCH, BATCH_FAILED, state, failure=checks.GROWN, stats=_timed(stats, started))
    splice = Splice(tuple(removed), marker, tuple(messages[i] for i, _ in removed))
    index = splice.marker_index
    # A batch resets the micro state: the rolling summary is now the batch summary.
    new_state = MicroState(
        cursor=index + 1,
        cursor_anchor=marker.id,
        summary=summary,
        summary_tokens=summary_tokens,
        marker_index=index,
        marker_id=marker.id,
        passes_total=state.passes_total,
        tokens_saved_total=state.tokens_saved_total,
        quotes=floor.quotes,
        users_folded_total=floor.users_folded_total,
        facts=tuple(kept),
    )
    stats.update(summary_tokens=summary_tokens, prompt_tokens=prompt_tokens, completion_tokens=completion_tokens)
    return PassResult(BATCH, COMPRESSED, new_state, splice=splice, stats=_timed(stats, started))


def _would_time_out(ctx: PassContext, summary_tokens: int, chunk_tokens: int) -> bool:
    """Whether a call on the summary so far and a chunk, writing the summary back with the
    chunk's share in it, takes longer than the timeout at the model's measured speeds."""
    if not ctx.speed.measured or ctx.speed.fixed:
        return False  # nothing measured to go by (or no model): ask
    written = summary_tokens + BATCH_OUTPUT_RATIO * chunk_tokens
    return ctx.speed.seconds(summary_tokens + chunk_tokens, int(written)) > ctx.timeout_s


def _newest_half(summary: str, ctx: PassContext) -> tuple[str, str]:
    """``summary`` split into its newest lines that fit in half of it, and the older rest."""
    lines = summary.splitlines()
    budget = ctx.counter.count_text(summary) // 2
    kept = 0
    spent = 0
    for line in reversed(lines):
        spent += ctx.counter.count_text(line) + 1
        if spent > budget:
            break
        kept += 1
    cut = len(lines) - kept
    return "\n".join(lines[cut:]).strip(), "\n".join(lines[:cut]).strip()


def _facts_room(
    messages: list[Message], removed: set[int], quotes: tuple[user_floor.Quote, ...], body: str, ctx: PassContext
) -> int:
    """Tokens the Facts section may take: no more than leaves the transcript the batch
    writes under the threshold by the tail's budget (the room the next exchanges need).
    Batch runs because the window is full: its section must not fill it again."""
    kept = count_messages(ctx.counter, [m for i, m in enumerate(messages) if i not in removed])
    projected = kept + ctx.counter.count_text(user_floor.compose(quotes, body))
    return ctx.window.threshold_tokens - ctx.window.tail_token_budget - projected


def _with_notes(summary: str, chunk: list[Message]) -> str:
    """``summary`` with the chunk's deterministic notes after it (``notes.new_notes``)."""
    return "\n".join(part for part in (summary, notes.new_notes(summary, chunk)) if part)


def _foldable(
    messages: list[Message], head: int, tail: int, read: dict[int, MarkerSummary], ctx: PassContext, floor_tokens: int
) -> tuple[set[int], list[int]]:
    """The user messages outside a floor of ``floor_tokens``, and every index to absorb."""
    fold = set(user_floor.foldable_users(messages, head, tail, ctx.counter, floor_tokens))
    absorb = [
        i for i in range(head, tail)
        if (i in fold or messages[i].role not in ("user", "system")) and i not in read
    ]
    return fold, absorb


def _chunks(messages: list[Message], indices: list[int], ctx: PassContext, size: int) -> list[list[Message]]:
    """Split the messages to absorb into chunks of about ``size`` tokens, never inside a tool group."""
    chunks: list[list[Message]] = [[]]
    spent = 0
    for i in indices:
        msg = messages[i]
        cost = count_message(ctx.counter, msg)
        starts_group = msg.role != "tool"
        if starts_group and chunks[-1] and spent + cost > size:
            chunks.append([])
            spent = 0
        chunks[-1].append(msg)
        spent += cost
    return chunks


def _timed(stats: dict[str, Any], started: float) -> dict[str, Any]:
    stats["duration_ms"] = round((time.perf_counter() - started) * 1000)
    return stats
