"""The chat client that stands in when none could be set up: every reply fails with why."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from hermes_tui.chat.client import UNAVAILABLE, ChatDelta, ChatDone, ChatError


class UnavailableChat:
    """Stands in for a chat model that could not be set up: every reply fails with why."""

    def __init__(self, error: Exception):
        self.model_name = ""
        self.error = error
        self.supports_tools = False

    def stream(self, messages: list[dict[str, Any]], *, max_tokens: int | None = None, stop=None,
               cancel=None, tools=None) -> Iterator[ChatDelta | ChatDone]:
        raise ChatError(UNAVAILABLE, str(self.error)) from self.error
        yield  # pragma: no cover - makes this a generator, like every provider's stream

    def complete(self, messages, *, max_tokens: int | None = None, stop=None, cancel=None,
                 tools=None) -> ChatDone:
        raise ChatError(UNAVAILABLE, str(self.error)) from self.error
