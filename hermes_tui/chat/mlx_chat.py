"""The conversation model in-process on MLX, behind the ChatClient interface.

Generation runs on its own thread (MLX work never runs on the caller's, which may
be a UI worker) and hands text segments over a queue, so ``stream`` yields as
tokens are decoded and a cancel takes effect at the next token. The chat keeps
its own prefix cache: a follow-up turn prefills only the new messages.
"""

from __future__ import annotations

import queue
import threading
from typing import Any, Iterator

from hermes_tui.chat.client import (
    CANCELLED, DEFAULT_MAX_TOKENS, ChatClient, ChatDelta, ChatDone, ChatError, Usage,
)
from hermes_tui.mlx_runtime import GenerationAborted, MlxRuntime, ModelUnavailable
from hermes_tui.summarizers.base import TIMEOUT, UNAVAILABLE

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
        try:
            loaded = self.runtime.load(self.model_name)
        except ModelUnavailable as exc:
            raise ChatError(UNAVAILABLE, str(exc)) from None
        abandoned = threading.Event()  # set when the consumer stops reading early
        stop_when = _Either(cancel, abandoned)
        events: queue.Queue = queue.Queue()

        def work() -> None:
            try:
                stats = self.runtime.generate(
                    loaded, messages, max_tokens=max_tokens, cache_key=CACHE_KEY, stop=stop,
                    timeout=self.timeout, cancel=stop_when, on_text=lambda text: events.put(ChatDelta(text)),
                )
                events.put(stats)
            except BaseException as exc:  # noqa: BLE001 - handed to the consumer
                events.put(exc)
            finally:
                events.put(_END)

        worker = threading.Thread(target=work, name="hermes-mlx-chat", daemon=True)
        worker.start()
        try:
            while (item := events.get()) is not _END:
                if isinstance(item, ChatDelta):
                    yield item
                elif isinstance(item, GenerationAborted):
                    kind = CANCELLED if item.reason == "cancelled" else TIMEOUT
                    raise ChatError(kind, f"MLX model {self.model_name}: {item}")
                elif isinstance(item, BaseException):
                    raise ChatError(UNAVAILABLE, f"MLX model {self.model_name}: {type(item).__name__}: {item}")
                else:
                    yield ChatDone(item.text, Usage(
                        prompt_tokens=item.prompt_tokens,
                        completion_tokens=item.completion_tokens,
                        cached_tokens=item.cached_tokens,
                        prompt_tps=item.prompt_tps,
                        generation_tps=item.generation_tps,
                        peak_memory_gb=item.peak_memory_gb,
                        finish_reason=item.finish_reason,
                        duration_s=item.duration_s,
                    ))
        finally:
            abandoned.set()
            worker.join()


class _Either:
    """Set when either event is set (the runtime only asks ``is_set``)."""

    def __init__(self, *events: threading.Event | None):
        self.events = [e for e in events if e is not None]

    def is_set(self) -> bool:
        return any(e.is_set() for e in self.events)
