"""Work sized to the compression model (hermes_tui/compaction/sizing.py): speeds learnt from its
calls, and defrag and batch pieces a slow model finishes within the timeout."""

from __future__ import annotations

import dataclasses

from helpers import ScriptedSummarizer, agent_session, make_compactor, words

from hermes_tui.compaction.micro import PassContext
from hermes_tui.compaction.sizing import MIN_PIECE_TOKENS, ModelSpeed, instant, speed_for
from hermes_tui.compaction.summarizer import Completion, SummarizerError
from hermes_tui.compaction.window import ContextWindow
from hermes_tui.config import CompressionConfig
from hermes_tui.core.tokens import EstimateCounter
from hermes_tui.providers.extractive.summarizer import ExtractiveSummarizer


def test_speeds_are_fitted_from_durations_when_the_backend_does_not_report_them():
    speed = ModelSpeed()
    for prefill, generated in [(400, 100), (1200, 50), (300, 200), (2000, 120)]:
        speed.observe(prefill, generated, prefill / 170 + generated / 45)  # a 0.5B on two cores
    assert speed.measured
    assert abs(speed.prompt_tps - 170) < 1 and abs(speed.generation_tps - 45) < 1


def test_the_backends_own_speeds_win_and_a_timeout_halves_them():
    speed = ModelSpeed()
    speed.observe(100, 10, 99.0, prompt_tps=176.0, generation_tps=48.0)
    assert (speed.prompt_tps, speed.generation_tps) == (176.0, 48.0)
    speed.timed_out()
    assert (speed.prompt_tps, speed.generation_tps) == (88.0, 24.0)


def test_a_piece_fits_half_the_timeout_and_an_instant_summarizer_takes_everything():
    slow = ModelSpeed(prompt_tps=60, generation_tps=16)  # the 1.5B on two cores
    piece = slow.piece_tokens(120, 0.6)
    assert piece >= MIN_PIECE_TOKENS and slow.seconds(piece, 0.6 * piece) <= 60.5
    assert ModelSpeed(prompt_tps=176, generation_tps=48).piece_tokens(120, 0.6) > 2 * piece
    assert speed_for(ExtractiveSummarizer()).piece_tokens(120, 0.6) > 10**6
    fixed = instant()
    fixed.observe(100, 100, 1000.0)
    fixed.timed_out()
    assert fixed.prompt_tps == 1e9  # learns nothing


def slow_compactor(script, speed=None, mode="merge", **kw):
    compactor, conv = make_compactor(ScriptedSummarizer(script), mode=mode, **kw)
    compactor.ctx = dataclasses.replace(compactor.ctx, speed=speed or ModelSpeed(prompt_tps=20, generation_tps=5))
    return compactor, conv


def test_a_slow_model_defrags_the_oldest_lines_of_a_long_summary_and_keeps_the_rest():
    def script(request):
        if request.kind == "defrag":
            return "- the first notes, consolidated: " + words(30, "c")
        n = len(compactor.ctx.summarizer.requests)
        return f"- step {n}: read the module and ran the tests, " + words(40, f"s{n}")

    compactor, conv = slow_compactor(script, mode="append", defrag_threshold=500, limit=200_000)
    conv.extend(agent_session(exchanges=30, size=300))
    budget = compactor.ctx.speed.piece_tokens(compactor.ctx.timeout_s, 0.6)
    while compactor.state.summary_tokens <= max(500, budget):
        assert compactor.micro_pass(conv).outcome == "absorbed"
    lines = compactor.rolling_summary.split("\n")
    before = len(conv)
    report = compactor.micro_pass(conv)
    assert report.outcome == "defrag" and report.fields["exchange_tokens"] == 0
    request = compactor.ctx.summarizer.requests[-1]
    assert request.kind == "defrag" and not request.messages  # the summary's piece alone
    assert request.summary.startswith(lines[0]) and lines[-1] not in request.summary
    assert len(conv) == before  # the marker replaced, nothing absorbed
    summary = compactor.rolling_summary
    assert summary.startswith("- the first notes, consolidated:") and summary.endswith(lines[-1])


