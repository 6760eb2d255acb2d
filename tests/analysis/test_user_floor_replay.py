"""A long chatty session at a small window: every request fits, forever.

The session is built deterministically from the bundled real agent session
(``hermes_tui/assets/demo_session.json``): its agent steps, cycled, with a user
message before every fourth step, until it holds more than 5,000 messages of
which more than 500 are user messages. Tool results are cut to 1,200 characters,
as a tool's output cap would. It is replayed step by step (a pass after every
agent step, as the agent loop runs them) with the deterministic extractive
summarizer into an 8,192-token window, the default compression settings (the
``watermark`` policy). The extractive summarizer is instant, so defrag and batch are
sized as for a measured fast model (``INSTANT``), not the slow one assumed before a
model is measured (sizing.py).

User messages are never summarized by micro passes, so without a floor policy
they pile up between head and tail: the batch backstop finds nothing else to
absorb and the context grows past the window. With the policy the oldest ones
are archived and quoted in the summary, and the session stays inside its window.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest
from helpers import INSTANT

from hermes_tui.analysis.replay import ReplayResult, replay, turn_boundaries
from hermes_tui.compaction.window import head_end, tail_start
from hermes_tui.config import Config
from hermes_tui.core.conversation import Conversation
from hermes_tui.core.tokens import count_messages
from hermes_tui.core.transcript import Message, check_tool_pairing, iter_steps, parse_transcript
from hermes_tui.providers.extractive.summarizer import ExtractiveSummarizer
from hermes_tui.session.wiring import make_compactor, make_counter

DEMO_SESSION = Path(__file__).resolve().parents[2] / "hermes_tui" / "assets" / "demo_session.json"
CONTEXT_LIMIT = 8_192
MESSAGES, USERS = 5_000, 500
TOOL_CHARS = 1_200
STEPS_PER_TURN = 4

_ASKS = [
    "Now look at the failing test in tests/test_models.py and tell me why it fails.",
    "Thanks. Can you check whether the migration handles the empty table case too?",
    "Please keep the public API unchanged; only the internals may move.",
    "Run the whole test module again and show me only the failures.",
    "Why did you pick this approach over patching the query builder directly?",
    "Good. Write a short note for the changelog about what changed and why.",
    "Hold on, the CI log says something about a timeout in test_flush; look at that first.",
]


def long_session() -> list[Message]:
    """More than MESSAGES messages, more than USERS of them user messages; deterministic."""
    source = parse_transcript(DEMO_SESSION.read_text(encoding="utf-8"), source=str(DEMO_SESSION))
    steps = [source[start:end] for start, end in iter_steps(source) if source[start].role == "assistant"]
    out: list[Message] = [Message(role="system", content="You are a coding agent. Work in the repository.")]
    users = n = 0
    while len(out) < MESSAGES or users < USERS:
        if n % STEPS_PER_TURN == 0:
            ask = _ASKS[users % len(_ASKS)]
            out.append(Message(role="user", content=f"({users + 1}) {ask} " + "Details: " * (users % 9)))
            users += 1
        round_, step = divmod(n, len(steps))
        ids = {}
        for msg in steps[step]:
            calls = None
            if msg.tool_calls:
                calls = []
                for call in msg.tool_calls:
                    ids[call["id"]] = f"{call['id']}-{round_}"
                    calls.append({**call, "id": ids[call["id"]]})
            content = msg.content if msg.role != "tool" else (msg.content or "")[:TOOL_CHARS]
            out.append(Message(
                role=msg.role, content=content, tool_calls=calls,
                tool_call_id=ids.get(msg.tool_call_id) if msg.tool_call_id else None, name=msg.name,
            ))
        n += 1
    return out


@pytest.fixture(scope="module")
def floor_replay():
    messages = long_session()
    config = Config()
    counter = make_counter(config)
    compactor = make_compactor(
        config, counter=counter, summarizer=ExtractiveSummarizer(), context_limit=CONTEXT_LIMIT, session_id="floor",
    )
    compactor.ctx = dataclasses.replace(compactor.ctx, speed=INSTANT)
    conv = Conversation(counter=counter)
    boundaries = turn_boundaries(messages, "step")
    # The request that produced each step's assistant message: the context as the
    # previous step left it, plus the user message the step starts with (if any).
    requests: list[int] = []
    after: list[int] = []
    archived: list[Message] = []

    def persist(result) -> None:
        if result.splice is not None:
            archived.extend(result.splice.archived)

    leads = []
    position = 0
    for boundary in boundaries:
        new = messages[position:boundary]
        leads.append(count_messages(counter, new[: next(i for i, m in enumerate(new) if m.role == "assistant")]))
        position = boundary
    requests.append(leads[0])

    # Steps that end over the threshold: what was left between head and tail that the passes
    # and batch could still have folded (tokens of messages that are neither the summary's
    # marker nor a user message), and the batch outcome of the step.
    over: list[tuple[int, int, list[str]]] = []

    def on_turn(number: int, total: int, reports) -> None:
        after.append(conv.total_tokens)
        if conv.total_tokens > compactor.ctx.window.threshold_tokens:
            now = list(conv.messages)
            middle = now[head_end(now, compactor.settings.protect_first_n):
                         tail_start(now, counter, compactor.ctx.window.tail_token_budget)]
            foldable = count_messages(counter, [m for m in middle if not m.is_marker and m.role != "user"])
            over.append((conv.total_tokens, foldable, [r.outcome for r in reports if r.kind == "batch"]))
        if number < len(leads):
            requests.append(conv.total_tokens + leads[number])

    result: ReplayResult = replay(messages, conv, compactor, turns="step", persist=persist, on_turn=on_turn)
    return messages, conv, compactor, result, requests, after, archived, config, over


def test_the_session_is_long_and_chatty(floor_replay):
    messages = floor_replay[0]
    assert len(messages) >= MESSAGES
    assert sum(1 for m in messages if m.role == "user") >= USERS


def test_every_request_fits_the_window(floor_replay):
    _, _, _, _, requests, _, _, config, _ = floor_replay
    room = CONTEXT_LIMIT - config.model.max_tokens  # the reply needs its budget too
    rejected = [tokens for tokens in requests if tokens > room]
    assert not rejected, f"{len(rejected)} of {len(requests)} requests over {room} tokens (largest {max(rejected)})"


def test_occupancy_stays_under_the_threshold(floor_replay):
    _, _, compactor, _, _, after, _, config, over = floor_replay
    threshold = compactor.ctx.window.threshold_tokens
    # The watermark policy has no window-pressure defrag (its passes fold a backlog one
    # exchange at a time), so a step whose tail is one large step could end over the
    # threshold with nothing in the middle but the summary's marker and the floor's user
    # messages (2 of 2222 steps, 2.6% over, before the summary gave way in batch).
    assert len(over) == sum(1 for tokens in after if tokens > threshold)
    assert not over, f"{len(over)} of {len(after)} steps end over the threshold ({threshold}): {over[:3]}"


def test_batch_always_finds_something_to_absorb(floor_replay):
    result = floor_replay[3]
    assert result.count("nothing_to_absorb", "batch") == 0


def test_nothing_is_lost_and_tool_calls_stay_paired(floor_replay):
    messages, conv, _, _, _, _, archived, _, _ = floor_replay
    check_tool_pairing(conv.messages)
    kept = {m.id for m in conv.messages if not m.is_marker} | {m.id for m in archived if not m.is_marker}
    assert kept == {m.id for m in messages}


def test_recent_user_messages_stay_verbatim_and_in_order(floor_replay):
    messages, conv, _, _, _, _, _, _, _ = floor_replay
    users = [(m.id, m.content) for m in messages if m.role == "user"]
    active = [(m.id, m.content) for m in conv.messages if m.role == "user"]
    # The first one is in the protected head; after it, the newest ones, in order.
    assert active[0] == users[0]
    assert len(active) > 2
    assert active[1:] == users[len(users) - len(active) + 1:], "the user messages kept are not the newest"


def test_folded_user_messages_are_quoted_verbatim_newest_kept(floor_replay):
    messages, conv, _, _, _, _, archived, _, _ = floor_replay
    markers = [m for m in conv.messages if m.is_marker]
    assert len(markers) == 1
    quotes = markers[0].meta["user_quotes"]
    by_id = {m.id: m for m in messages}
    archived_users = [m.id for m in archived if m.role == "user"]
    assert quotes, "no folded user message is quoted"
    for message_id, text in quotes:
        assert message_id in archived_users and by_id[message_id].content == text
        assert f"> {text.split(chr(10))[0]}" in markers[0].content
    # The quotes are the newest of the folded ones, oldest first.
    assert [q[0] for q in quotes] == archived_users[len(archived_users) - len(quotes):]
    assert markers[0].meta["users_folded_total"] == len(archived_users)
