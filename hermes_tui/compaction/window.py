"""The protected regions: head (founding messages) and tail (recent, token-budgeted).

Compaction only ever works between ``head_end`` and ``tail_start``.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from hermes_tui.config import FALLBACK_CONTEXT_LIMIT, CompressionConfig
from hermes_tui.core.tokens import TokenCounter, count_message
from hermes_tui.core.transcript import Message, group_end, group_start


@dataclass
class ContextWindow:
    """A model's context window (``limit`` is None until resolved) and the ``compression``
    section of the config that sets the threshold and the tail in it.

    ``settings`` is the section object itself, not a copy of its values: the pass, the policy
    and the compactor all read it through this window, so a value has one copy from the
    config file to the pass, and its default is the schema's.
    """

    limit: int | None
    settings: CompressionConfig = field(default_factory=CompressionConfig)

    @property
    def effective_limit(self) -> int:
        """Budgets use the fallback until the window is resolved; telemetry still reports null."""
        return self.limit or FALLBACK_CONTEXT_LIMIT

    @property
    def threshold_tokens(self) -> int:
        return int(self.effective_limit * self.settings.threshold)

    @property
    def tail_token_budget(self) -> int:
        return int(self.threshold_tokens * self.settings.target_ratio)

    def occupancy_pct(self, tokens: int) -> float | None:
        """``tokens`` as a share of the threshold; None while the window is unresolved."""
        if self.limit is None:
            return None
        return round(100.0 * tokens / int(self.limit * self.settings.threshold), 1)


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
