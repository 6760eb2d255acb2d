"""What the guard before a model request tells the chat screen, from the reply's thread."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from textual.message import Message as UIMessage
from textual.widget import Widget

from hermes_tui.compaction.engine import PassReport
from hermes_tui.session.fit import FitListener, RequestSize


class GuardCompacting(UIMessage):
    """The request about to be sent does not fit the window: it is compacted first."""

    def __init__(self, size: RequestSize, view: Widget | None):
        super().__init__()
        self.size, self.view = size, view


class GuardCompacted(UIMessage):
    def __init__(self, report: PassReport | None, size: RequestSize, view: Widget | None):
        super().__init__()
        self.report, self.size, self.view = report, size, view


class PostFit(FitListener):
    """The guard's hooks, posted to the screen from the reply's thread (``view``: the reply's,
    which the notes go before)."""

    def __init__(self, post: Callable[[UIMessage], Any], view: Widget | None = None) -> None:
        self.post, self.view = post, view

    def compacting(self, size: RequestSize) -> None:
        self.post(GuardCompacting(size, self.view))

    def compacted(self, report: PassReport | None, size: RequestSize) -> None:
        self.post(GuardCompacted(report, size, self.view))
