"""What the guard before a model request tells the chat screen, from the reply's thread."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from textual.message import Message as UIMessage

from hermes_tui.compaction.engine import PassReport
from hermes_tui.session.fit import FitListener, RequestSize


class GuardCompacting(UIMessage):
    """The request about to be sent does not fit the window: it is compacted first."""

    def __init__(self, size: RequestSize):
        super().__init__()
        self.size = size


class GuardCompacted(UIMessage):
    def __init__(self, report: PassReport | None, size: RequestSize):
        super().__init__()
        self.report, self.size = report, size


class PostFit(FitListener):
    """The guard's hooks, posted to the screen from the reply's thread."""

    def __init__(self, post: Callable[[UIMessage], Any]) -> None:
        self.post = post

    def compacting(self, size: RequestSize) -> None:
        self.post(GuardCompacting(size))

    def compacted(self, report: PassReport | None, size: RequestSize) -> None:
        self.post(GuardCompacted(report, size))
