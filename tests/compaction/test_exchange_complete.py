"""Only complete exchanges are absorbed: an assistant message whose calls were not all
answered stays verbatim, and the exchanges after it are still absorbed.

Such a message is left behind when a session stops while a tool runs and the user
carries on; its missing result never comes, since results follow their call.
"""

from __future__ import annotations

from helpers import ScriptedSummarizer, assistant, exchange, make_compactor, results, user

from hermes_tui.core.transcript import Message


def markers(messages):
    return [m for m in messages if m.is_marker]


def half_answered_session():
    """system, user, an assistant with two calls of which only the first is answered,
    then three complete exchanges, a user turn, one more exchange and a closing reply."""
    half = assistant("Running two commands.", calls=2)
    first_result = results(half, 100)[0]
    later = [exchange(100) for _ in range(3)]
    messages = [Message(role="system", content="You are a coding agent."), user("Fix the bug"), half, first_result]
    for ex in later:
        messages.extend(ex)
    messages += [user("and now the docs"), *exchange(100), assistant("Done.")]
    return messages, half, first_result, later


def test_an_assistant_with_one_of_two_calls_answered_is_never_absorbed():
    summarizer = ScriptedSummarizer()
    compactor, conv = make_compactor(summarizer, target_ratio=0.01)
    messages, half, first_result, _ = half_answered_session()
    conv.extend(messages)
    for _ in range(6):
        compactor.micro_pass(conv)
    seen = [m for request in summarizer.requests for m in request.messages]
    assert half in conv.messages and first_result in conv.messages
    assert conv.messages.index(first_result) == conv.messages.index(half) + 1
    covered = {cid for m in markers(conv.messages) for cid in m.meta["covers"]}
    assert half.id not in covered and first_result.id not in covered
    assert all(m.id not in (half.id, first_result.id) for m in seen)


def test_later_complete_exchanges_behind_an_incomplete_one_are_absorbed():
    compactor, conv = make_compactor(target_ratio=0.01)
    messages, half, first_result, later = half_answered_session()
    conv.extend(messages)
    outcomes = [compactor.micro_pass(conv).outcome for _ in range(3)]
    assert outcomes == ["absorbed"] * 3
    (marker,) = markers(conv.messages)
    assert marker.meta["covers"] == [m.id for m in later[-1]]  # each pass's marker covers its exchange
    assert all(m not in conv.messages for ex in later for m in ex)
    assert half in conv.messages and first_result in conv.messages
    # A fresh compactor recovers the same cursor from the transcript.
    fresh, _ = make_compactor(target_ratio=0.01)
    assert fresh.cursor(conv.messages) == compactor.cursor(conv.messages)


def test_a_call_still_running_at_the_end_is_absorbed_once_answered():
    compactor, conv = make_compactor(target_ratio=0.01)
    running = assistant("Running two commands.", calls=2)
    answers = results(running, 100)
    conv.extend([Message(role="system", content="s"), user("go"), running, answers[0]])
    assert compactor.micro_pass(conv).outcome == "nothing_to_absorb"
    conv.extend([answers[1], user("next"), *exchange(100), assistant("Done.")])
    assert compactor.micro_pass(conv).outcome == "absorbed"
    (marker,) = markers(conv.messages)
    assert marker.meta["covers"] == [running.id, answers[0].id, answers[1].id]

