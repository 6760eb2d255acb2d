"""Transcript builders, a scripted summarizer and a scripted chat model for unit tests.

The scripted summarizer and chat model are test doubles: they return what the test
chose. They stand in for a model only in unit and property tests (of compaction, of
the agent loop); integration tests use a real server.

A plain module rather than fixtures: the builders make values for module constants and
parametrize lists, which fixtures cannot. Shared support for other test folders lives in
``tests/support/``.
"""

from __future__ import annotations

import itertools
import json
from collections.abc import Callable
from typing import Any

from hermes_tui.compaction.engine import Compactor
from hermes_tui.compaction.micro import PassContext
from hermes_tui.compaction.sizing import instant
from hermes_tui.compaction.summarizer import Completion, SummarizerError
from hermes_tui.compaction.summary_request import SummaryRequest
from hermes_tui.compaction.window import ContextWindow
from hermes_tui.config import CompressionConfig
from hermes_tui.core.conversation import Conversation
from hermes_tui.core.tokens import EstimateCounter
from hermes_tui.core.transcript import Message

_ids = itertools.count()

# A compression model fast enough that defrag and batch take their whole input in one call,
# as the spec describes them; tests of sizing (tests/compaction/test_sizing.py) set their own.
INSTANT = instant()


def words(n: int, seed: str = "w") -> str:
    """About n tokens of plain text."""
    return " ".join(f"{seed}{i % 97}" for i in range(n))


def user(text: str) -> Message:
    return Message(role="user", content=text)


def assistant(text: str = "", calls: int = 0, name: str = "bash") -> Message:
    tool_calls = [
        {"id": f"call_{next(_ids)}", "type": "function",
         "function": {"name": name, "arguments": json.dumps({"command": f"ls {i}"})}}
        for i in range(calls)
    ]
    return Message(role="assistant", content=text, tool_calls=tool_calls or None)


def results(call: Message, size: int = 50) -> list[Message]:
    return [Message(role="tool", content=words(size, "out"), tool_call_id=cid, name="bash") for cid in call.call_ids]


def exchange(size: int = 50, calls: int = 1, text: str = "Looking at the file.") -> list[Message]:
    a = assistant(text, calls=calls)
    return [a, *results(a, size)]


def agent_session(exchanges: int = 10, size: int = 120, users_every: int = 4) -> list[Message]:
    """system, user, then exchanges with a user message every few exchanges."""
    messages = [Message(role="system", content="You are a coding agent."), user("Fix the bug in app/models.py")]
    for n in range(exchanges):
        if n and n % users_every == 0:
            messages.append(user(f"User request number {n}: keep going, and do not add a new helper."))
        messages.extend(exchange(size))
    messages.append(assistant("Done."))
    return messages


class ScriptedSummarizer:
    """Returns ``script(request)``; raises what the script raises. Records each request."""

    model_name = "scripted"

    def __init__(self, script: Callable[[SummaryRequest], str] | None = None, finish_reason: str = "stop"):
        self.script = script or (lambda request: (request.summary + "\n" if request.summary else "") + "- did a step.")
        self.finish_reason = finish_reason
        self.requests: list[SummaryRequest] = []

    def summarize(self, request: SummaryRequest, *, max_tokens: int) -> Completion:
        self.requests.append(request)
        text = self.script(request)
        return Completion(text, self.finish_reason, 100, 10, 0.001)

    def complete(self, messages, *, max_tokens):  # pragma: no cover - not used: summarize is preferred
        raise AssertionError("scripted summarizer is called through summarize()")


def failing(kind: str = "timeout") -> Callable[[SummaryRequest], str]:
    def script(request: SummaryRequest) -> str:
        raise SummarizerError(kind, f"scripted {kind}")

    return script


