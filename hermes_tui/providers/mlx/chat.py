"""The conversation model in-process on MLX, behind the ChatClient interface.

Generation runs on the runtime's MLX thread (never on the caller's, which may be a
UI worker), which hands text segments over a queue, so ``stream`` yields as tokens
are decoded and a cancel takes effect at the next token (or at once, while the reply
still waits for the device). The chat keeps its own prefix cache: a follow-up turn
prefills only the new messages.

Tools: a model whose tokenizer has an mlx-lm tool parser (``supports_tools``) gets the
call's ``tools`` rendered by its chat template, and the calls in its output are split
from the reply text (``tool_calls``): text between the call markers is never shown
as reply text. A model without one runs the call without tools.
"""

from __future__ import annotations

import logging
import queue
import threading
from collections.abc import Iterator
from typing import Any

from hermes_tui.chat.client import (
    CANCELLED,
    DEFAULT_MAX_TOKENS,
    ChatClient,
    ChatDelta,
    ChatDone,
    ChatError,
    ChatToolDelta,
    Usage,
)
from hermes_tui.core.content_parts import for_text_only_model
from hermes_tui.core.failures import TIMEOUT, UNAVAILABLE
from hermes_tui.hub.resolve import ModelUnavailable
from hermes_tui.providers.mlx.runtime import POLL_S, GenerationAborted, MlxRuntime
from hermes_tui.providers.mlx.thread import MlxJob
from hermes_tui.providers.mlx.tool_calls import (
    ToolCallSplitter,
    for_chat_template,
    supports_tool_calls,
)

CACHE_KEY = "chat"
log = logging.getLogger(__name__)


class MlxChatClient(ChatClient):
    def __init__(
        self, model: str, *, timeout: float | None = None, runtime: MlxRuntime | None = None,
        max_tokens: int = DEFAULT_MAX_TOKENS,
    ):
        self.model_name = model
        self.timeout = timeout
        self.runtime = runtime or MlxRuntime.shared()
        self.max_tokens = max_tokens  # model.max_tokens: a reply's cap when a call names none
        self.last_warm: MlxJob[tuple[int, int]] | None = None  # the last warm job, for benchmarks and tests

    warm_kind = "local"

    def warm(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None = None) -> None:
        """Queue reading ``messages`` into the chat's prefix cache on the MLX thread (a chat
        request queued meanwhile runs after it and reuses it). Only for a model already
        loaded: warming never loads one."""
        loaded = self.runtime.loaded(self.model_name)
        if loaded is None:
            return
        messages = for_chat_template(for_text_only_model(messages))
        if not (tools and supports_tool_calls(loaded.tokenizer)):
            tools = None
        try:
            self.last_warm = self.runtime.start_warm(loaded, messages, cache_key=CACHE_KEY, tools=tools)
        except Exception:
            log.warning("cannot warm the chat cache of %s", self.model_name, exc_info=True)

    @property
    def supports_tools(self) -> bool:
        """Whether mlx-lm has a tool parser for this model's template.

        Loads the model the first time (blocks: ask from a worker, not the UI thread);
        raises ``ChatError`` (UNAVAILABLE) when it cannot be loaded."""
        try:
            loaded = self.runtime.load(self.model_name)
        except ModelUnavailable as exc:
            raise ChatError(UNAVAILABLE, str(exc), model=exc.model) from exc
        return supports_tool_calls(loaded.tokenizer)

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
        # ``must_call`` is not held to: mlx_lm samples without a grammar. The model's
        # own tool-call template is what it has.
        if max_tokens is None:
            max_tokens = self.max_tokens
        # mlx_lm models read text only: an image or a file becomes a placeholder line that
        # says so (a chat template handed a list of parts fails or prints the base64).
        messages = for_chat_template(for_text_only_model(messages))
        try:
            loaded = self.runtime.load(self.model_name)
        except ModelUnavailable as exc:
            raise ChatError(UNAVAILABLE, str(exc), model=exc.model) from exc
        if not (tools and supports_tool_calls(loaded.tokenizer)):
            tools = None  # without a parser its calls could not be read: the call runs tool-less
        splitter = ToolCallSplitter(loaded.tokenizer, tools) if tools else None
        abandoned = threading.Event()  # set when the consumer stops reading early
        events: queue.Queue[ChatDelta | None] = queue.Queue()  # the text, then None: the job ended
        try:
            job = self.runtime.start_generation(
                loaded, messages, max_tokens=max_tokens, cache_key=CACHE_KEY, stop=stop,
                timeout=self.timeout, cancel=_Either(cancel, abandoned), tools=tools,
                on_text=lambda text: events.put(ChatDelta(text)), on_done=lambda: events.put(None),
            )
        except GenerationAborted as exc:  # the runtime is shutting down
            raise ChatError(CANCELLED, f"MLX model {self.model_name}: {exc}") from None
        except Exception as exc:  # noqa: BLE001 - e.g. the chat template failed
            raise ChatError(UNAVAILABLE, f"MLX model {self.model_name}: {type(exc).__name__}: {exc}") from None
        fed = 0  # characters handed on so far
        try:
            while True:
                try:
                    item = events.get(timeout=POLL_S)
                except queue.Empty:
                    job.expire()  # cancelled or timed out while still queued: ends now
                    continue
                if item is None:
                    break
                fed += len(item.text)
                if splitter is None:
                    yield item
                else:
                    yield from splitter.feed(item.text)
            try:
                stats = job.result()
            except GenerationAborted as exc:
                kind = CANCELLED if exc.reason == "cancelled" else TIMEOUT
                raise ChatError(kind, f"MLX model {self.model_name}: {exc}") from None
            except Exception as exc:  # noqa: BLE001 - anything MLX raised
                raise ChatError(UNAVAILABLE, f"MLX model {self.model_name}: {type(exc).__name__}: {exc}") from None
            text, tool_calls, finish_reason = stats.text, None, stats.finish_reason
            if splitter is not None:
                # The piece that held a stop string was not handed on; its text before the stop was kept.
                if len(stats.text) > fed:
                    yield from splitter.feed(stats.text[fed:])
                yield from splitter.finish()
                text = splitter.text
                tool_calls = splitter.tool_calls or None
                if tool_calls and finish_reason == "stop":
                    finish_reason = "tool_calls"
            yield ChatDone(text, Usage(
                prompt_tokens=stats.prompt_tokens,
                completion_tokens=stats.completion_tokens,
                cached_tokens=stats.cached_tokens,
                prompt_tps=stats.prompt_tps,
                generation_tps=stats.generation_tps,
                peak_memory_gb=stats.peak_memory_gb,
                finish_reason=finish_reason,
                duration_s=stats.duration_s,
            ), tool_calls=tool_calls)
        finally:
            abandoned.set()
            job.wait()  # the device is free again when the stream is closed


class _Either:
    """Set when either event is set (the runtime only asks ``is_set``)."""

    def __init__(self, *events: threading.Event | None):
        self.events = [e for e in events if e is not None]

    def is_set(self) -> bool:
        return any(e.is_set() for e in self.events)
