"""The app runs its passes through the same queue and rule as the agent loop of ``run``.

``App.run_test`` with the real backend (the tiny MLX chat model, never called here: the
passes are asked for directly, as the agent loop and ``/compact`` ask). The summarizer
always fails, so a micro pass leaves the transcript as large as it was: over the threshold
(a session with large tool results) or under it (the short coding session). Batch does not
fail with it (the chunks get their notes, then the summary gives way), so the queue's order
is what is pinned, not where the window ends. The test
records what the session was asked to plan, in order. Pinned: batch (with the trim stage
first, as the policy's batch in ``run``) follows a micro pass that left the context over
the threshold, ahead of the passes waiting; ``/compact`` requests are never dropped;
nothing follows a micro pass that left it under the threshold."""

from __future__ import annotations

from support.chat_app import (
    SIZE,
    FailingSummarizer,
    GatedSummarizer,
    app_for,
    app_test,
    coding_session,
    label,
    settle,
    shown_ids,
    until,
)

from hermes_tui.compaction.trim import is_trimmed
from hermes_tui.core.transcript import BATCH, MICRO, Message
from hermes_tui.providers.extractive.summarizer import ExtractiveSummarizer
from hermes_tui.session.pass_queue import PassRequest
from hermes_tui.session.wiring import open_session


def stored_session(config, store, *, large: bool) -> str:
    """``coding_session``, and with ``large`` tool results that put it over a 1,024-token window's threshold."""
    session = open_session(config, store, title="queue", summarizer=ExtractiveSummarizer())
    session.conv.extend(coding_session())
    if large:
        for n in range(6):
            call = {"id": f"big{n}", "type": "function", "function": {"name": "read_file", "arguments": "{}"}}
            session.conv.extend([
                Message("assistant", f"Reading part {n}.", tool_calls=[call]),
                Message("tool", " ".join(f"row{n}-{k}" for k in range(120)), tool_call_id=f"big{n}", name="read_file"),
            ])
    store.flush(session.info.id, session.conv.messages)
    return session.info.id


def record_plans(session) -> list:
    """What ``session`` is asked to plan, in order: MICRO, or (BATCH, focus, trim)."""
    planned: list = []
    plan_pass, plan_compress = session.plan_pass, session.plan_compress

    def recording_pass():
        planned.append(MICRO)
        return plan_pass()

    def recording_compress(focus=None, *, trim=False):
        planned.append((BATCH, focus, trim))
        return plan_compress(focus, trim=trim)

    session.plan_pass, session.plan_compress = recording_pass, recording_compress
    return planned


def app_on_stored_session(config, store, *, large: bool):
    """The app resuming a stored session (over the threshold when ``large``); every pass fails."""
    return app_for(config, store, session_id=stored_session(config, store, large=large),
                   summarizer=FailingSummarizer())


@app_test
async def test_batch_follows_a_micro_pass_left_over_the_threshold_ahead_of_what_waits(config, store):
    app = app_on_stored_session(config, store, large=True)
    async with app.run_test(size=SIZE) as pilot:
        screen = app.screen
        await until(pilot, screen.session.over_threshold, "the window to resolve, the session over the threshold")
        planned = record_plans(screen.session)
        manual = PassRequest(BATCH, focus="the parser", manual=True)
        # No await in between: the first pass cannot land before the others are asked for.
        for request in (PassRequest(MICRO), PassRequest(MICRO), manual, manual):
            screen.passes.request(request)
        assert len(screen.passes.queue.waiting) == 3  # a one-pass micro waits; /compact is never dropped
        await settle(pilot, screen)
        follow_up = (BATCH, None, True)
        asked = (BATCH, "the parser", False)
        assert planned == [MICRO, follow_up, MICRO, follow_up, asked, asked]


@app_test
async def test_nothing_follows_a_micro_pass_left_under_the_threshold(config, store):
    app = app_on_stored_session(config, store, large=False)
    async with app.run_test(size=SIZE) as pilot:
        screen = app.screen
        await until(pilot, lambda: screen.session.compactor.ctx.window.limit is not None, "the window to resolve")
        assert not screen.session.over_threshold()
        planned = record_plans(screen.session)
        screen.passes.request(PassRequest(MICRO))
        await settle(pilot, screen)
        assert planned == [MICRO]


@app_test
async def test_a_trim_that_lands_ahead_of_a_slow_pass_is_shown_at_once(config, store):
    """Over the threshold the trim lands before the model answers the pass (``Session._trim_now``):
    the message list and the status bar show the trimmed transcript while the pass still runs."""
    config = config.with_overrides({"model.context_length": 4096, "compression.target_ratio": 0.05})
    session = open_session(config, store, title="early trim", summarizer=ExtractiveSummarizer())
    session.conv.extend(coding_session())
    for n in range(4):
        call = {"id": f"big{n}", "type": "function", "function": {"name": "read_file", "arguments": "{}"}}
        rows = "\n".join(f"row {n}-{k}: status=ok path=src/module_{k}.py" for k in range(150))
        session.conv.extend([Message("assistant", f"Reading part {n}.", tool_calls=[call]),
                             Message("tool", rows, tool_call_id=f"big{n}", name="read_file")])
    store.flush(session.info.id, session.conv.messages)
    gated = GatedSummarizer()
    app = app_for(config, store, session_id=session.info.id, summarizer=gated)
    async with app.run_test(size=SIZE) as pilot:
        screen = app.screen
        await until(pilot, screen.session.over_threshold, "the window to resolve, the session over the threshold")
        before = screen.session.conv.total_tokens
        screen.passes.request(PassRequest(MICRO))
        await until(pilot, gated.started.is_set, "the pass to ask the model")
        trimmed = [m.id for m in screen.session.conv.messages if is_trimmed(m)]
        assert trimmed and screen.session.conv.total_tokens < before
        await until(pilot, lambda: set(trimmed) <= set(shown_ids(screen)), "the trimmed results to be shown")
        tokens = f"{screen.session.conv.total_tokens:,} / 4,096"
        await until(pilot, lambda: label(screen, "tokens") == tokens, "the trimmed total in the status bar")
        assert screen.passes.running is not None  # the pass is still running
        gated.gate.set()
        await settle(pilot, screen)
