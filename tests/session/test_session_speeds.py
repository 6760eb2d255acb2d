"""A compression model's measured speeds go from one session to the next through the store
(hermes_tui/session/speeds.py): a new session, in a new process, sizes its first defrag and
batch from them. Real SQLite files; the summarizer is scripted and reports its speeds as a
llama.cpp server or MLX does."""

from __future__ import annotations

import dataclasses

from helpers import ScriptedSummarizer, agent_session

from hermes_tui.compaction.batch import BATCH_OUTPUT_RATIO
from hermes_tui.compaction.micro import DEFRAG_MAX_RATIO
from hermes_tui.compaction.sizing import ASSUMED_PROMPT_TPS, ModelSpeed
from hermes_tui.compaction.summarizer import SummarizerError
from hermes_tui.config import Config
from hermes_tui.providers.extractive.summarizer import ExtractiveSummarizer
from hermes_tui.providers.openai.summarizer import OpenAISummarizer
from hermes_tui.session.wiring import open_session
from hermes_tui.store import Store
from hermes_tui.store.speeds import StoredSpeed, list_speeds, load_speed

KEY = "scripted:qwen2.5-coder-0.5b@http://127.0.0.1:8080/v1"
FAST = (400.0, 100.0)  # prompt and generation tokens/s: far above the assumed 50 and 12


class NoChat:
    """The chat model: these tests never ask it anything."""

    model_name = "none"
    max_tokens = 16


class MeasuredSummarizer(ScriptedSummarizer):
    """A model that reports its own speeds with each answer, or times out when told to."""

    def __init__(self, tps: tuple[float, float] = FAST) -> None:
        super().__init__()
        self.speed_key = KEY
        self.speed = ModelSpeed()  # a fresh process: nothing measured yet
        self.tps = tps
        self.time_out = False

    def summarize(self, request, *, max_tokens):
        if self.time_out:
            raise SummarizerError("timeout", "scripted timeout")
        done = super().summarize(request, max_tokens=max_tokens)
        return dataclasses.replace(done, prompt_tps=self.tps[0], generation_tps=self.tps[1])


def config() -> Config:
    return Config().with_overrides({
        "model.context_length": 4096, "auxiliary.compression.provider": "extractive",
        "compression.policy": "per_exchange", "compression.protect_first_n": 1, "compression.target_ratio": 0.05,
    })


def run_a_pass(session) -> str:
    session.resolve_context_window()
    session.conv.extend(agent_session(exchanges=8, size=50))
    session.store.flush(session.info.id, session.conv.messages)
    return session.publish_pass(session.plan_pass()).outcome


def test_a_new_session_in_a_new_process_sizes_its_first_defrag_and_batch_from_the_stored_speeds(tmp_path):
    path = tmp_path / "state.db"
    with Store(path) as store:
        first = open_session(config(), store, title="measures", chat=NoChat(), summarizer=MeasuredSummarizer())
        assert first.compactor.ctx.speed.prompt_tps == ASSUMED_PROMPT_TPS  # nothing kept yet
        assert first.usage()["compression_speed"]["measured"] is False
        assert run_a_pass(first) == "absorbed"
        stored = load_speed(store, KEY)
        assert (stored.prompt_tps, stored.generation_tps) == FAST
        first.close()

    with Store(path) as store:  # a new start: new store, new summarizer, a new session
        second = open_session(config(), store, title="sized", chat=NoChat(), summarizer=MeasuredSummarizer())
        ctx = second.compactor.ctx
        assert (ctx.speed.prompt_tps, ctx.speed.generation_tps) == FAST
        assert second.usage()["compression_speed"] == {"prompt_tps": FAST[0], "generation_tps": FAST[1], "measured": True}
        fast = ModelSpeed(*FAST)
        assert ctx.speed.piece_tokens(ctx.timeout_s, DEFRAG_MAX_RATIO) == fast.piece_tokens(ctx.timeout_s, DEFRAG_MAX_RATIO)
        assert ctx.speed.piece_tokens(ctx.timeout_s, BATCH_OUTPUT_RATIO) > ModelSpeed().piece_tokens(
            ctx.timeout_s, BATCH_OUTPUT_RATIO)
        second.close()


def test_a_turn_finalized_in_line_keeps_what_its_pass_measured(tmp_path):
    """``finalize_turn`` (headless runs) publishes its passes itself: it keeps the speeds too."""
    with Store(tmp_path / "state.db") as store:
        session = open_session(config(), store, title="headless", chat=NoChat(), summarizer=MeasuredSummarizer())
        session.resolve_context_window()
        session.conv.extend(agent_session(exchanges=8, size=50))
        store.flush(session.info.id, session.conv.messages)
        assert [r.outcome for r in session.finalize_turn()][:1] == ["absorbed"]
        stored = load_speed(store, KEY)
        assert stored is not None and (stored.prompt_tps, stored.generation_tps) == FAST
        session.close()


def test_a_timed_out_call_halves_the_stored_speeds(tmp_path):
    with Store(tmp_path / "state.db") as store:
        summarizer = MeasuredSummarizer()
        session = open_session(config(), store, title="times out", chat=NoChat(), summarizer=summarizer)
        assert run_a_pass(session) == "absorbed"
        summarizer.time_out = True
        session.conv.extend(agent_session(exchanges=4, size=50)[1:])
        store.flush(session.info.id, session.conv.messages)
        assert session.publish_pass(session.plan_pass()).outcome == "summarize_failed"
        stored = load_speed(store, KEY)
        assert (stored.prompt_tps, stored.generation_tps) == (FAST[0] / 2, FAST[1] / 2)
        session.close()


def test_the_extractive_summarizer_stores_nothing(tmp_path):
    with Store(tmp_path / "state.db") as store:
        session = open_session(config(), store, title="no model", chat=NoChat(), summarizer=ExtractiveSummarizer())
        assert session.kept_speed is None and session.usage()["compression_speed"] is None
        assert run_a_pass(session) == "absorbed"
        assert list_speeds(store) == []
        session.close()


def test_speeds_newer_than_the_stored_ones_are_kept_and_not_overwritten_on_open(tmp_path):
    """The app hands one summarizer to every session: opening one after another session
    measured keeps the newer figures in memory, not the older ones the store holds."""
    with Store(tmp_path / "state.db") as store:
        from hermes_tui.store.speeds import save_speed

        save_speed(store, StoredSpeed(KEY, 60.0, 16.0, 1.0))  # measured long ago
        summarizer = MeasuredSummarizer()
        summarizer.speed.observe(100, 10, 1.0, prompt_tps=FAST[0], generation_tps=FAST[1])  # measured now
        session = open_session(config(), store, title="newer", chat=NoChat(), summarizer=summarizer)
        assert session.compactor.ctx.speed is summarizer.speed
        assert (summarizer.speed.prompt_tps, summarizer.speed.generation_tps) == FAST
        assert run_a_pass(session) == "absorbed"
        assert (load_speed(store, KEY).prompt_tps, load_speed(store, KEY).generation_tps) == FAST
        session.close()


def test_two_models_behind_one_server_and_one_model_on_two_servers_are_kept_apart():
    keys = {
        OpenAISummarizer("http://127.0.0.1:8080/v1", "qwen2.5-coder-0.5b").speed_key,
        OpenAISummarizer("http://127.0.0.1:8080/v1/", "qwen2.5-coder-1.5b").speed_key,
        OpenAISummarizer("http://gpu-box:8080/v1", "qwen2.5-coder-0.5b").speed_key,
    }
    assert len(keys) == 3
