"""The chat client interface: how the conversation model is reached.

The conversation model runs behind one small streaming interface, whichever backend
serves it (``providers/``: MLX in-process, any OpenAI-compatible endpoint). A call
yields ``ChatDelta`` pieces of text as they are generated, then exactly one
``ChatDone`` with the whole text and what the call cost. Every failure is a
``ChatError`` whose ``kind`` says what happened (telemetry carries the kind, the UI
shows the one-line message).

Tools: a call given ``tools`` (OpenAI function specs) may also yield ``ChatToolDelta``
pieces of tool calls as they form (for display only), and its ``ChatDone`` then holds
the complete calls in OpenAI message format, in order. Calls are never validated here:
arguments that are not JSON, or a name no tool has, come back as they were generated,
for the caller to answer with an error result the model can correct. A client whose
model cannot take tools says so in ``supports_tools`` and runs a call given tools
without them.
"""

from __future__ import annotations

import threading
import uuid
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from ..config import ModelConfig
from ..core.failures import (
    CONTEXT_EXCEEDED,
    HTTP_4XX,
    HTTP_5XX,
    MALFORMED,
    REFUSED,
    TIMEOUT,
    UNAVAILABLE,
)
from ..util.errors import AppError

# The failure kinds of ``core.failures``, plus two: the caller cancelled the call, and the
# endpoint refused a request because it carried tools (retry it without them).
CANCELLED = "cancelled"
NO_TOOLS = "no_tools"

# A reply's cap when neither the caller nor the client names one: model.max_tokens's default.
DEFAULT_MAX_TOKENS: int = ModelConfig().max_tokens

__all__ = [
    "CANCELLED",
    "CONTEXT_EXCEEDED",
    "DEFAULT_MAX_TOKENS",
    "HTTP_4XX",
    "HTTP_5XX",
    "MALFORMED",
    "NO_TOOLS",
    "REFUSED",
    "TIMEOUT",
    "UNAVAILABLE",
    "ChatClient",
    "ChatDelta",
    "ChatDone",
    "ChatError",
    "ChatToolDelta",
    "Overflow",
    "Usage",
    "collect",
    "new_call_id",
    "tool_call",
]


@dataclass(frozen=True)
class Overflow:
    """What the server said about a request too large for its window (None: it did not say)."""

    text: str                     # the server's own words, one line
    prompt_tokens: int | None = None  # the request as the server counted it
    context_limit: int | None = None  # the window the server runs the model with

    def figures(self) -> str:
        """"31,228 tokens > 16,384" (or what of it is known), for a message."""
        if self.prompt_tokens and self.context_limit:
            return f"{self.prompt_tokens:,} tokens > {self.context_limit:,}"
        if self.context_limit:
            return f"the window holds {self.context_limit:,} tokens"
        return ""


class ChatError(AppError):
    """A chat call that failed; ``kind`` is one of the kind constants above.

    ``overflow``: for ``CONTEXT_EXCEEDED`` from a server, what it said (its figures);
    ``endpoint``: the server's base URL when the call went to one (None: in-process, or the
    guard's own refusal before anything was sent); ``fix``: what the server's answer says to
    do, when it says. A model that is not on this machine is the ``__cause__``."""

    def __init__(
        self,
        kind: str,
        message: str,
        overflow: Overflow | None = None,
        *,
        endpoint: str | None = None,
        model: str | None = None,
        fix: str | None = None,
    ) -> None:
        super().__init__(message, kind=kind, endpoint=endpoint, model=model, fix=fix)
        self.overflow = overflow


@dataclass
class Usage:
    """What one chat call cost. None means the provider did not say (never a guess)."""

    prompt_tokens: int | None
    completion_tokens: int | None
    cached_tokens: int | None = None  # prompt tokens served from a prefix cache
    prompt_tps: float | None = None  # prompt processing speed (MLX only)
    generation_tps: float | None = None  # generation speed (MLX only)
    peak_memory_gb: float | None = None  # (MLX only)
    finish_reason: str | None = None  # "stop", "length" (cut off by max_tokens), "tool_calls", ...
    duration_s: float = 0.0  # from sending the request to the end of the reply
    time_to_first_token_s: float | None = None  # to the first piece of text or of a tool call; None if none came


