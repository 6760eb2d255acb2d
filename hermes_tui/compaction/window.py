"""The protected regions: head (founding messages) and tail (recent, token-budgeted).

Compaction only ever works between ``head_end`` and ``tail_start``.
"""

from __future__ import annotations

from dataclasses import dataclass

from hermes_tui.config import COMPRESSION_DEFAULTS as _DEFAULTS
from hermes_tui.config import FALLBACK_CONTEXT_LIMIT
from hermes_tui.core.tokens import TokenCounter, count_message
from hermes_tui.core.transcript import Message, group_end, group_start


@dataclass
class ContextWindow:
    """A model's context window: ``limit`` is None until resolved."""

    limit: int | None
    threshold: float = _DEFAULTS.threshold
    target_ratio: float = _DEFAULTS.target_ratio

    @property
    def effective_limit(self) -> int:
        """Budgets use the fallback until the window is resolved; telemetry still reports null."""
        return self.limit or FALLBACK_CONTEXT_LIMIT

    @property
    def threshold_tokens(self) -> int:
        return int(self.effective_limit * self.threshold)

    @property
    def tail_token_budget(self) -> int:
        return int(self.threshold_tokens * self.target_ratio)

    def occupancy_pct(self, tokens: int) -> float | None:
        """``tokens`` as a share of the threshold; None while the window is unresolved."""
        if self.limit is None:
            return None
        return round(100.0 * tokens / int(self.limit * self.threshold), 1)


def head_end(messages: list[Message], protect_first_n: int) -> int:
    """End of the head: leading system messages plus the first ``protect_first_n`` others."""
    n = 0
    while n < len(messages) and messages[n].role == "system":
        n += 1
    n = min(len(messages), n + protect_first_n)
    return group_end(messages, n)


def tail_start(messages: list[Message], counter: TokenCounter, budget: int) -> int:
    """Start of the tail: walk back from the end while the budget lasts.

    The last message is always in the tail, and the cut is moved back to the start
    of a tool group so a call and its results stay together. O(tail), not O(transcript).
    """
    if not messages:
        return 0
    start = len(messages) - 1
    spent = count_message(counter, messages[start])
    while start > 0:
        cost = count_message(counter, messages[start - 1])
        if spent + cost > budget:
            break
        spent += cost
        start -= 1
    return group_start(messages, start)
