"""The queue of background passes (``BackgroundPasses``), through its public methods.

A session double stands for ``Session``: it records which kind of pass it was asked to
plan, in order, and holds the first one at a gate so that the requests made meanwhile
queue up. What is pinned: passes never overlap and run in the order asked for; a
one-pass micro request always runs (each folds one exchange); of requests that pass
down to a mark, and of batch requests, one waiting is enough; a batch the policy asked
for runs the trim stage first (``plan_compress(trim=True)``); a micro splice that leaves
the transcript over the threshold is followed by batch compaction, as in the synchronous
path (``Compactor.finalize_turn``).

The double's transcript is a token count the test sets (``tokens``); the policy that says
what follows a pass is the real one, over a 10,000-token window (threshold 8,000)."""

from __future__ import annotations

import threading

import pytest

from hermes_tui.compaction.engine import PassReport
from hermes_tui.compaction.policy import CompactionPolicy, Decision
from hermes_tui.compaction.state import PassResult
from hermes_tui.compaction.window import ContextWindow
from hermes_tui.core.transcript import BATCH, MICRO
from hermes_tui.session.passes import BackgroundPasses

GATE_S = 30  # bounds a hang only
THRESHOLD = 8_000  # of the double's 10,000-token window
UNDER = 3_000  # what a batch leaves


class QueueSession:
    """What ``BackgroundPasses`` asks of a session, recorded."""

    def __init__(self, down_to: int | None) -> None:
        self.due = Decision(1, MICRO, down_to)
        self.gate = threading.Event()
        self.planned: list[str] = []   # the kinds planned, in order
        self.batch_trims: list[bool] = []  # ``trim`` of each batch planned
        self.in_flight = 0
        self.most_in_flight = 0
        self.tokens = UNDER  # the transcript's size; a batch brings it back to ``UNDER``
        self.policy = CompactionPolicy(ContextWindow(limit=10_000))
        self._lock = threading.Lock()

    def begin_work(self) -> None:
        with self._lock:
            self.in_flight += 1
            self.most_in_flight = max(self.most_in_flight, self.in_flight)

    def end_work(self) -> None:
        with self._lock:
            self.in_flight -= 1

    def _plan(self, kind: str) -> list[PassResult]:
        self.planned.append(kind)
        assert self.gate.wait(GATE_S), "the gate was never opened"
        return [PassResult(kind, "absorbed", state=None)]

    def plan_pass(self) -> list[PassResult]:
        return self._plan("micro")

    def plan_compress(self, focus: str | None = None, *, trim: bool = False) -> list[PassResult]:
        self.batch_trims.append(trim)
        return self._plan("batch")

    def publish_pass(self, planned) -> PassReport:
        results = planned if isinstance(planned, list) else [planned]
        if results[-1].kind == BATCH:
            self.tokens = UNDER
        return PassReport(results[-1].kind, results[-1].outcome)

    def after_splice(self, kind: str) -> str | None:
        return self.policy.after_splice(kind, self.tokens)


def run(session: QueueSession, requests: list[str]) -> BackgroundPasses:
    """A micro pass in flight (held at the gate), then ``requests`` made meanwhile."""
    passes = BackgroundPasses(session)
    passes.request("micro")
    assert passes.busy
    for kind in requests:
        passes.request(kind)
    return passes


def settle(session: QueueSession, passes: BackgroundPasses) -> None:
    session.gate.set()
    passes.settle(GATE_S)
    assert not passes.busy and passes.queued == 0
    assert session.in_flight == 0 and session.most_in_flight == 1  # one at a time
    assert session.batch_trims == [True] * session.planned.count(BATCH)  # the trim stage first


def test_one_pass_micro_requests_each_run_in_the_order_asked_with_batch_between():
    session = QueueSession(down_to=None)  # a one-pass decision: each request folds one exchange
    passes = run(session, ["micro", BATCH, "micro", BATCH])
    assert passes.queued == 3  # the second batch: one already waits
    settle(session, passes)
    assert session.planned == ["micro", "micro", BATCH, "micro"]
    assert [r.kind for r in passes.published] == session.planned


@pytest.mark.parametrize("asked", [["micro", "micro", "micro"], [BATCH, BATCH, BATCH]])
def test_one_waiting_pass_of_a_kind_is_enough_for_down_to_decisions_and_batch(asked):
    session = QueueSession(down_to=4_400)  # passes down to a mark: one waiting covers the rest
    passes = run(session, asked)
    assert passes.queued == 1
    settle(session, passes)
    assert session.planned == ["micro", asked[0]]


def test_a_down_to_decision_keeps_micro_and_batch_in_the_order_asked():
    session = QueueSession(down_to=4_400)
    passes = run(session, ["micro", BATCH, "micro", BATCH])
    assert passes.queued == 2
    settle(session, passes)
    assert session.planned == ["micro", "micro", BATCH]


@pytest.mark.parametrize("down_to", [None, 4_400])
def test_a_micro_splice_that_leaves_the_transcript_over_the_threshold_is_followed_by_batch(down_to):
    session = QueueSession(down_to=down_to)
    session.tokens = THRESHOLD + 1  # what the micro passes left
    passes = run(session, [])
    settle(session, passes)
    assert session.planned == ["micro", BATCH]
    assert [r.kind for r in passes.published] == ["micro", BATCH]


def test_the_follow_up_batch_goes_before_the_passes_waiting():
    session = QueueSession(down_to=None)
    session.tokens = THRESHOLD + 1
    passes = run(session, ["micro"])
    settle(session, passes)
    # The batch brings it under the threshold: the waiting micro pass is not followed by another.
    assert session.planned == ["micro", BATCH, "micro"]


def test_no_batch_follows_a_micro_splice_that_leaves_the_transcript_at_the_threshold():
    session = QueueSession(down_to=4_400)
    session.tokens = THRESHOLD
    passes = run(session, [])
    settle(session, passes)
    assert session.planned == ["micro"]
