"""The chat client that stands in when none could be set up: every reply fails with why."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from typing import Any

from hermes_tui.chat.client import (
    UNAVAILABLE,
    ChatClient,
    ChatDelta,
    ChatDone,
    ChatError,
    ChatToolDelta,
)


class UnavailableChat(ChatClient):
    """Stands in for a chat model that could not be set up: every reply fails with why."""

    # No reply is ever generated, so none is reserved room for (``session.fit``).
    max_tokens = 0
    supports_tools: bool

    def __init__(self, error: Exception):
        self.model_name = ""
        self.error = error
        self.supports_tools = False

    def warm(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None = None) -> None:
        """Nothing to warm (``warm_kind`` None: never called)."""

    def stream(
        self,
        messages: list[dict[str, Any]],
        *,
        max_tokens: int | None = None,
        stop: list[str] | None = None,
        cancel: threading.Event | None = None,
        tools: list[dict[str, Any]] | None = None,
        must_call: list[dict[str, Any]] | None = None,
    ) -> Iterator[ChatDelta | ChatToolDelta | ChatDone]:
        raise ChatError(UNAVAILABLE, str(self.error)) from self.error
        yield  # pragma: no cover - makes this a generator, like every provider's stream

    def complete(
        self,
        messages: list[dict[str, Any]],
        *,
        max_tokens: int | None = None,
        stop: list[str] | None = None,
        cancel: threading.Event | None = None,
        tools: list[dict[str, Any]] | None = None,
        must_call: list[dict[str, Any]] | None = None,
    ) -> ChatDone:
        raise ChatError(UNAVAILABLE, str(self.error)) from self.error
