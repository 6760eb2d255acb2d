"""Head and tail cuts against expectations worked out by hand.

Every message carries a preset token count (the cache ``count_message`` reads), so
the cost of each message is exactly the number written next to it here, and the
expected cuts follow from arithmetic on those numbers, not from the code under test.
"""

from __future__ import annotations

from hermes_tui.compaction.window import ContextWindow, head_end, tail_start
from hermes_tui.config import CompressionConfig
from hermes_tui.core.transcript import Message

COUNTER_NAME = "preset"


class PresetCounter:
    """A counter whose message counts are all preset; it only counts new text (one token a word)."""

    name = COUNTER_NAME

    def count_text(self, text: str) -> int:
        return len(text.split())


COUNTER = PresetCounter()


def msg(role: str, tokens: int, *, calls: tuple[str, ...] = (), answers: str | None = None) -> Message:
    tool_calls = [{"id": cid, "type": "function", "function": {"name": "bash", "arguments": "{}"}} for cid in calls]
    return Message(
        role=role, content=f"{role} message", tool_calls=tool_calls or None, tool_call_id=answers,
        token_count=tokens, token_counter=COUNTER_NAME,
    )


def plain(*costs: int) -> list[Message]:
    """Alternating user/assistant messages with the given costs."""
    return [msg("user" if n % 2 == 0 else "assistant", cost) for n, cost in enumerate(costs)]


# --- the tail ---------------------------------------------------------------------------


def test_a_message_that_brings_the_spend_exactly_to_the_budget_is_in_the_tail():
    # From the end: 10, 20, 30 (= the budget: still in), 40 (over: out).
    messages = plain(10, 10, 10, 10, 10)
    assert tail_start(messages, COUNTER, 30) == 2


def test_one_token_under_that_budget_the_same_message_is_out():
    messages = plain(10, 10, 10, 10, 10)
    assert tail_start(messages, COUNTER, 29) == 3


def test_the_walk_stops_at_the_first_message_over_the_budget():
    # 5 + 5 = 10 fits, + 30 = 40 does not; the 1-token message before it stays out too.
    messages = plain(1, 30, 5, 5)
    assert tail_start(messages, COUNTER, 39) == 2
    assert tail_start(messages, COUNTER, 40) == 1
    assert tail_start(messages, COUNTER, 41) == 0


def test_the_last_message_is_in_the_tail_even_over_the_budget():
    messages = plain(10, 50)
    assert tail_start(messages, COUNTER, 30) == 1
    assert tail_start([], COUNTER, 30) == 0


def test_a_tool_group_straddling_the_cut_is_pulled_whole_into_the_tail():
    # user 10 | assistant(2 calls) 10, result 10, result 10 | assistant 10.
    # From the end: 10, 20, 30 > 25: the cut falls between the two results (index 3),
    # so it moves back to the assistant that made the calls (index 1).
    messages = [
        msg("user", 10),
        msg("assistant", 10, calls=("a", "b")),
        msg("tool", 10, answers="a"),
        msg("tool", 10, answers="b"),
        msg("assistant", 10),
    ]
    assert tail_start(messages, COUNTER, 25) == 1
    # With room for the whole group the cut is the same, reached by the budget alone.
    assert tail_start(messages, COUNTER, 40) == 1
    # With room for the user message too, the walk reaches it.
    assert tail_start(messages, COUNTER, 50) == 0


def test_a_group_ending_the_transcript_is_kept_whole():
    # The last message is a tool result: 15 alone is over 12, the cut moves back to its call.
    messages = [msg("user", 10), msg("assistant", 20, calls=("a",)), msg("tool", 15, answers="a")]
    assert tail_start(messages, COUNTER, 12) == 1


def test_the_tail_budget_is_the_target_share_of_the_threshold():
    # 10,000 x 0.80 = 8,000 tokens to the threshold; 20 % of that is 1,600.
    window = ContextWindow(limit=10_000, settings=CompressionConfig(threshold=0.80, target_ratio=0.20))
    assert window.threshold_tokens == 8_000
    assert window.tail_token_budget == 1_600
    # Unresolved: budgets come from the 32,768 fallback (26,214 to the threshold, 5,242 of tail).
    unresolved = ContextWindow(limit=None, settings=CompressionConfig(threshold=0.80, target_ratio=0.20))
    assert unresolved.threshold_tokens == 26_214
    assert unresolved.tail_token_budget == 5_242


def test_the_window_budget_decides_which_message_is_the_first_of_the_tail():
    # A budget of 1,600 (as above), over messages of 400 each: the last four are the tail.
    window = ContextWindow(limit=10_000, settings=CompressionConfig(threshold=0.80, target_ratio=0.20))
    messages = plain(400, 400, 400, 400, 400, 400)
    assert tail_start(messages, COUNTER, window.tail_token_budget) == 2


# --- the head ---------------------------------------------------------------------------


def test_head_with_a_system_prompt_counts_protect_first_n_after_it():
    messages = [msg("system", 5), msg("user", 5), msg("assistant", 5), msg("user", 5), msg("assistant", 5)]
    assert head_end(messages, 0) == 1
    assert head_end(messages, 1) == 2
    assert head_end(messages, 3) == 4


def test_head_counts_every_leading_system_message():
    messages = [msg("system", 5), msg("system", 5), msg("user", 5), msg("assistant", 5)]
    assert head_end(messages, 0) == 2
    assert head_end(messages, 1) == 3


def test_head_without_a_system_prompt_counts_from_the_first_message():
    messages = [msg("user", 5), msg("assistant", 5), msg("user", 5), msg("assistant", 5)]
    assert head_end(messages, 0) == 0
    assert head_end(messages, 1) == 1
    assert head_end(messages, 2) == 2


def test_head_that_ends_on_a_call_takes_its_results_along():
    # system | user, assistant(2 calls) | result, result | assistant
    # protect_first_n=2 ends after the calling assistant (index 3): its results join the head.
    with_system = [
        msg("system", 5), msg("user", 5), msg("assistant", 5, calls=("a", "b")),
        msg("tool", 5, answers="a"), msg("tool", 5, answers="b"), msg("assistant", 5),
    ]
    assert head_end(with_system, 2) == 5
    without_system = with_system[1:]
    assert head_end(without_system, 2) == 4
    # One fewer: the head ends before the group, which stays outside it.
    assert head_end(without_system, 1) == 1


def test_head_never_runs_past_the_transcript():
    messages = [msg("system", 5), msg("user", 5)]
    assert head_end(messages, 3) == 2
    assert head_end([], 3) == 0
