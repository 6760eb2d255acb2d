"""The chat screen's compaction: passes (and batch compaction) in the background, one at a time.

A pass is planned on a snapshot in an app thread worker and published under the
session's lock (``Session.publish_pass`` drops a stale splice whole); the screen then
brings the message list in step with the transcript. Which pass starts, which waits and
which is dropped, and what follows one that ended, is the queue's
(``session.pass_queue``, the agent loop of ``run`` asks the same one): the passes the
agent loop asks for after each exchange, and ``/compact`` (never dropped). A mixin of
``ChatScreen``: its handlers go by name (``on_pass_landed``), which Textual finds on
mixins too.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from functools import partial
from typing import TYPE_CHECKING, Any

from textual.worker import get_current_worker

from hermes_tui.compaction.engine import PassReport
from hermes_tui.core.transcript import BATCH, MICRO
from hermes_tui.session.pass_queue import PassQueue, PassRequest
from hermes_tui.session.session import Session
from hermes_tui.tui.screens.agent_bridge import PassLanded, PassRequested, TrimLanded
from hermes_tui.tui.widgets.status_bar import FAILED_OUTCOMES
from hermes_tui.util.logs import get_logger

if TYPE_CHECKING:
    from hermes_tui.tui.widgets.message_views import InfoNote
    from hermes_tui.tui.widgets.messages import MessageList

log = get_logger("tui")

PASS = "pass"  # the status bar's word for micro passes


class CompactionMixin:
    session: Session
    compaction: str | None  # PASS or BATCH while one runs
    pass_queue: PassQueue
    last_outcome: str | None
    _failure_shown: str | None  # the pass failure last told, so a repeat is not told each turn
    app: Any
    messages: MessageList
    refresh_status: Callable[[], None]

    async def note(self, text: str, *, title: str = "", severity: str = "information",
                   markdown: bool = False) -> InfoNote: ...

    def compaction_idle(self) -> bool:
        """No pass runs or waits (read from the turn's thread too: plain attribute reads)."""
        return self.pass_queue.idle

    def on_pass_requested(self, event: PassRequested) -> None:
        """The agent loop completed an exchange and a pass (or batch compaction) is due."""
        event.passes.taken()
        if self.session.compactor.settings.enabled:
            # ``due`` may already be a later exchange's decision; whether a micro decision
            # passes down to a mark is the policy's (``watermark``), the same for every one.
            self.request_compaction(PassRequest.due(event.kind, self.session.due))

    def request_compaction(self, request: PassRequest) -> None:
        """Run a pass (or batch compaction) now, or when the queue says."""
        started = self.pass_queue.request(request)
        if started is not None:
            self._start_compaction(started)
        self.refresh_status()

    def _start_compaction(self, request: PassRequest) -> None:
        self.compaction = PASS if request.kind == MICRO else BATCH
        session = self.session
        session.on_trim_landed = lambda report: self.post_message(TrimLanded(session, report))  # type: ignore[attr-defined]
        session.begin_work()  # a pass still lands (its session keeps its lease) after /new
        # An app worker, not this screen's: after /new the pass still lands in its own session
        # (stored); only quitting abandons it.
        self.app.run_worker(
            partial(self._compaction_worker, self.session, request),
            name=f"{self.compaction} {self.session.info.id}", group="compaction", thread=True,
            exit_on_error=False,
        )

    def _compaction_worker(self, session: Session, request: PassRequest) -> None:
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
        self.post_message(PassLanded(session, request.kind, report, request.manual))  # type: ignore[attr-defined]

    async def on_trim_landed(self, event: TrimLanded) -> None:
        """The trim landed while the passes after it still run: show the transcript as it is."""
        if event.session is not self.session:
            return
        with self.session.lock:
            messages = list(self.session.conv.messages)
        await self.messages.sync(messages)
        self.refresh_status()

    async def on_pass_landed(self, event: PassLanded) -> None:
        if event.session is not self.session:
            return
        self.compaction = None
        report = event.report
        self.last_outcome = report.outcome if report is not None else "error"
        if not event.manual:  # /compact says how it went in its own note
            self._tell_failure(report)
        if report is not None and report.notice:
            self.app.notify(report.notice, title="Compaction", timeout=15)
        with self.session.lock:
            messages = list(self.session.conv.messages)
        await self.messages.sync(messages)
        if event.manual:
            await self._batch_note(report)
        following = self.pass_queue.finished()
        if following is not None:
            self._start_compaction(following)
        self.refresh_status()

    def _tell_failure(self, report: PassReport | None) -> None:
        """A failed pass's reason and what to change, once until a pass goes through."""
        detail = report.detail if report is not None else None
        if detail is None:
            if report is not None and report.outcome not in FAILED_OUTCOMES:
                self._failure_shown = None
            return
        if detail != self._failure_shown:
            self._failure_shown = detail
            self.app.notify(detail, title=f"Compaction pass failed ({report.outcome})", severity="warning", timeout=15)

    async def _batch_note(self, report: PassReport | None) -> None:
        """What ``/compact`` did."""
        if report is None:
            await self.note("Compaction failed; details are in the log. The conversation is unchanged.",
                            severity="error")
            return
        fields = report.fields
        if report.outcome == "compressed":
            await self.note(
                f"Compacted: {fields.get('messages_before')} → {fields.get('messages_after')} messages, "
                f"{fields.get('tokens_before'):,} → {fields.get('tokens_after'):,} tokens."
            )
        elif report.outcome == "nothing_to_absorb":
            await self.note("Nothing to compact yet: everything is in the protected head or the recent tail.")
        else:
            failure = report.detail or fields.get("failure") or report.outcome
            await self.note(f"Compaction did not apply ({report.outcome}: {failure}); the conversation is "
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
