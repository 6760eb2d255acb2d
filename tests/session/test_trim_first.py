"""Over the threshold, the trim stage lands before the (slow) passes, or the batch
compaction, planned after it.

A small model on a CPU takes minutes over a decision's passes, and over the threshold the
next request waits for them. The trim needs no model: it is published as soon as it is
planned, so the transcript (and the store) are trimmed while the model still works. Under
the threshold it lands with the passes, in one publish (one prompt-cache break). Real
SQLite file; the summarizer is scripted and held at a gate so the moment in between can
be looked at.
"""

from __future__ import annotations

import dataclasses
import threading

import pytest
from helpers import ScriptedSummarizer, agent_session

from hermes_tui.compaction.trim import is_trimmed
from hermes_tui.config import Config
from hermes_tui.session.passes import BackgroundPasses
from hermes_tui.session.wiring import open_session
from hermes_tui.store import Store

GATE_S = 30  # bounds a hang only
BULKY = "\n".join(f"row {n}: status=ok elapsed={n * 7}ms path=src/module_{n}.py" for n in range(260))


class NoChat:
    model_name = "none"
    max_tokens = 16


class GatedSummarizer(ScriptedSummarizer):
    """Answers once the test opens the gate; says when it has been asked."""

    def __init__(self) -> None:
        super().__init__()
        self.asked = threading.Event()
        self.gate = threading.Event()

    def summarize(self, request, *, max_tokens):
        self.asked.set()
        assert self.gate.wait(GATE_S), "the gate was never opened"
        return super().summarize(request, max_tokens=max_tokens)


def transcript(exchanges: int = 8):
    """An agent session whose third tool result is bulky (~3,500 tokens): a trim candidate,
    behind the exchange the first pass absorbs."""
    messages = agent_session(exchanges=exchanges, size=50)
    third = [i for i, m in enumerate(messages) if m.role == "tool"][2]
    messages[third] = dataclasses.replace(messages[third], content=BULKY)
    return messages


def session_on(store: Store, window: int, summarizer, exchanges: int = 8):
    config = Config().with_overrides({
        "model.context_length": window, "compression.policy": "per_exchange",
        "compression.protect_first_n": 1, "compression.target_ratio": 0.05,
    })
    session = open_session(config, store, title="trim first", chat=NoChat(), summarizer=summarizer)
    session.resolve_context_window()
    session.conv.extend(transcript(exchanges))
    store.flush(session.info.id, session.conv.messages)
    return session


def trimmed_now(session) -> tuple[bool, bool]:
    """Whether the transcript, and the store, hold the trimmed result."""
    in_transcript = any(is_trimmed(m) for m in session.conv.messages)
    in_store = any(is_trimmed(m) for m in session.store.load_active(session.info.id))
    return in_transcript, in_store


@pytest.mark.parametrize(("window", "over"), [(6_000, True), (9_000, False)])
def test_over_the_threshold_the_trim_lands_while_the_model_still_works(tmp_path, window, over):
    with Store(tmp_path / "state.db") as store:
        summarizer = GatedSummarizer()
        session = session_on(store, window, summarizer)
        assert session.over_threshold() is over
        before = session.conv.total_tokens
        planned: list = []
        planner = threading.Thread(target=lambda: planned.append(session.plan_pass()), daemon=True)
        planner.start()
        assert summarizer.asked.wait(GATE_S), "the pass never asked the model"
        # The model is at work: over the threshold the trim has already landed, stored.
        assert trimmed_now(session) == (over, over)
        assert (session.conv.total_tokens < before) is over
        summarizer.gate.set()
        planner.join(GATE_S)
        report = session.publish_pass(planned[0])
        assert report.outcome == "absorbed"
        assert trimmed_now(session) == (True, True)  # under the threshold it landed with the pass only
        kinds = [r.kind for r in planned[0]]
        assert kinds == (["micro"] if over else ["trim", "micro"])
        session.close()


def test_over_the_threshold_a_batch_the_policy_asked_for_lands_its_trim_first(tmp_path):
    with Store(tmp_path / "state.db") as store:
        summarizer = GatedSummarizer()
        session = session_on(store, 3_000, summarizer, exchanges=40)  # still over the threshold once trimmed
        planned: list = []
        planner = threading.Thread(target=lambda: planned.append(session.plan_compress(trim=True)), daemon=True)
        planner.start()
        assert summarizer.asked.wait(GATE_S), "the batch never asked the model"
        assert trimmed_now(session) == (True, True)
        summarizer.gate.set()
        planner.join(GATE_S)
        assert [r.kind for r in planned[0]] == ["batch"]
        assert session.publish_pass(planned[0]).outcome == "compressed"
        session.close()


@pytest.mark.parametrize(("window", "over"), [(6_000, True), (9_000, False)])
def test_the_agent_loop_reports_a_trim_that_landed_ahead_of_its_passes(tmp_path, window, over):
    """``run``'s background passes: the early trim is reported once, by the loop's thread,
    ahead of the passes planned after it."""
    with Store(tmp_path / "state.db") as store:
        summarizer = GatedSummarizer()
        session = session_on(store, window, summarizer)
        heard: list[tuple[str, str]] = []
        passes = BackgroundPasses(session, on_published=lambda r: heard.append((r.kind, threading.current_thread().name)))
        passes.request("micro")
        assert summarizer.asked.wait(GATE_S), "the pass never asked the model"
        assert heard == []  # nothing reported from the planning thread
        summarizer.gate.set()
        passes.settle(timeout=GATE_S)
        loop = threading.current_thread().name
        # Over the threshold the trim landed first and is reported on its own; under it, it
        # landed with the pass, in one publish, whose report is the pass's.
        expected = ["trim", "micro"] if over else ["micro"]
        assert heard == [(kind, loop) for kind in expected]
        assert [r.kind for r in passes.published] == expected
        assert (session.last_pass.kind, trimmed_now(session)) == ("micro", (True, True))
        session.close()
