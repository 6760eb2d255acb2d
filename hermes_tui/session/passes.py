"""Compaction passes in the background while the agent works, one at a time.

The agent loop asks for passes when the policy says so after a completed exchange
(``request``); a worker thread plans them on a snapshot (``Session.plan_pass``: the
passes of one decision, the summarizer runs outside the lock) and the loop publishes
them together between model calls (``publish_ready``), so a splice never lands while a
request is being built. Which pass starts, which waits and which is dropped, and what
follows one that ended, is the queue's (``session.pass_queue``, the app's queue too).
The loop waits for a pass (``settle``) only when the next request would not fit the
window, and at the end of the turn.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Protocol

from hermes_tui.compaction.engine import PassReport
from hermes_tui.compaction.state import PassResult
from hermes_tui.core.transcript import MICRO
from hermes_tui.session.pass_queue import PassQueue, PassRequest
from hermes_tui.util.logs import get_logger

if TYPE_CHECKING:
    from hermes_tui.session.session import Session

log = get_logger("passes")

__all__ = ["BackgroundPasses", "Passes"]


class Passes(Protocol):
    """What an agent turn asks of its passes: ``BackgroundPasses``, or in the app the chat
    screen's pass runner (``tui.screens.agent_bridge.ScreenPasses``)."""

    @property
    def busy(self) -> bool: ...
    def request(self, kind: str = MICRO) -> None: ...
    def publish_ready(self) -> PassReport | None: ...
    def settle(self, timeout: float | None = None) -> None: ...


class BackgroundPasses:
    def __init__(self, session: Session, on_published: Callable[[PassReport], None] | None = None) -> None:
        self.session = session
        self.on_published = on_published
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None
        self._planned: PassResult | list[PassResult] | None = None
        self._queue = PassQueue(session.after_splice)
        self.published: list[PassReport] = []
        self._early: list[PassReport] = []  # trims that landed ahead of their passes, to report
        session.on_trim_landed = self._trim_landed
        self.waited_s = 0.0  # time spent in ``settle``: how long the loop waited for compaction

    @property
    def busy(self) -> bool:
        return self._queue.running is not None

    @property
    def ready(self) -> bool:
        """A pass is planned and waits to be published."""
        return self._planned is not None

    @property
    def queued(self) -> int:
        """Passes asked for that have not started yet (the lag behind the agent)."""
        return len(self._queue.waiting)

    def request(self, kind: str = MICRO) -> None:
        """Run a pass of ``kind`` (what the policy decided last) now, or when the queue says."""
        with self._lock:
            started = self._queue.request(PassRequest.due(kind, self.session.due))
            if started is not None:
                self._start(started)

    def _start(self, request: PassRequest) -> None:
        self.session.begin_work()  # the session keeps its lease until the pass has landed
        self._thread = threading.Thread(target=self._plan, args=(request.kind,), name=f"{request.kind} pass",
                                        daemon=True)
        self._thread.start()

    def _plan(self, kind: str) -> None:
        try:
            planned = self.session.plan_pass() if kind == MICRO else self.session.plan_compress(trim=True)
        except Exception:  # a bug must not break the turn: the transcript stays as it is
            log.exception("%s pass failed while planning; the transcript is unchanged", kind)
            planned = None
        with self._lock:
            self._planned = planned or None  # nothing planned: already under the decision's mark
            if self._planned is None:
                self._finished()

    def _finished(self) -> None:
        """(under ``_lock``) The pass in flight is over: start what the queue says comes next."""
        self._planned = None
        self.session.end_work()
        following = self._queue.finished()
        if following is not None:
            self._start(following)

    def _trim_landed(self, report: PassReport) -> None:
        """(the planning thread) A trim landed ahead of its passes: reported by the loop's thread."""
        with self._lock:
            self._early.append(report)

    def _report(self, report: PassReport) -> None:
        self.published.append(report)
        if self.on_published:
            self.on_published(report)

    def publish_ready(self) -> PassReport | None:
        """Publish the planned pass, if one is ready (the loop calls this between model calls).
        A trim that already landed ahead of it is reported first."""
        with self._lock:
            early, self._early = self._early, []
        for landed in early:
            self._report(landed)
        with self._lock:
            planned = self._planned
            if planned is None:
                return None
            try:
                report = self.session.publish_pass(planned)
            except Exception:
                log.exception("%s failed while publishing; the transcript is unchanged", self._queue.running)
                report = None
            self._finished()
        if report is not None:
            self._report(report)
        return report

    def settle(self, timeout: float | None = None) -> None:
        """Wait for every pass in flight or asked for, publishing each."""
        started = time.perf_counter()
        try:
            self._settle(timeout)
        finally:
            self.waited_s += time.perf_counter() - started

    def _settle(self, timeout: float | None) -> None:
        while True:
            thread = self._thread
            if thread is not None:
                thread.join(timeout)
                if thread.is_alive():
                    return
            self.publish_ready()
            with self._lock:
                if self._queue.running is None:
                    return
                if self._thread is thread and self._planned is None and (thread is None or not thread.is_alive()):
                    return
