"""The conversation model in-process on MLX, behind the ChatClient interface.

Generation runs on the runtime's MLX thread (never on the caller's, which may be a
UI worker), which hands text segments over a queue, so ``stream`` yields as tokens
are decoded and a cancel takes effect at the next token (or at once, while the reply
still waits for the device). The chat keeps its own prefix cache: a follow-up turn
prefills only the new messages.
"""

from __future__ import annotations

import queue
import threading
from typing import Any, Iterator

from hermes_tui.chat.client import (
    CANCELLED, DEFAULT_MAX_TOKENS, ChatClient, ChatDelta, ChatDone, ChatError, Usage,
)
from hermes_tui.content_parts import for_text_only_model
from hermes_tui.providers.mlx_runtime import POLL_S, GenerationAborted, MlxRuntime, ModelUnavailable
from hermes_tui.providers.failures import TIMEOUT, UNAVAILABLE

CACHE_KEY = "chat"
_END = object()


class MlxChatClient(ChatClient):
    def __init__(
        self, model: str, *, timeout: float | None = None, runtime: MlxRuntime | None = None,
        max_tokens: int = DEFAULT_MAX_TOKENS,
    ):
        self.model_name = model
        self.timeout = timeout
        self.runtime = runtime or MlxRuntime.shared()
        self.max_tokens = max_tokens  # model.max_tokens: a reply's cap when a call names none

    def stream(
        self,
        messages: list[dict[str, Any]],
        *,
        max_tokens: int | None = None,
        stop: list[str] | None = None,
        cancel: threading.Event | None = None,
    ) -> Iterator[ChatDelta | ChatDone]:
        if max_tokens is None:
            max_tokens = self.max_tokens
        # mlx_lm models read text only: an image or a file becomes a placeholder line that
        # says so (a chat template handed a list of parts fails or prints the base64).
        messages = for_text_only_model(messages)
        try:
            loaded = self.runtime.load(self.model_name)
        except ModelUnavailable as exc:
            raise ChatError(UNAVAILABLE, str(exc)) from None
        abandoned = threading.Event()  # set when the consumer stops reading early
        events: queue.Queue = queue.Queue()
        try:
            job = self.runtime.start_generation(
                loaded, messages, max_tokens=max_tokens, cache_key=CACHE_KEY, stop=stop,
                timeout=self.timeout, cancel=_Either(cancel, abandoned),
                on_text=lambda text: events.put(ChatDelta(text)), on_done=lambda: events.put(_END),
            )
        except GenerationAborted as exc:  # the runtime is shutting down
            raise ChatError(CANCELLED, f"MLX model {self.model_name}: {exc}") from None
        except Exception as exc:  # noqa: BLE001 - e.g. the chat template failed
            raise ChatError(UNAVAILABLE, f"MLX model {self.model_name}: {type(exc).__name__}: {exc}") from None
        try:
            while True:
                try:
                    item = events.get(timeout=POLL_S)
                except queue.Empty:
                    job.expire()  # cancelled or timed out while still queued: ends now
                    continue
                if item is _END:
                    break
                yield item
            try:
                stats = job.result()
            except GenerationAborted as exc:
                kind = CANCELLED if exc.reason == "cancelled" else TIMEOUT
                raise ChatError(kind, f"MLX model {self.model_name}: {exc}") from None
            except Exception as exc:  # noqa: BLE001 - anything MLX raised
                raise ChatError(UNAVAILABLE, f"MLX model {self.model_name}: {type(exc).__name__}: {exc}") from None
            yield ChatDone(stats.text, Usage(
                prompt_tokens=stats.prompt_tokens,
                completion_tokens=stats.completion_tokens,
                cached_tokens=stats.cached_tokens,
                prompt_tps=stats.prompt_tps,
                generation_tps=stats.generation_tps,
                peak_memory_gb=stats.peak_memory_gb,
                finish_reason=stats.finish_reason,
                duration_s=stats.duration_s,
            ))
        finally:
            abandoned.set()
            job.wait()  # the device is free again when the stream is closed


class _Either:
    """Set when either event is set (the runtime only asks ``is_set``)."""

    def __init__(self, *events: threading.Event | None):
        self.events = [e for e in events if e is not None]

    def is_set(self) -> bool:
        return any(e.is_set() for e in self.events)
