"""The compaction policy (pure logic) and the engine's passes of one decision.

Expected values come from the settings by hand (threshold x marks), never from the
policy's own properties."""

from __future__ import annotations

import dataclasses

from helpers import ScriptedSummarizer, exchange, failing, make_compactor, user

from hermes_tui.compaction.policy import CompactionPolicy
from hermes_tui.compaction.window import ContextWindow
from hermes_tui.config import CompressionConfig
from hermes_tui.core.transcript import BATCH, MICRO

LIMIT = 10_000  # threshold 8,000: high 6,800, low 4,400


def policy(**kw) -> CompactionPolicy:
    return CompactionPolicy(ContextWindow(limit=LIMIT, settings=CompressionConfig(**kw)))


def test_watermark_waits_for_the_high_mark_then_asks_down_to_the_low_mark():
    p = policy()
    assert p.after_exchange(6_800).kind is None  # at the mark, not over it
    decision = p.after_exchange(6_801)
    assert (decision.kind, decision.down_to, decision.exchange) == (MICRO, 4_400, 2)


def test_watermark_after_a_splice_that_ends_close_under_the_high_mark_waits_a_span_more():
    p = policy()
    p.landed(4_000)  # well under: the high mark holds
    assert p.after_exchange(6_801).kind == MICRO
    p.landed(6_000)  # 6,000 + 2,400 / 2 > 6,800: the next splice waits until 6,000 + 2,400
    assert p.after_exchange(8_000).kind is None
    assert p.after_exchange(8_001).kind == MICRO  # and never past the threshold (8,000)


def test_per_exchange_every_n():
    p = policy(policy="per_exchange", micro_compact_every_n_turns=2)
    assert [p.after_exchange(10).kind for _ in range(4)] == [None, MICRO, None, MICRO]
    assert p.after_exchange(10).down_to is None


def test_per_turn_counts_only_exchanges_that_end_a_turn():
    p = policy(policy="per_turn")
    assert p.after_exchange(10, turn_ended=False).kind is None
    assert p.after_exchange(10, turn_ended=False).kind is None
    assert p.after_exchange(10, turn_ended=True).kind == MICRO
    assert p.exchanges == 3


def test_batch_when_over_the_threshold_and_no_micro_pass_is_due():
    assert policy(micro_compact=False).after_exchange(8_001).kind == BATCH
    assert policy(micro_compact=False).after_exchange(8_000).kind is None
    assert policy(policy="per_turn").after_exchange(8_001, turn_ended=False).kind == BATCH
    assert policy(enabled=False).after_exchange(9_999).kind is None


def test_batch_follows_a_micro_splice_that_left_the_transcript_over_the_threshold():
    p = policy()
    assert p.after_splice(MICRO, 8_001) == BATCH
    assert p.after_splice(MICRO, 8_000) is None  # at the threshold, not over it
    assert p.after_splice(BATCH, 9_999) is None  # after batch the next exchange decides
    assert policy(enabled=False).after_splice(MICRO, 9_999) is None


def _long_session(compactor, conv, exchanges: int) -> None:
    conv.append(user("Fix the bug"))
    for _ in range(exchanges):
        conv.extend(exchange(size=200))


def test_the_passes_of_one_decision_are_planned_on_each_other_and_publish_as_one_splice():
    compactor, conv = make_compactor(ScriptedSummarizer(), limit=8_000, policy="watermark", target_ratio=0.05)
    compactor.ctx = dataclasses.replace(compactor.ctx, pressure_share=None)  # one exchange a pass
    _long_session(compactor, conv, 12)
    decision = compactor.decide(conv)
    assert decision.kind == MICRO
    before_ids = [m.id for m in conv.messages]
    planned = compactor.plan_micro_passes(list(conv.messages), decision, epoch=conv.epoch)
    assert len(planned) > 1 and [m.id for m in conv.messages] == before_ids  # planning changes nothing
    reports = compactor.publish_all(conv, planned)
    assert [r.outcome for r in reports] == ["absorbed"] * len(planned)
    assert conv.total_tokens <= decision.down_to or len(planned) == 64
    assert compactor.state.passes_total == len(planned)
    assert sum(1 for m in conv.messages if m.is_marker) == 1
    # The running total is what the passes really saved.
    saved = -sum(r.fields["tokens_delta"] for r in reports)
    assert compactor.state.tokens_saved_total == saved



def _planned_passes(compactor, conv):
    compactor.ctx = dataclasses.replace(compactor.ctx, pressure_share=None)  # one exchange a pass
    _long_session(compactor, conv, 12)
    decision = compactor.decide(conv)
    planned = compactor.plan_micro_passes(list(conv.messages), decision, epoch=conv.epoch)
    assert len(planned) > 2
    return planned


def test_after_a_pass_whose_store_write_failed_the_passes_planned_on_it_are_dropped():
    compactor, conv = make_compactor(ScriptedSummarizer(), limit=8_000, policy="watermark", target_ratio=0.05)
    planned = _planned_passes(compactor, conv)
    before, state = list(conv.messages), compactor.state
    writes = []

    def disk_full(result):
        writes.append(result)
        raise OSError("disk full")

    reports = compactor.publish_all(conv, planned, disk_full)
    assert [r.outcome for r in reports] == ["store_failed"]
    assert len(writes) == 1 and conv.messages == before
    assert compactor.state.marker_id == state.marker_id and compactor.state.cursor == state.cursor


def test_after_a_stale_pass_the_passes_planned_on_it_are_dropped():
    compactor, conv = make_compactor(ScriptedSummarizer(), limit=8_000, policy="watermark", target_ratio=0.05)
    planned = _planned_passes(compactor, conv)
    conv.replace_all(list(conv.messages)[:-1])  # rewound while the passes were planned
    before, writes = list(conv.messages), []
    reports = compactor.publish_all(conv, planned, writes.append)
    assert [r.outcome for r in reports] == ["stale"]
    assert writes == [] and conv.messages == before


def test_the_synchronous_path_runs_the_same_passes():
    compactor, conv = make_compactor(ScriptedSummarizer(), limit=8_000, policy="watermark", target_ratio=0.05)
    compactor.ctx = dataclasses.replace(compactor.ctx, pressure_share=None)
    _long_session(compactor, conv, 12)
    reports = compactor.finalize_turn(conv)
    assert len(reports) > 1 and all(r.kind == "micro" for r in reports)
    assert conv.total_tokens <= int(0.55 * int(8_000 * 0.80))


def test_the_synchronous_path_follows_a_micro_splice_left_over_the_threshold_with_batch():
    # Every summary fails: the micro pass leaves the transcript as large as it was.
    for exchanges, kinds in ((40, ["micro", "batch"]), (10, ["micro"])):
        compactor, conv = make_compactor(ScriptedSummarizer(failing()), limit=8_000, trim=False)
        _long_session(compactor, conv, exchanges)
        assert (conv.total_tokens > int(8_000 * 0.80)) == (exchanges == 40)
        assert [r.kind for r in compactor.finalize_turn(conv)] == kinds
