"""Batch compaction (``compress``) and how it interoperates with micro passes."""

from __future__ import annotations

import dataclasses

import pytest
from helpers import (
    ScriptedSummarizer,
    agent_session,
    assert_tools_paired,
    assistant,
    failing,
    make_compactor,
    results,
    user_texts,
    words,
)

from hermes_tui.compaction import batch
from hermes_tui.compaction.sizing import ModelSpeed
from hermes_tui.core.tokens import count_message
from hermes_tui.core.transcript import BATCH, make_marker


def test_batch_keeps_head_tail_and_every_user_message():
    compactor, conv = make_compactor(ScriptedSummarizer(lambda r: "- condensed."), micro=False, target_ratio=0.1)
    original = agent_session(exchanges=30, size=150, users_every=3)
    conv.extend(original)
    report = compactor.compress(conv)
    assert report.outcome == "compressed"
    assert report.fields["tokens_delta"] < 0
    assert user_texts(conv.messages) == user_texts(original)
    assert conv.messages[:2] == original[:2]
    assert conv.messages[-3:] == original[-3:]
    assert [m.meta["compaction"] for m in conv.messages if m.is_marker] == ["batch"]
    assert_tools_paired(conv.messages)


def test_batch_folds_the_micro_summary_and_resets_micro_state():
    compactor, conv = make_compactor(ScriptedSummarizer(lambda r: (r.summary + "\n" if r.summary else "") + f"- {r.kind}"))
    conv.extend(agent_session(exchanges=30, size=150))
    compactor.micro_pass(conv)
    compactor.micro_pass(conv)
    micro_summary = compactor.rolling_summary
    compactor.state = compactor.state.evolve(failures=2, failing_id="x", defrag_wait=3)
    compactor.compress(conv)
    (marker,) = [m for m in conv.messages if m.is_marker]
    assert marker.meta["compaction"] == "batch"
    assert marker.meta["summary"].startswith(micro_summary)
    assert (compactor.state.failures, compactor.state.defrag_wait) == (0, 0)
    # A micro pass after the batch supersedes the batch marker: still exactly one marker.
    conv.extend(agent_session(exchanges=10, size=150)[2:])
    assert compactor.micro_pass(conv).outcome == "absorbed"
    assert [m.meta["compaction"] for m in conv.messages if m.is_marker] == ["micro"]
    assert compactor.rolling_summary.startswith(marker.meta["summary"])


def test_batch_fires_from_finalize_turn_when_over_threshold():
    compactor, conv = make_compactor(ScriptedSummarizer(lambda r: "- condensed."), limit=4000, micro=False)
    conv.extend(agent_session(exchanges=40, size=150))
    assert conv.total_tokens > compactor.ctx.window.threshold_tokens
    reports = compactor.finalize_turn(conv)
    assert [(r.kind, r.outcome) for r in reports] == [("batch", "compressed")]
    assert compactor.batch_compactions == 1


@pytest.mark.parametrize("kind", ["timeout", "unreachable"])
def test_a_batch_whose_model_call_fails_lands_the_chunks_notes_and_asks_no_more(monkeypatch, kind):
    """Batch runs because the window is full: a model out of time (or gone) must not leave it
    full. The chunk's deterministic notes stand in, and every later chunk's too, without
    another call that would run out of time the same way."""
    monkeypatch.setattr(batch, "CHUNK_TOKENS", 1000)
    summarizer = ScriptedSummarizer(failing(kind))
    compactor, conv = make_compactor(summarizer, micro=False)
    conv.extend(agent_session(exchanges=30, size=150))
    before = conv.total_tokens
    report = compactor.compress(conv)
    assert report.outcome == "compressed" and report.fields["failure"] is None
    assert len(summarizer.requests) == 1 and report.fields["summarizer_calls"] == 0
    assert report.fields["rejected"] == [kind] and report.fields["chunks_by_notes"] > 3
    assert conv.total_tokens < before
    summary = compactor.rolling_summary
    assert summary.startswith("- ") and "bash:" in summary  # the notes: one line per call


def test_a_rejected_chunk_gets_its_notes_and_the_next_chunk_asks_the_model_again(monkeypatch):
    monkeypatch.setattr(batch, "CHUNK_TOKENS", 1000)
    answers = iter(["I'm sorry, but I can't assist with that."])
    summarizer = ScriptedSummarizer(lambda r: next(answers, (r.summary + "\n" if r.summary else "") + "- chunk."))
    compactor, conv = make_compactor(summarizer, micro=False)
    conv.extend(agent_session(exchanges=30, size=150))
    report = compactor.compress(conv)
    assert report.outcome == "compressed"
    assert report.fields["rejected"] == ["refused"] and report.fields["chunks_by_notes"] == 1
    assert report.fields["summarizer_calls"] == len(summarizer.requests) > 3
    assert "- chunk." in compactor.rolling_summary and "sorry" not in compactor.rolling_summary


def test_large_middles_are_condensed_in_chunks(monkeypatch):
    monkeypatch.setattr(batch, "CHUNK_TOKENS", 1000)
    summarizer = ScriptedSummarizer(lambda r: (r.summary + "\n" if r.summary else "") + "- chunk.")
    compactor, conv = make_compactor(summarizer, micro=False)
    conv.extend(agent_session(exchanges=30, size=150))
    report = compactor.compress(conv)
    assert report.outcome == "compressed"
    assert report.fields["summarizer_calls"] == len(summarizer.requests) > 3
    for request in summarizer.requests:  # chunks never split a tool group
        assert_tools_paired(request.messages)


