"""The prefix-cache arithmetic, on hand-computed cases."""

from __future__ import annotations

import pytest

from hermes_tui.compaction.prefix import CacheTally, RequestCost, common_prefix_messages, request_cost


def user(text: str) -> dict:
    return {"role": "user", "content": text}


def assistant(text: str, calls: list | None = None) -> dict:
    item = {"role": "assistant", "content": text}
    if calls:
        item["tool_calls"] = calls
    return item


def call(call_id: str, arguments: str = "{}") -> dict:
    return {"id": call_id, "type": "function", "function": {"name": "bash", "arguments": arguments}}


def tool(call_id: str, text: str) -> dict:
    return {"role": "tool", "content": text, "tool_call_id": call_id}


def test_an_appended_request_reuses_the_whole_previous_request():
    previous = [user("fix the bug"), assistant("looking", [call("c1")])]
    current = [*previous, tool("c1", "ok")]
    cost = request_cost(previous, current, [10, 20, 5])
    assert (cost.common_messages, cost.reused_tokens, cost.prefill_tokens, cost.total_tokens) == (2, 30, 5, 35)


def test_the_first_request_is_prefilled_whole():
    cost = request_cost([], [user("hi")], [7])
    assert (cost.reused_tokens, cost.prefill_tokens) == (0, 7)


def test_a_splice_after_the_head_leaves_only_the_head_reusable():
    head = user("task")
    previous = [head, assistant("a1", [call("c1")]), tool("c1", "out1"), assistant("a2", [call("c2")]), tool("c2", "o")]
    marker = assistant("[summary of a1]")
    current = [head, marker, assistant("a2", [call("c2")]), tool("c2", "o"), assistant("a3")]
    cost = request_cost(previous, current, [7, 12, 9, 4, 3])
    # Everything after the head is prefilled again, though a2 and its result are unchanged.
    assert (cost.common_messages, cost.reused_tokens, cost.prefill_tokens) == (1, 7, 28)


def test_a_request_shorter_than_the_previous_one_reuses_its_common_start():
    previous = [user("task"), assistant("a"), user("more"), assistant("b")]
    current = [user("task"), assistant("[batch summary]")]
    cost = request_cost(previous, current, [5, 40])
    assert (cost.common_messages, cost.reused_tokens, cost.prefill_tokens) == (1, 5, 40)


def test_a_grown_last_message_is_prefilled_whole_under_the_message_rule():
    # The wire view merges a new same-role message into the last one: the merged message
    # differs from the cached one, so it counts as prefilled in full.
    previous = [user("task"), assistant("part one")]
    current = [user("task"), assistant("part one\n\npart two")]
    cost = request_cost(previous, current, [3, 8])
    assert (cost.reused_tokens, cost.prefill_tokens) == (3, 8)


@pytest.mark.parametrize("changed", [
    {"role": "user", "content": "same words"},                                         # role
    {"role": "assistant", "content": "same words", "tool_calls": [call("c9")]},        # tool calls added
    {"role": "assistant", "content": "same words!"},                                   # content
])
def test_messages_match_on_role_content_and_tool_calls(changed):
    previous = [user("task"), {"role": "assistant", "content": "same words"}]
    assert common_prefix_messages(previous, [user("task"), changed]) == 1


def test_tool_results_match_on_their_call_id_too():
    previous = [user("t"), assistant("", [call("c1")]), tool("c1", "done")]
    current = [user("t"), assistant("", [call("c1")]), tool("c2", "done")]
    assert common_prefix_messages(previous, current) == 2


def test_tool_call_arguments_are_part_of_the_match():
    previous = [user("t"), assistant("", [call("c1", '{"cmd": "ls"}')])]
    current = [user("t"), assistant("", [call("c1", '{"cmd": "ls -la"}')])]
    assert request_cost(previous, current, [4, 11]).reused_tokens == 4


def test_token_counts_must_match_the_request():
    with pytest.raises(ValueError, match="2 token counts for 3 messages"):
        request_cost([], [user("a"), user("b"), user("c")], [1, 2])


def test_the_tally_sums_requests_and_keeps_the_peak():
    tally = CacheTally()
    assert tally.mean_tokens == 0.0
    for total, reused in ((100, 0), (130, 100), (60, 20)):
        tally.add(RequestCost(total_tokens=total, reused_tokens=reused, common_messages=0))
    assert (tally.requests, tally.total_tokens, tally.reused_tokens, tally.prefill_tokens) == (3, 290, 120, 170)
    assert tally.peak_tokens == 130
    assert tally.mean_tokens == pytest.approx(290 / 3)
