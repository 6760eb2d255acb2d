"""The chat client interface: how the conversation model is reached.

The conversation model runs behind one small streaming interface with two providers:
MLX in-process and any OpenAI-compatible endpoint (``chat.openai_chat``). A call
yields ``ChatDelta`` pieces of text as they are generated, then exactly one
``ChatDone`` with the whole text and what the call cost. Every failure is a
``ChatError`` whose ``kind`` says what happened (telemetry carries the kind, the UI
shows the one-line message).
"""

from __future__ import annotations

import threading
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

from ..config import ModelConfig
from ..providers.failures import (
    HTTP_4XX,
    HTTP_5XX,
    MALFORMED,
    REFUSED,
    TIMEOUT,
    UNAVAILABLE,
)

# The failure kinds of ``providers.failures``, plus one: the caller cancelled the call.
CANCELLED = "cancelled"

# A reply's cap when neither the caller nor the client names one: model.max_tokens's default.
DEFAULT_MAX_TOKENS: int = ModelConfig.model_fields["max_tokens"].default

__all__ = [
    "CANCELLED",
    "DEFAULT_MAX_TOKENS",
    "HTTP_4XX",
    "HTTP_5XX",
    "MALFORMED",
    "REFUSED",
    "TIMEOUT",
    "UNAVAILABLE",
    "ChatClient",
    "ChatDelta",
    "ChatDone",
    "ChatError",
    "Usage",
    "collect",
]


class ChatError(Exception):
    """A chat call that failed; ``kind`` is one of the kind constants above."""

    def __init__(self, kind: str, message: str):
        super().__init__(message)
        self.kind = kind


@dataclass
class Usage:
    """What one chat call cost. None means the provider did not say (never a guess)."""

    prompt_tokens: int | None
    completion_tokens: int | None
    cached_tokens: int | None = None  # prompt tokens served from a prefix cache
    prompt_tps: float | None = None  # prompt processing speed (MLX only)
    generation_tps: float | None = None  # generation speed (MLX only)
    peak_memory_gb: float | None = None  # (MLX only)
    finish_reason: str | None = None  # "stop", "length" (cut off by max_tokens), ...
    duration_s: float = 0.0  # from sending the request to the end of the reply
    time_to_first_token_s: float | None = None  # to the first piece of text; None if none came


@dataclass
class ChatDelta:
    """A piece of generated text."""

    text: str


@dataclass
class ChatDone:
    """The end of a reply: the whole text (all deltas joined) and the final usage."""

    text: str
    usage: Usage


@runtime_checkable
class ChatClient(Protocol):
    """A conversation model that streams chat completions.

    Providers may subclass this Protocol explicitly to inherit ``complete``.
    """

    #: the model's name, for the status bar and telemetry
    model_name: str
    #: the longest reply when a call names no cap (``model.max_tokens`` in config.yaml)
    max_tokens: int = DEFAULT_MAX_TOKENS

    def stream(
        self,
        messages: list[dict[str, Any]],
        *,
        max_tokens: int | None = None,
        stop: list[str] | None = None,
        cancel: threading.Event | None = None,
    ) -> Iterator[ChatDelta | ChatDone]:
        """Yield ``ChatDelta`` pieces, then exactly one ``ChatDone``.

        ``max_tokens`` None: the client's own ``max_tokens``.
        Raises ``ChatError``; kind ``CANCELLED`` when ``cancel`` was set mid-call.
        Closing the iterator early releases the call's resources.
        """
        ...

    def complete(
        self,
        messages: list[dict[str, Any]],
        *,
        max_tokens: int | None = None,
        stop: list[str] | None = None,
        cancel: threading.Event | None = None,
    ) -> ChatDone:
        """The whole reply at once (consumes ``stream``). Raises ``ChatError``."""
        return collect(
            self.stream(messages, max_tokens=max_tokens, stop=stop, cancel=cancel),
            model_name=getattr(self, "model_name", "?"),
        )


def collect(events: Iterable[ChatDelta | ChatDone], *, model_name: str = "?") -> ChatDone:
    """Consume a ``stream`` and return its ``ChatDone``.

    A stream that ends without a ``ChatDone`` is a provider bug; it is reported as a
    MALFORMED ``ChatError`` rather than silently returning partial text.
    """
    done: ChatDone | None = None
    for event in events:
        if isinstance(event, ChatDone):
            if done is not None:
                raise ChatError(MALFORMED, f"chat model {model_name} ended its reply twice")
            done = event
    if done is None:
        raise ChatError(MALFORMED, f"chat model {model_name} ended without finishing its reply")
    return done
