"""Prefix-cache arithmetic on chat requests: what a prefix cache can reuse, what must be prefilled.

A chat backend with a prefix cache (an in-process MLX cache, llama.cpp / vLLM /
mlx_lm.server, a hosted prompt cache) keeps the tokens of the previous request and
serves the longest common token prefix of the next one from it; the rest is prefilled.

The rule here is message-granular: the reusable prefix of a request is its longest run
of leading messages equal to the previous request's messages at the same indices
(equal as wire dicts: role, content, tool calls, tool call id). Its tokens are reused;
every token from the first differing message on is prefilled. Token-level caching would
also reuse the common start of the first differing message (its role scaffolding, the
start of a merged content), so this slightly over-counts prefill; it does so for every
policy alike, and a splice, which rewrites whole messages, costs the same either way.

Pure functions on lists; no I/O.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

WireMessage = dict[str, Any]


def common_prefix_messages(previous: Sequence[WireMessage], current: Sequence[WireMessage]) -> int:
    """How many leading messages of ``current`` equal ``previous``'s at the same index."""
    n = 0
    for before, now in zip(previous, current):
        if before != now:
            break
        n += 1
    return n


@dataclass(frozen=True)
class RequestCost:
    """One request against the cache the previous request left."""

    total_tokens: int
    reused_tokens: int
    common_messages: int

    @property
    def prefill_tokens(self) -> int:
        return self.total_tokens - self.reused_tokens


def request_cost(
    previous: Sequence[WireMessage], current: Sequence[WireMessage], token_counts: Sequence[int]
) -> RequestCost:
    """The cost of sending ``current`` (tokens per message in ``token_counts``) after ``previous``.

    ``previous`` is empty for the first request of a session (a cold cache).
    """
    if len(token_counts) != len(current):
        raise ValueError(f"{len(token_counts)} token counts for {len(current)} messages")
    common = common_prefix_messages(previous, current)
    return RequestCost(total_tokens=sum(token_counts), reused_tokens=sum(token_counts[:common]), common_messages=common)


@dataclass
class CacheTally:
    """Per-session sums over its requests."""

    requests: int = 0
    total_tokens: int = 0
    reused_tokens: int = 0
    peak_tokens: int = 0

    def add(self, cost: RequestCost) -> None:
        self.requests += 1
        self.total_tokens += cost.total_tokens
        self.reused_tokens += cost.reused_tokens
        self.peak_tokens = max(self.peak_tokens, cost.total_tokens)

    @property
    def prefill_tokens(self) -> int:
        return self.total_tokens - self.reused_tokens

    @property
    def mean_tokens(self) -> float:
        """Mean context (request size) over the session; 0 with no requests."""
        return self.total_tokens / self.requests if self.requests else 0.0
