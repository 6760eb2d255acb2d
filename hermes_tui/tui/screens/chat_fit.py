"""What the guard before a model request tells the chat screen (from the turn's thread), and the
screen's notes about it (``GuardNotes``)."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from textual.message import Message as UIMessage
from textual.widget import Widget

from hermes_tui.compaction.engine import PassReport
from hermes_tui.session.fit import RequestSize

if TYPE_CHECKING:
    from hermes_tui.session.session import Session
    from hermes_tui.tui.screens.chat_view import ChatView


class GuardCompacting(UIMessage):
    """The request about to be sent does not fit the window: it is compacted first."""

    def __init__(self, size: RequestSize, view: Widget | None):
        super().__init__()
        self.size, self.view = size, view


class GuardCompacted(UIMessage):
    def __init__(self, report: PassReport | None, size: RequestSize, view: Widget | None):
        super().__init__()
        self.report, self.size, self.view = report, size, view


class GuardNotes:
    """The chat screen's side: the status bar shows the compaction, notes say why and what it did
    (before the reply they are about)."""

    def __init__(self, session: Session, view: ChatView, *, reply_view: Callable[[], Widget | None],
                 record: Callable[[PassReport | None], None]) -> None:
        self.session = session
        self._view = view
        self._reply_view = reply_view  # the reply being written: the notes go before it
        self._record = record  # the outcome, for the status bar and /usage
        self.compacting = False  # the guard compacts before the reply's request

    async def began(self, event: GuardCompacting) -> None:
        self.compacting = True
        self._view.refresh_status()
        model = getattr(self.session.chat, "model_name", "") or "the chat model"
        await self._view.note(f"This message cannot be sent as it is: {event.size.describe(model)}. Compacting "
                              "the conversation first.", title="Compacting before sending", severity="warning",
                              before=event.view or self._reply_view())

    async def ended(self, event: GuardCompacted) -> None:
        self.compacting = False
        report = event.report
        self._record(report)
        with self.session.lock:
            messages = list(self.session.conv.messages)
        await self._view.messages.sync(messages)
        if event.size.fits and report is not None:
            fields = report.fields
            await self._view.note(f"Compacted: {fields.get('tokens_before', 0):,} → "
                                  f"{fields.get('tokens_after', 0):,} tokens; sending now.",
                                  before=event.view or self._reply_view())
        self._view.refresh_status()
