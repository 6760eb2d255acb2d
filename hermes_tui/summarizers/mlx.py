"""The MLX backend: passes run in-process on the shared MlxRuntime.

The pass prompt's static instructions come first, so the prefix cache serves them
from the second pass on: a pass prefills only the summary and the new exchange.
"""

from __future__ import annotations

from typing import Any

from hermes_tui.providers.mlx_runtime import GenerationAborted, MlxRuntime, ModelUnavailable
from hermes_tui.compaction.summarizer import Completion, SummarizerError
from hermes_tui.providers.failures import TIMEOUT, UNAVAILABLE

CACHE_KEY = "compression"


class MlxSummarizer:
    def __init__(self, model: str, *, timeout: float = 120.0, runtime: MlxRuntime | None = None):
        self.model_name = model
        self.timeout = timeout
        self.runtime = runtime or MlxRuntime.shared()
        self.last_stats = None  # GenerationStats of the last call, for benchmarks

    def complete(self, messages: list[dict[str, Any]], *, max_tokens: int) -> Completion:
        try:
            loaded = self.runtime.load(self.model_name)
            stats = self.runtime.generate(
                loaded, messages, max_tokens=max_tokens, cache_key=CACHE_KEY, timeout=self.timeout
            )
        except ModelUnavailable as exc:
            raise SummarizerError(UNAVAILABLE, str(exc)) from None
        except GenerationAborted as exc:
            raise SummarizerError(
                TIMEOUT, f"MLX model {self.model_name}: {exc} (auxiliary.compression.timeout is {self.timeout:g} s)"
            ) from None
        self.last_stats = stats
        return Completion(
            text=stats.text,
            finish_reason=stats.finish_reason,
            prompt_tokens=stats.prompt_tokens,
            completion_tokens=stats.completion_tokens,
            duration_s=stats.duration_s,
            cached_tokens=stats.cached_tokens,
            prompt_tps=stats.prompt_tps or None,
            generation_tps=stats.generation_tps or None,
        )
