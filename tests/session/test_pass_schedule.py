"""The queue that decides which compaction pass runs next (``PassQueue``), on its own.

No threads and no session: the test plays the caller (runs what ``request`` and
``finished`` hand back) and sets the transcript's size that the real policy judges
after each pass, over a 10,000-token window (threshold 8,000). Pinned: passes run one at
a time in the order asked; of policy requests, one waiting batch and one waiting
down-to-the-mark micro are enough, a one-pass micro always waits; a manual ``/compact``
is never dropped; batch follows a micro pass that left the transcript over the threshold,
ahead of what waits, and nothing follows one that left it at or under the threshold."""

from __future__ import annotations

from hermes_tui.compaction.policy import CompactionPolicy, Decision
from hermes_tui.compaction.window import ContextWindow
from hermes_tui.config import CompressionConfig
from hermes_tui.core.transcript import BATCH, MICRO
from hermes_tui.session.pass_queue import PassQueue, PassRequest

THRESHOLD = 8_000

ONE_PASS = PassRequest(MICRO)  # per_exchange / per_turn: folds one exchange
TO_MARK = PassRequest(MICRO, to_mark=True)  # watermark: passes down to the low mark
AUTO_BATCH = PassRequest(BATCH)


class Transcript:
    """The size the policy judges when a pass ends."""

    def __init__(self, tokens: int = 3_000, *, enabled: bool = True) -> None:
        self.tokens = tokens
        self.policy = CompactionPolicy(ContextWindow(limit=10_000, settings=CompressionConfig(enabled=enabled)))

    def after_splice(self, kind: str) -> str | None:
        return self.policy.after_splice(kind, self.tokens)


def drain(queue: PassQueue) -> list[PassRequest]:
    """Run what is running and everything that follows it, in order."""
    ran = [queue.running] if queue.running is not None else []
    while (following := queue.finished()) is not None:
        ran.append(following)
    return ran


def test_the_first_request_starts_and_the_rest_wait_in_the_order_asked():
    queue = PassQueue(Transcript().after_splice)
    assert queue.request(ONE_PASS) is ONE_PASS and queue.running is ONE_PASS
    assert queue.request(AUTO_BATCH) is None and queue.request(ONE_PASS) is None
    assert queue.waiting == (AUTO_BATCH, ONE_PASS) and not queue.idle
    assert drain(queue) == [ONE_PASS, AUTO_BATCH, ONE_PASS] and queue.idle


def test_one_pass_micro_requests_each_wait():
    queue = PassQueue(Transcript().after_splice)
    queue.request(ONE_PASS)
    for _ in range(3):
        queue.request(ONE_PASS)
    assert queue.waiting == (ONE_PASS,) * 3


def test_one_waiting_batch_and_one_waiting_micro_to_the_mark_are_enough():
    queue = PassQueue(Transcript().after_splice)
    queue.request(TO_MARK)
    for request in (TO_MARK, AUTO_BATCH, TO_MARK, AUTO_BATCH, ONE_PASS):
        queue.request(request)
    assert queue.waiting == (TO_MARK, AUTO_BATCH, ONE_PASS)


def test_a_manual_compact_is_never_dropped_nor_drops_one():
    queue = PassQueue(Transcript().after_splice)
    manual = PassRequest(BATCH, focus="the parser", manual=True)
    queue.request(ONE_PASS)
    queue.request(AUTO_BATCH)
    queue.request(manual)
    queue.request(manual)  # asked twice: runs twice, each says how it went
    queue.request(AUTO_BATCH)  # a manual one waiting does not count as the batch waiting
    assert queue.waiting == (AUTO_BATCH, manual, manual)


def test_the_due_request_passes_to_the_mark_only_for_a_micro_decision_with_one():
    assert PassRequest.due(MICRO, Decision(3, MICRO, down_to=4_400)) == TO_MARK
    assert PassRequest.due(MICRO, Decision(3, MICRO)) == ONE_PASS
    assert PassRequest.due(BATCH, Decision(3, BATCH)) == AUTO_BATCH
    assert PassRequest.due(MICRO, None) == ONE_PASS


def test_batch_follows_a_micro_pass_that_left_the_transcript_over_the_threshold_ahead_of_what_waits():
    transcript = Transcript(THRESHOLD + 1)
    queue = PassQueue(transcript.after_splice)
    queue.request(TO_MARK)
    queue.request(ONE_PASS)
    queue.request(AUTO_BATCH)  # made redundant by the follow-up: one batch is enough
    following = queue.finished()
    assert following == AUTO_BATCH and queue.running == AUTO_BATCH
    assert queue.waiting == (ONE_PASS,)
    transcript.tokens = 3_000  # what the batch left
    assert drain(queue) == [AUTO_BATCH, ONE_PASS]


def test_the_follow_up_keeps_a_manual_compact_waiting():
    queue = PassQueue(Transcript(THRESHOLD + 1).after_splice)
    manual = PassRequest(BATCH, manual=True)
    queue.request(ONE_PASS)
    queue.request(manual)
    assert queue.finished() == AUTO_BATCH and queue.waiting == (manual,)


def test_nothing_follows_a_micro_pass_that_left_it_at_the_threshold_or_a_batch_or_compaction_off():
    for transcript, ended in ((Transcript(THRESHOLD), ONE_PASS), (Transcript(THRESHOLD + 1), AUTO_BATCH),
                              (Transcript(THRESHOLD + 1, enabled=False), ONE_PASS)):
        queue = PassQueue(transcript.after_splice)
        queue.request(ended)
        assert queue.finished() is None and queue.idle
