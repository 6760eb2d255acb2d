"""The KV prefix cache of an in-process model: reuse the longest prefix seen, read the rest.

Each caller role (the chat, the passes) keeps the tokens of its last prompt and their
KV cache on the loaded model, so its next call reads only the part that changed.
``warm`` fills a role's cache ahead of its next call (after a compaction splice).
Everything here runs on the runtime's MLX thread.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:  # imported by the first load: MLX is slow to import
    import mlx.nn as nn

# A prompt is read in steps, and a step cannot be interrupted: cancel and deadline are
# checked between steps. A fixed step does not fit every device (mlx_lm's 2048 tokens take
# ~10 s with the tiny model on a CPU), so each step is sized from the speed of the one
# before to take about PREFILL_STEP_S. On the CPU this reads as fast as 2048-token steps
# (benchmarks/bench_cancel.py).
PREFILL_STEP_S = 0.25
PREFILL_FIRST_STEP = 32    # tokens, before the device's speed is known
PREFILL_MAX_STEP = 2048    # mlx_lm's own step: longer steps read no faster and take more memory
PREFILL_MAX_GROWTH = 4     # a step's size grows at most this much over the previous one

@dataclass
class PrefixCache:
    tokens: list[int]
    cache: list[Any]  # mlx_lm's KV cache, one entry per layer


class LoadedModel(Protocol):
    """What this module reads of a ``runtime.LoadedModel``: its ``model`` and ``prefixes``
    (a protocol, so that this module does not import the runtime that imports it)."""

    model: nn.Module
    prefixes: dict[str, PrefixCache]


def reuse_prefix(loaded: LoadedModel, key: str | None, tokens: list[int]) -> tuple[list[Any], int]:
    """A KV cache holding the longest prefix of ``tokens`` seen last time, and its length."""
    from mlx_lm.models.cache import can_trim_prompt_cache, make_prompt_cache, trim_prompt_cache

    previous = loaded.prefixes.get(key) if key else None
    if previous is None or not can_trim_prompt_cache(previous.cache):
        return make_prompt_cache(loaded.model), 0
    common = common_prefix(previous.tokens, tokens)
    common = min(common, len(tokens) - 1)  # at least one token must be fed to generate
    held = previous.cache[0].offset
    trim_prompt_cache(previous.cache, held - common)
    return previous.cache, common

def keep_prefix(loaded: LoadedModel, key: str, tokens: list[int], cache: list[Any]) -> None:
    """Keep the cache for the prompt only: generated tokens will not recur verbatim."""
    from mlx_lm.models.cache import can_trim_prompt_cache, trim_prompt_cache

    if not can_trim_prompt_cache(cache):
        loaded.prefixes.pop(key, None)
        return
    trim_prompt_cache(cache, max(0, cache[0].offset - len(tokens)))
    loaded.prefixes[key] = PrefixCache(list(tokens), cache)


def warm_prefix(loaded: LoadedModel, key: str, tokens: list[int]) -> tuple[int, int]:
    """Read ``tokens`` (the start of the role's next prompt) into its prefix cache ahead of
    time: (tokens reused from the cache, tokens read now). The last token is left for the
    next call, which must feed at least one."""
    cache, reused = reuse_prefix(loaded, key, tokens)
    processed = reused
    try:
        for processed in prefill(loaded.model, cache, tokens, reused):  # noqa: B007 - read after the loop
            pass
    except BaseException:
        loaded.prefixes.pop(key, None)  # half-filled: not reusable
        raise
    loaded.prefixes[key] = PrefixCache(list(tokens[:processed]), cache)
    return reused, processed - reused


def prefill(model: nn.Module, cache: list[Any], tokens: list[int], start: int) -> Iterator[int]:
    """Read ``tokens[start:]`` into ``cache`` in steps, all but the last token (generation
    starts from it); after each step, yield how many of ``tokens`` the cache now holds.

    The same work as mlx_lm's own prefill loop (``generate_step``), with each step sized
    to take about PREFILL_STEP_S on this device (see the constants).
    """
    import mlx.core as mx
    from mlx_lm.generate import generation_stream, wired_limit

    end = len(tokens) - 1
    step = PREFILL_FIRST_STEP
    while start < end:
        size = min(step, end - start)
        began = time.perf_counter()
        # wired_limit: as in stream_generate, keeps a large model resident on Metal (no-op on the
        # CPU). Its streams are annotated as mx.Stream, yet stream_generate passes it this
        # thread-local one too: hence list[Any].
        streams: list[Any] = [generation_stream]
        with wired_limit(model, streams), mx.stream(generation_stream):
            model(mx.array(tokens[start:start + size])[None], cache=cache)
            mx.eval([c.state for c in cache])
        mx.clear_cache()
        start += size
        took = time.perf_counter() - began
        paced = int(size * PREFILL_STEP_S / took) if took > 0 else PREFILL_MAX_STEP
        step = max(PREFILL_FIRST_STEP, min(paced, size * PREFILL_MAX_GROWTH, PREFILL_MAX_STEP))
        yield start


def common_prefix(a: list[int], b: list[int]) -> int:
    """How many leading tokens ``a`` and ``b`` share: what a prefix cache can reuse."""
    n = 0
    for x, y in zip(a, b):
        if x != y:
            break
        n += 1
    return n
