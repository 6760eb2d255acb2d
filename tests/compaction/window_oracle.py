"""Head and tail cuts computed from their definitions, for property tests to check the engine's.

Written without ``compaction.window`` (and its helpers): a check that calls the code
it checks cannot fail.
"""

from __future__ import annotations

from hermes_tui.core.tokens import TokenCounter, count_message
from hermes_tui.core.transcript import Message


def expected_head_end(messages: list[Message], protect_first_n: int) -> int:
    """Leading system messages, ``protect_first_n`` more, and the results of a call they end on."""
    systems = next((n for n, m in enumerate(messages) if m.role != "system"), len(messages))
    end = min(len(messages), systems + protect_first_n)
    while end < len(messages) and messages[end].role == "tool":
        end += 1
    return end


def expected_tail_start(messages: list[Message], counter: TokenCounter, budget: int) -> int:
    """The longest suffix costing at most ``budget`` (never less than the last message),
    widened to the start of the tool group it begins in."""
    if not messages:
        return 0
    start, suffix_cost = len(messages) - 1, 0
    for candidate in range(len(messages) - 1, -1, -1):
        suffix_cost += count_message(counter, messages[candidate])
        if suffix_cost > budget and candidate < len(messages) - 1:
            break
        start = candidate
    while start > 0 and messages[start].role == "tool":
        start -= 1
    return start