@dataclass
class ChatDelta:
    """A piece of generated text."""

    text: str


@dataclass
class ChatToolDelta:
    """A piece of a tool call as it streams in, for showing the call while it forms.

    ``index`` numbers the calls of one reply from 0; ``id`` and ``name`` come with a
    call's first piece (None in the pieces after it, and None when the provider only
    knows them once the call is complete); ``arguments`` is this piece of the
    arguments' JSON text, not the whole. ``ChatDone.tool_calls`` is the authority.
    """

    index: int
    id: str | None
    name: str | None
    arguments: str


@dataclass
class ChatDone:
    """The end of a reply: the whole text (all deltas joined) and the final usage.

    ``tool_calls``: the complete calls, in order, in OpenAI message format
    (``tool_call``), or None when the reply called no tool. ``usage.finish_reason`` is
    "tool_calls" when the model stopped to call them.
    """

    text: str
    usage: Usage
    tool_calls: list[dict[str, Any]] | None = None


def new_call_id() -> str:
    """A unique id for a tool call that came without one."""
    return f"call_{uuid.uuid4().hex[:24]}"


def tool_call(call_id: str | None, name: str, arguments: str) -> dict[str, Any]:
    """One tool call as an assistant message carries it; ``arguments`` is JSON text."""
    return {
        "id": call_id or new_call_id(),
        "type": "function",
        "function": {"name": name, "arguments": arguments},
    }


@runtime_checkable
class ChatClient(Protocol):
    """A conversation model that streams chat completions.

    Providers may subclass this Protocol explicitly to inherit ``complete``.
    """

    #: the model's name, for the status bar and telemetry
    model_name: str
    #: the longest reply when a call names no cap (``model.max_tokens`` in config.yaml)
    max_tokens: int = DEFAULT_MAX_TOKENS
    if TYPE_CHECKING:
        # Read-only to the callers, so that a client may work it out when asked (MLX: from
        # the model's tokenizer); one that sets it declares ``supports_tools: bool`` itself.
        @property
        def supports_tools(self) -> bool:
            """whether a call's ``tools`` reach the model (False: they are left out of the call)"""
            return False
    else:
        supports_tools = False

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
        """Yield ``ChatDelta`` and ``ChatToolDelta`` pieces, then exactly one ``ChatDone``.

        ``max_tokens`` None: the client's own ``max_tokens``. ``tools``: the OpenAI
        ``tools=[...]`` list (``ToolRegistry.specs()``); None or empty: a text-only call.
        ``must_call``: the reply must be one call to one of these specs, offered in ``tools``
        too (the agent's first step, ``agent.look_first``); a client holds the model to it
        as its backend can (``chat.call_schema``), the call possibly written as text, and
        one that cannot ignores it.
        Raises ``ChatError``; kind ``CANCELLED`` when ``cancel`` was set mid-call,
        ``NO_TOOLS`` when the endpoint refused the request because of ``tools``.
        Closing the iterator early releases the call's resources.
        """
        ...

    #: what ``warm`` does: "local" (an in-process prefix cache), "server" (a request to
    #: an endpoint that may cache prefixes) or None (nothing)
    warm_kind: str | None = None

    def warm(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None = None) -> None:
        """Bring ``messages`` (the start of the next request) into the model's prompt cache,
        in the background; returns at once. Called after a compaction splice."""

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
        """The whole reply at once (consumes ``stream``). Raises ``ChatError``."""
        return collect(
            self.stream(messages, max_tokens=max_tokens, stop=stop, cancel=cancel, tools=tools,
                        must_call=must_call),
            model_name=getattr(self, "model_name", "?"),
        )


def collect(events: Iterable[ChatDelta | ChatToolDelta | ChatDone], *, model_name: str = "?") -> ChatDone:
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
