"""The compression model in-process on MLX: passes run on the shared MlxRuntime.

The pass prompt's static instructions come first, so the prefix cache serves them
from the second pass on: a pass prefills only the summary and the new exchange.
"""

from __future__ import annotations

import time
from typing import Any

from hermes_tui.compaction.sizing import ModelSpeed
from hermes_tui.compaction.summarizer import Completion, SummarizerError
from hermes_tui.core.failures import TIMEOUT, UNAVAILABLE
from hermes_tui.hub.resolve import ModelUnavailable
from hermes_tui.providers.mlx.runtime import GenerationAborted, GenerationStats, MlxRuntime

CACHE_KEY = "compression"
TIMEOUT_CONFIG_KEY = "auxiliary.compression.timeout"  # named in the TIMEOUT message


class MlxSummarizer:
    def __init__(self, model: str, *, timeout: float = 120.0, runtime: MlxRuntime | None = None):
        self.model_name = model
        self.speed_key = f"mlx:{model}"
        self.speed = ModelSpeed()  # learnt from the calls, kept per speed_key (compaction.sizing)
        self.timeout = timeout
        self.runtime = runtime or MlxRuntime.shared()
        self.last_stats: GenerationStats | None = None  # the last call's, for benchmarks

    def complete(self, messages: list[dict[str, Any]], *, max_tokens: int) -> Completion:
        """One generation; ``timeout`` is a deadline for the whole call: waiting for the
        device (a chat reply may hold it), loading the model, prefill and generation."""
        started = time.perf_counter()
        try:
            loaded = self.runtime.load(self.model_name, timeout=self.timeout)
            # What is left of the deadline; never 0, which would mean "no timeout".
            left = max(self.timeout - (time.perf_counter() - started), 1e-3)
            stats = self.runtime.generate(loaded, messages, max_tokens=max_tokens, cache_key=CACHE_KEY, timeout=left)
        except ModelUnavailable as exc:
            raise SummarizerError(UNAVAILABLE, str(exc), model=exc.model) from exc
        except GenerationAborted as exc:
            if exc.reason == "timeout":
                raise SummarizerError(
                    TIMEOUT,
                    f"MLX compression model {self.model_name} did not answer within {self.timeout:g} s: "
                    f"raise {TIMEOUT_CONFIG_KEY} or use a smaller model",
                ) from None
            raise SummarizerError(TIMEOUT, f"MLX model {self.model_name}: {exc}") from None
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
