"""What the guard before a model request tells the chat screen, from the reply's thread."""

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
