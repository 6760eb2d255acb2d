"""The chat screen's compaction: passes (and batch compaction) in the background, one at a time.

A pass is planned on a snapshot in an app thread worker and published under the
session's lock (``Session.publish_pass`` drops a stale splice whole); the screen then
brings the message list in step with the transcript. Which pass starts, which waits and
which is dropped, and what follows one that ended, is the queue's
(``session.pass_queue``, the agent loop of ``run`` asks the same one): the passes the
agent loop asks for after each exchange, and ``/compact`` (never dropped). The chat screen
owns one ``PassRunner`` and hands it the messages below.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from functools import partial
from typing import TYPE_CHECKING, Any

from textual.message import Message as UIMessage
from textual.worker import get_current_worker

from hermes_tui.compaction.engine import PassReport
from hermes_tui.core.transcript import BATCH, MICRO
from hermes_tui.session.pass_queue import PassQueue, PassRequest
from hermes_tui.session.session import Session
from hermes_tui.tui.widgets.status_bar import FAILED_OUTCOMES
from hermes_tui.util.logs import get_logger

if TYPE_CHECKING:
    from hermes_tui.tui.screens.agent_bridge import PassRequested
    from hermes_tui.tui.screens.chat_view import ChatView

log = get_logger("tui")

PASS = "pass"  # the status bar's word for micro passes


class PassLanded(UIMessage):
    def __init__(self, session: Session, kind: str, report: PassReport | None, manual: bool):
        super().__init__()
        self.session, self.kind, self.report, self.manual = session, kind, report, manual


class TrimLanded(UIMessage):
    """The trim stage landed ahead of the passes still running (``Session.on_trim_landed``)."""

    def __init__(self, session: Session, report: PassReport):
        super().__init__()
        self.session, self.report = session, report


class PassRunner:
    """Runs the passes the queue lets start, one at a time, and shows what each did."""

    def __init__(self, session: Session, view: ChatView) -> None:
        self.session = session
        self._view = view
        self.running: str | None = None  # PASS or BATCH while one runs
        self.queue = PassQueue(session.after_splice)  # the passes waiting, and the rules
        self.last_outcome: str | None = None  # the last pass's, or the guard's compaction's
        self._failure_shown: str | None = None  # the pass failure last told, so a repeat is not told each turn

    def idle(self) -> bool:
        """No pass runs or waits (read from the turn's thread too: plain attribute reads)."""
        return self.queue.idle

    @property
    def busy(self) -> bool:
        """A pass runs or waits."""
        return bool(self.running or not self.queue.idle)

    def record(self, report: PassReport | None) -> None:
        """What a compaction came to, for the status bar and /usage (no report: it failed)."""
        self.last_outcome = report.outcome if report is not None else "error"

    def requested(self, event: PassRequested) -> None:
        """The agent loop completed an exchange and a pass (or batch compaction) is due."""
        event.passes.taken()
        if self.session.compactor.settings.enabled:
            # ``due`` may already be a later exchange's decision; whether a micro decision
            # passes down to a mark is the policy's (``watermark``), the same for every one.
            self.request(PassRequest.due(event.kind, self.session.due))

    def request(self, request: PassRequest) -> None:
        """Run a pass (or batch compaction) now, or when the queue says."""
        started = self.queue.request(request)
        if started is not None:
            self._start(started)
        self._view.refresh_status()

    def _start(self, request: PassRequest) -> None:
        self.running = PASS if request.kind == MICRO else BATCH
        session, post = self.session, self._view.post_message

        def trim_landed(report: PassReport) -> None:
            post(TrimLanded(session, report))

        session.on_trim_landed = trim_landed
        session.begin_work()  # a pass still lands (its session keeps its lease) after /new
        # An app worker, not the screen's: after /new the pass still lands in its own session
        # (stored); only quitting abandons it.
        self._view.app.run_worker(
            partial(self._work, session, request),
            name=f"{self.running} {session.info.id}", group="compaction", thread=True,
            exit_on_error=False,
        )

    def _work(self, session: Session, request: PassRequest) -> None:
        worker = get_current_worker()
        try:
            planned = abandonable(
                # A batch the policy asked for trims first, as in ``run``; ``/compact`` does not.
                session.plan_pass if request.kind == MICRO
                else lambda: session.plan_compress(request.focus, trim=not request.manual),
                cancelled=lambda: worker.is_cancelled,
            )
            if planned is None:
                return  # the app is closing: a plan is only a proposal, nothing was written
            report = session.publish_pass(planned)
        except Exception:
            log.exception("%s compaction failed; the transcript is unchanged", request.kind)
            report = None
        finally:
            session.end_work()
        self._view.post_message(PassLanded(session, request.kind, report, request.manual))

    async def trim_landed(self, event: TrimLanded) -> None:
        """The trim landed while the passes after it still run: show the transcript as it is."""
        if event.session is not self.session:
            return
        with self.session.lock:
            messages = list(self.session.conv.messages)
        await self._view.messages.sync(messages)
        self._view.refresh_status()

    async def landed(self, event: PassLanded) -> None:
        if event.session is not self.session:
            return
        self.running = None
        report = event.report
        self.record(report)
        if not event.manual:  # /compact says how it went in its own note
            self._tell_failure(report)
        if report is not None and report.notice:
            self._view.app.notify(report.notice, title="Compaction", timeout=15)
        with self.session.lock:
            messages = list(self.session.conv.messages)
        await self._view.messages.sync(messages)
        if event.manual:
            await self._batch_note(report)
        following = self.queue.finished()
        if following is not None:
            self._start(following)
        self._view.refresh_status()

    def _tell_failure(self, report: PassReport | None) -> None:
        """A failed pass's reason and what to change, once until a pass goes through."""
        if report is None or report.detail is None:
            if report is not None and report.outcome not in FAILED_OUTCOMES:
                self._failure_shown = None
            return
        detail = report.detail
        if detail != self._failure_shown:
            self._failure_shown = detail
            self._view.app.notify(detail, title=f"Compaction pass failed ({report.outcome})", severity="warning",
                                  timeout=15)

    async def _batch_note(self, report: PassReport | None) -> None:
        """What ``/compact`` did."""
        note = self._view.note
        if report is None:
            await note("Compaction failed; details are in the log. The conversation is unchanged.",
                       severity="error")
            return
        fields = report.fields
        if report.outcome == "compressed":
            await note(
                f"Compacted: {fields.get('messages_before')} → {fields.get('messages_after')} messages, "
                f"{fields.get('tokens_before'):,} → {fields.get('tokens_after'):,} tokens."
            )
        elif report.outcome == "nothing_to_absorb":
            await note("Nothing to compact yet: everything is in the protected head or the recent tail.")
        else:
            failure = report.detail or fields.get("failure") or report.outcome
            await note(f"Compaction did not apply ({report.outcome}: {failure}); the conversation is "
                       "unchanged.", severity="warning")


def abandonable(plan: Callable[[], Any], *, cancelled: Callable[[], bool], poll: float = 0.1) -> Any:
    """Run ``plan`` on a daemon thread and wait for it, giving up (None) once ``cancelled()``.

    A pass can take tens of seconds on a local model; quitting must not wait for it.
    Planning writes nothing, so an abandoned plan leaves nothing behind.
    """
    box: dict[str, Any] = {}

    def run() -> None:
        try:
            box["result"] = plan()
        except BaseException as exc:  # noqa: BLE001 - handed to the waiting worker
            box["error"] = exc

    thread = threading.Thread(target=run, name="hermes-pass", daemon=True)
    thread.start()
    while thread.is_alive():
        thread.join(poll)
        if cancelled() and thread.is_alive():
            return None
    if "error" in box:
        raise box["error"]
    return box["result"]