def test_focus_topic_reaches_the_prompt():
    summarizer = ScriptedSummarizer(lambda r: "- condensed.")
    compactor, conv = make_compactor(summarizer, micro=False)
    conv.extend(agent_session(exchanges=10, size=150))
    compactor.compress(conv, focus="the database migration")
    assert "the database migration" in summarizer.requests[0].to_chat()[1]["content"]


def test_a_batch_marker_that_costs_exactly_what_it_removes_is_rejected():
    """Batch runs because the window is full: a splice must shrink it. A marker that
    costs as much as the messages it removes is rejected as grown; one token less lands."""
    reply = {"text": ""}
    compactor, conv = make_compactor(ScriptedSummarizer(lambda r: reply["text"]), micro=False, target_ratio=0.1,
                                     user_verbatim_tokens=100_000)  # no user message folds
    conv.extend(agent_session(exchanges=12, size=60))
    counter = compactor.ctx.counter
    removed = batch.plan_batch(list(conv.messages), compactor.state, compactor.ctx).stats["absorbed_tokens"]

    def marker_cost(text: str) -> int:
        return count_message(counter, make_marker(BATCH, text, covers=[]))

    texts = [words(n, "w") + tail for n in range(removed) for tail in ("", ".", " x", " ok.")]
    equal = next(t for t in texts if marker_cost(t) == removed)
    cheaper = next(t for t in texts if marker_cost(t) == removed - 1)

    reply["text"] = equal
    report = compactor.compress(conv)
    assert (report.outcome, report.fields["failure"]) == ("failed", "grown")
    assert not any(m.is_marker for m in conv.messages)
    reply["text"] = cheaper
    assert compactor.compress(conv).outcome == "compressed"


def test_with_nothing_left_to_absorb_a_full_window_makes_the_summary_give_way():
    """The newest step alone can fill the tail (a large tool result), and once the passes
    have absorbed everything else the middle holds only the summary's marker: batch found
    nothing to absorb and the window stayed over its threshold. The summary's oldest notes
    give way instead (they stay archived with the marker they were in)."""
    notes = iter(range(1000))

    def a_note_per_exchange(request):
        return (request.summary + "\n" if request.summary else "") + f"- step {next(notes)} read src/mod_{len(request.summary)}.py."

    compactor, conv = make_compactor(ScriptedSummarizer(a_note_per_exchange), limit=4000, protect_first_n=2,
                                     target_ratio=0.5, defrag_threshold=100_000)
    conv.extend([*agent_session(exchanges=40, size=20, users_every=1000)[:-1]])
    while compactor.micro_pass(conv).outcome == "absorbed":
        pass
    threshold = compactor.ctx.window.threshold_tokens
    # With room in the window, the summary stays whole: batch has nothing to do.
    assert conv.total_tokens < threshold and any(m.is_marker for m in conv.messages)
    messages = list(conv.messages)
    assert compactor.compress(conv).outcome == "nothing_to_absorb"
    assert conv.messages == messages
    big = assistant("Reading the log.", calls=1)
    conv.extend([big, *results(big, size=threshold - conv.total_tokens + 50)])
    while compactor.micro_pass(conv).outcome == "absorbed":
        pass
    assert conv.total_tokens > threshold
    old_marker = next(m for m in conv.messages if m.is_marker)
    old_summary = compactor.rolling_summary
    before = conv.total_tokens

    archived = []
    report = compactor.compress(conv, persist=lambda result: archived.extend(result.splice.archived))
    assert report.outcome == "compressed"
    assert conv.total_tokens < before
    (marker,) = [m for m in conv.messages if m.is_marker]
    summary = marker.meta["summary"]
    newest, oldest = old_summary.splitlines()[-1], old_summary.splitlines()[0]
    assert newest in summary and oldest not in summary
    assert report.fields["summary_gave_way_tokens"] > 0
    assert old_marker in archived  # the notes that gave way are in the archive
    assert conv.messages[-2:] == [big, *conv.messages[-1:]]  # the step itself untouched



@pytest.mark.parametrize(("generation_tps", "asks"), [(2.0, False), (2_000.0, True)])
def test_a_batch_call_that_cannot_finish_in_time_at_the_measured_speed_is_not_made(generation_tps, asks):
    """A batch call writes the summary so far back with the chunk in it: at a slow CPU model's
    measured speed a long summary takes minutes, and waiting out the timeout (120 s, twice in
    a replay of spotter-a0y with Qwen2.5-Coder-1.5B) only stalls the session. The chunks get
    their notes at once."""
    summarizer = ScriptedSummarizer(lambda r: (r.summary + "\n" if r.summary else "") + "- " + words(40, "note"))
    compactor, conv = make_compactor(summarizer, limit=20_000)
    conv.extend(agent_session(exchanges=30, size=150))
    for _ in range(8):
        compactor.micro_pass(conv)
    assert compactor.state.summary_tokens > 300
    speed = ModelSpeed(prompt_tps=100.0, generation_tps=generation_tps, measured=True)
    compactor.ctx = dataclasses.replace(compactor.ctx, speed=speed, timeout_s=120.0)
    summarizer.requests.clear()
    report = compactor.compress(conv)
    assert report.outcome == "compressed"
    batch_requests = [r for r in summarizer.requests if r.kind == "batch"]
    if asks:
        assert batch_requests and not report.fields["rejected"]
    else:
        assert not batch_requests
        assert report.fields["rejected"] == ["would_time_out"] and report.fields["chunks_by_notes"] >= 1
