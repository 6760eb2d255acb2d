"""What the guard before a model request tells the chat screen (from the turn's thread), and the
screen's notes about it."""

from __future__ import annotations

from textual.message import Message as UIMessage
from textual.widget import Widget

from hermes_tui.compaction.engine import PassReport
from hermes_tui.session.fit import RequestSize


class GuardCompacting(UIMessage):
    """The request about to be sent does not fit the window: it is compacted first."""

    def __init__(self, size: RequestSize, view: Widget | None):
        super().__init__()
        self.size, self.view = size, view


class GuardCompacted(UIMessage):
    def __init__(self, report: PassReport | None, size: RequestSize, view: Widget | None):
        super().__init__()
        self.report, self.size, self.view = report, size, view


class GuardNotesMixin:
    """The chat screen's side: the status bar shows the compaction, notes say why and what it did
    (before the reply they are about)."""

    async def on_guard_compacting(self, event: GuardCompacting) -> None:
        self._guard_compacting = True
        self.refresh_status()
        model = getattr(self.session.chat, "model_name", "") or "the chat model"
        await self.note(f"This message cannot be sent as it is: {event.size.describe(model)}. Compacting the "
                        "conversation first.", title="Compacting before sending", severity="warning",
                        before=event.view or self._reply_view)

    async def on_guard_compacted(self, event: GuardCompacted) -> None:
        self._guard_compacting = False
        report = event.report
        self.passes.record(report)
        with self.session.lock:
            messages = list(self.session.conv.messages)
        await self.messages.sync(messages)
        if event.size.fits and report is not None:
            fields = report.fields
            await self.note(f"Compacted: {fields.get('tokens_before', 0):,} → {fields.get('tokens_after', 0):,} "
                            "tokens; sending now.", before=event.view or self._reply_view)
        self.refresh_status()