def make_compactor(
    summarizer=None,
    *,
    limit: int | None = 20_000,
    protect_first_n: int = 1,
    target_ratio: float = 0.05,
    defrag_threshold: int = 2000,
    every_n_turns: int = 1,
    micro: bool = True,
    policy: str = "per_exchange",
    trim: bool = True,
    mode: str = "merge",
    fact_guard: bool = False,
    **settings: Any,
) -> tuple[Compactor, Conversation]:
    """A compactor for tests of the passes themselves: by default a pass after every exchange.

    ``settings``: other keys of the ``compression`` section (the schema's defaults otherwise).
    """
    counter = EstimateCounter()
    # model_copy, not the constructor: tests of the passes use sizes below the schema's floors
    # (a defrag threshold of 60 tokens) to reach a defrag in a few exchanges. It checks no
    # names, so a misspelt setting is refused here rather than silently ignored.
    unknown = set(settings) - set(CompressionConfig.model_fields)
    assert not unknown, f"not compression settings: {sorted(unknown)}"
    compression = CompressionConfig().model_copy(update=dict(
        protect_first_n=protect_first_n,
        target_ratio=target_ratio,
        micro_compact=micro,
        micro_compact_every_n_turns=every_n_turns,
        micro_compact_defrag_threshold_tokens=defrag_threshold,
        # By default the engine's plain pass: the scripted summaries here are whole summaries
        # (merge), and no Facts section; append mode and the fact guard have tests of their own.
        micro_compact_mode=mode,
        fact_guard=fact_guard,
        policy=policy,
        trim=trim,
        **settings,
    ))
    ctx = PassContext(
        summarizer=summarizer or ScriptedSummarizer(),
        counter=counter,
        window=ContextWindow(limit=limit, settings=compression),
        speed=INSTANT,
    )
    return Compactor(ctx, session_id="test"), Conversation(counter=counter)


def user_texts(messages: list[Message]) -> list[str]:
    return [m.content for m in messages if m.role == "user"]


def assert_tools_paired(messages: list[Message]) -> None:
    from hermes_tui.core.transcript import check_tool_pairing

    check_tool_pairing(messages)
    for n, m in enumerate(messages):
        for cid in m.call_ids:
            answered = any(x.role == "tool" and x.tool_call_id == cid for x in messages[n + 1:])
            assert answered, f"call {cid} at {n} lost its result"


def check_request(messages: list[dict]) -> None:
    """What any chat API requires of a request: every call answered, right after its message."""
    pending: list[str] = []
    for message in messages:
        if message["role"] == "tool":
            assert message["tool_call_id"] in pending, message
            pending.remove(message["tool_call_id"])
            continue
        assert not pending, f"unanswered calls {pending} before a {message['role']} message"
        pending = [c["id"] for c in message.get("tool_calls") or []]
    assert not pending, f"the request ends with unanswered calls {pending}"


class ScriptedModel:
    """A chat model that plays ``replies`` (text, tool calls or None) and checks each request."""

    model_name = "scripted"
    max_tokens = 64
    supports_tools = True

    def __init__(self, replies: list | None = None, on_request: Callable[[list[dict]], None] | None = None):
        self.replies: list = list(replies or [])
        self.on_request = on_request
        self.requests: list[list[dict]] = []
        # per request: the tools its reply had to be a call to (None: free)
        self.must_call: list[list[str] | None] = []
        self.must_call_specs: list[list[dict] | None] = []  # the same, as the specs sent

    def stream(self, messages, *, max_tokens=None, stop=None, cancel=None, tools=None, must_call=None):
        from hermes_tui.chat.client import ChatDelta, ChatDone, Usage

        check_request(messages)
        assert tools, "the tools go with every request"
        self.requests.append(messages)
        self.must_call.append([spec["function"]["name"] for spec in must_call] if must_call else None)
        self.must_call_specs.append(must_call)
        if self.on_request:
            self.on_request(messages)
        text, calls = self.replies.pop(0) if self.replies else ("(script ran out)", None)
        yield ChatDelta(text)
        yield ChatDone(text, Usage(prompt_tokens=None, completion_tokens=None,
                                   finish_reason="tool_calls" if calls else "stop"), tool_calls=calls)
