"""Which compaction pass runs next: the one queue of the app and the agent loop.

Passes of a session run in the background one at a time: the app's chat screen
(``tui.screens.chat_compaction``) and the agent loop of ``run`` (``session.passes``)
each run them in their own way (a Textual thread worker; a daemon thread, published
between model calls), and both ask this queue what to start. The rules:

* One at a time. A request made while no pass runs starts now; one made while a pass
  runs waits, in the order asked.
* One waiting is enough, for requests the policy made (not ``/compact``): a batch request
  is dropped when a batch the policy asked for already waits (it compacts what this one
  would); a micro request that passes down to a mark (a ``watermark`` decision) is dropped
  when such a request already waits (it passes down to the mark then current). A one-pass
  micro request (``per_exchange``, ``per_turn``) always waits: each folds one exchange, so
  dropping one would let the unabsorbed exchanges pile up.
* A manual request (``/compact``, with its focus) is never dropped, and never counts as the
  one waiting.
* When a pass ends (landed, failed, or nothing to do), the policy says what follows it
  (``CompactionPolicy.after_splice``: batch when a micro splice left the transcript over
  the threshold, as ``Compactor.finalize_turn`` does). That follow-up starts next, ahead of
  the requests waiting (the next chat request must fit), and makes a waiting batch the
  policy asked for redundant. Otherwise the first request waiting starts.

Not thread-safe: each caller serializes its calls (the agent loop under its lock, the
app on its event loop).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable
from dataclasses import dataclass

from hermes_tui.compaction.policy import Decision
from hermes_tui.core.transcript import BATCH, MICRO


@dataclass(frozen=True)
class PassRequest:
    kind: str  # MICRO or BATCH
    to_mark: bool = False  # MICRO: passes down to the decision's mark, not one pass
    focus: str | None = None  # BATCH: what the summary should keep (``/compact``'s argument)
    manual: bool = False  # ``/compact``: never dropped; the app says how it went

    @classmethod
    def due(cls, kind: str, decision: Decision | None) -> PassRequest:
        """What the policy asked for (``kind``) after the exchange it decided on (``decision``)."""
        to_mark = kind == MICRO and decision is not None and decision.down_to is not None
        return cls(kind, to_mark=to_mark)

    def covers(self, other: PassRequest) -> bool:
        """Whether ``self``, waiting, does what ``other`` would (so ``other`` can be dropped)."""
        if self.manual or other.manual or self.kind != other.kind:
            return False
        return self.kind == BATCH or (self.to_mark and other.to_mark)


class PassQueue:
    def __init__(self, after_splice: Callable[[str], str | None]) -> None:
        """``after_splice(kind)``: what the policy says follows a pass of ``kind`` that has
        just ended, on the transcript as it is then (``Session.after_splice``)."""
        self._after_splice = after_splice
        self.running: PassRequest | None = None
        self._waiting: deque[PassRequest] = deque()

    @property
    def idle(self) -> bool:
        """No pass runs or waits."""
        return self.running is None and not self._waiting

    @property
    def waiting(self) -> tuple[PassRequest, ...]:
        return tuple(self._waiting)

    def request(self, request: PassRequest) -> PassRequest | None:
        """``request`` if it starts now (the caller runs it, then calls ``finished``); None
        when it waits or a request waiting already covers it."""
        if self.running is None:
            self.running = request
            return request
        if not any(waiting.covers(request) for waiting in self._waiting):
            self._waiting.append(request)
        return None

    def finished(self) -> PassRequest | None:
        """The running pass has ended: the request to start now (the caller runs it, then
        calls ``finished`` again), or None when nothing follows or waits."""
        ended, self.running = self.running, None
        follow_up = self._after_splice(ended.kind) if ended is not None else None
        if follow_up is not None:
            request = PassRequest(follow_up)
            self._waiting = deque(w for w in self._waiting if not w.covers(request))
            self._waiting.appendleft(request)
        if self._waiting:
            self.running = self._waiting.popleft()
        return self.running