def test_a_slow_model_gets_batch_compaction_in_smaller_pieces():
    calls = []

    def script(request):
        calls.append(sum(len(m.content) for m in request.messages))
        return "- condensed: " + words(40, f"b{len(calls)}")

    fast, conv = make_compactor(ScriptedSummarizer(script), limit=16_000)
    conv.extend(agent_session(exchanges=40, size=300))
    assert fast.compress(conv).outcome == "compressed"
    fast_calls, calls[:] = len(calls), []
    slow, conv = slow_compactor(script, limit=16_000)
    conv.extend(agent_session(exchanges=40, size=300))
    assert slow.compress(conv).outcome == "compressed"
    assert len(calls) > fast_calls


def test_a_timed_out_call_makes_the_next_pieces_smaller():
    def script(request):
        raise SummarizerError("timeout", "scripted timeout")

    compactor, conv = slow_compactor(script, speed=ModelSpeed(prompt_tps=170, generation_tps=45), limit=16_000)
    before = compactor.ctx.speed.piece_tokens(compactor.ctx.timeout_s, 0.6)
    conv.extend(agent_session(exchanges=6, size=300))
    compactor.micro_pass(conv)
    assert compactor.ctx.speed.piece_tokens(compactor.ctx.timeout_s, 0.6) < before


def test_completions_teach_the_speed():
    class Timed(ScriptedSummarizer):
        def summarize(self, request, *, max_tokens):
            self.requests.append(request)
            return Completion("- read the file and ran the tests.", "stop", 900, 40, 5.0, prompt_tps=180.0,
                              generation_tps=50.0)

    compactor, conv = make_compactor(Timed())
    compactor.ctx = dataclasses.replace(compactor.ctx, speed=ModelSpeed())
    conv.extend(agent_session(exchanges=6, size=100))
    compactor.micro_pass(conv)
    assert (compactor.ctx.speed.prompt_tps, compactor.ctx.speed.generation_tps) == (180.0, 50.0)


def test_speeds_kept_from_before_are_adopted_unless_newer_ones_were_measured():
    speed = ModelSpeed()
    assert speed.measured_at is None  # nothing measured: nothing for the store to keep
    assert speed.restore(176.0, 48.0, measured_at=1000.0)
    assert (speed.prompt_tps, speed.generation_tps, speed.measured_at) == (176.0, 48.0, 1000.0)
    speed.observe(100, 10, 1.0, prompt_tps=90.0, generation_tps=20.0)
    measured_now = speed.measured_at
    assert measured_now > 1000.0
    assert not speed.restore(176.0, 48.0, measured_at=1000.0)  # what this process measured since wins
    assert speed.prompt_tps == 90.0
    speed.timed_out()
    assert speed.measured_at >= measured_now  # a halving is a measurement too: it is kept
    fixed = instant()
    assert not fixed.restore(1.0, 1.0, measured_at=1000.0) and fixed.prompt_tps == 1e9


def test_one_speed_per_model_every_context_built_on_a_summarizer_learns_into_its_speed():
    class Owning(ScriptedSummarizer):
        def __init__(self):
            super().__init__()
            self.speed = ModelSpeed()

    summarizer = Owning()
    first = PassContext(summarizer=summarizer, counter=EstimateCounter(), window=ContextWindow(limit=8_000))
    second = PassContext(summarizer=summarizer, counter=EstimateCounter(), window=ContextWindow(limit=16_000))
    copy = dataclasses.replace(first, window=ContextWindow(limit=8_000, settings=CompressionConfig(micro_compact_mode="append")))
    assert first.speed is second.speed is copy.speed is summarizer.speed
    assert speed_for(ScriptedSummarizer()) is not speed_for(ScriptedSummarizer())  # none of its own: a fresh one
