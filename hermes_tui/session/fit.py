"""The guard before every model request: never send one known not to fit the window.

Both ways a session calls the model (``Session.reply`` for a chat reply, ``AgentTurn``
for each step of an agent turn) go through ``guarded_stream``. Before the request is
sent, its size (the transcript, the tools' schema and the reply budget, which is the
call's ``max_tokens``, else ``model.max_tokens``) is checked against the window:

* it fits: it is sent (a reply budget of more than half the window counts as half);
* it does not: the listener hears ``compacting`` (the UI shows it), passes in flight are
  settled, then the trim stage runs (no model) and, when that is not enough, batch
  compaction runs now; ``compacted`` reports what it did. If the
  request then fits it is sent, else nothing is sent and ``ContextTooLarge`` says what
  is too large and what to do.

A step's ``note`` (the agent's line after tool results) is added to the request's last
message, a tool result, when it is sent; it is not stored, and its tokens are reserved
with the reply's.

The server may still refuse it (our count is an estimate, the window may be unknown or
wrong): a ``CONTEXT_EXCEEDED`` rejection before any text arrived teaches the session the
server's figures (its window; how much larger its count is than ours), compacts, and
retries once. A second rejection is raised with the server's own words.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from hermes_tui.chat.client import CONTEXT_EXCEEDED, ChatError
from hermes_tui.compaction.state import STALE
from hermes_tui.compaction.trim import TRIMMED
from hermes_tui.core.transcript import wire_view
from hermes_tui.util.logs import get_logger

if TYPE_CHECKING:
    from hermes_tui.compaction.engine import PassReport

# The session (``session.session.Session``), which imports this module: named, not imported.
Session = Any

log = get_logger("fit")

# How long the first request waits for a window still being resolved (the probe's own
# timeout bounds it too): without it the guard cannot know.
RESOLVE_WAIT_S = 15.0
# Compactions per request: a second one only when the first was dropped as stale (a pass
# published meanwhile).
MAX_COMPACTIONS = 2


@dataclass(frozen=True)
class RequestSize:
    """A request as the guard sees it, in tokens (counts scaled by what the server taught)."""

    messages: int
    tools: int
    reply: int
    limit: int | None  # the window; None while unknown

    @property
    def prompt(self) -> int:
        return self.messages + self.tools

    @property
    def needed(self) -> int:
        return self.prompt + self.reply

    @property
    def fits(self) -> bool:
        return self.limit is None or self.needed <= self.limit

    def describe(self, model: str = "the model") -> str:
        tools = f" + {self.tools:,} of tool definitions" if self.tools else ""
        window = f"{self.limit:,}" if self.limit else "an unknown number of"
        return (f"the conversation is {self.messages:,} tokens{tools} and the reply needs {self.reply:,}, "
                f"but the window of {model} holds {window} tokens")


class ContextTooLarge(ChatError):
    """Nothing was sent: the request would not fit the window, even after compaction."""

    def __init__(self, message: str, size: RequestSize):
        super().__init__(CONTEXT_EXCEEDED, message)
        self.size = size


class FitListener:
    """What the guard tells the UI. Every hook is optional."""

    def compacting(self, size: RequestSize) -> None:
        """The request does not fit: compaction starts now (``size``: before it)."""

    def compacted(self, report: PassReport | None, size: RequestSize) -> None:
        """Compaction ended (``report`` None when it raised); ``size``: the request now."""


@dataclass
class FitState:
    """What a session has learnt from its server's rejections."""

    count_scale: float = 1.0  # the server's token count over ours, when it counted more


def request_size(session: Session, tools: list[dict[str, Any]] | None, reply: int) -> RequestSize:
    counter = session.conv.counter
    scale = session.fit.count_scale
    tool_tokens = counter.count_text(json.dumps(tools, ensure_ascii=False)) if tools else 0
    with session.lock:
        messages = session.conv.total_tokens
    limit = session.compactor.ctx.window.limit
    if limit:
        # A cap past half the window is reserved as half: more could never be generated
        # with any conversation before it, and the model stops at the window's end anyway.
        reply = min(reply, limit // 2)
    return RequestSize(round(messages * scale), round(tool_tokens * scale), reply, limit)


def guarded_stream(
    session: Session, *, max_tokens: int | None, cancel: threading.Event | None,
    tools: list[dict[str, Any]] | None = None, listener: FitListener | None = None,
    settle: Callable[[], None] | None = None, must_call: list[dict[str, Any]] | None = None,
    note: str | None = None,
) -> Iterator[Any]:
    """``session.chat.stream`` of the transcript, guarded (see the module). Raises ChatError.

    ``must_call``: passed on to the client (``ChatClient.stream``). ``note``: text added
    to the request's last message when that is a tool result (not stored)."""
    listener = listener or FitListener()
    reply = max_tokens if max_tokens is not None else getattr(session.chat, "max_tokens", 0) or 0
    if note:
        reply += session.conv.counter.count_text(note)
    extra: dict[str, Any] = {"tools": tools} if tools else {}
    if must_call:
        extra["must_call"] = must_call
    make_room(session, tools, reply, listener, settle)
    retried = False
    while True:
        with session.lock:
            request = with_note(wire_view(session.conv.messages), note)
        sent = request_size(session, tools, reply)
        started = False
        try:
            with session.streaming():  # a pass planned meanwhile is published after the reply
                for event in session.chat.stream(request, max_tokens=max_tokens, cancel=cancel, **extra):
                    started = True
                    yield event
            return
        except ChatError as exc:
            if exc.kind != CONTEXT_EXCEEDED or started or retried or isinstance(exc, ContextTooLarge):
                raise
            if not session.compactor.settings.enabled:
                raise  # nothing could make it smaller: the server's own words say why
            retried = True
            log.warning("the server refused a request of %s tokens as too large: compacting and retrying once",
                        sent.needed)
            learn(session, exc, sent)
            try:
                make_room(session, tools, reply, listener, settle, force=True)
            except ContextTooLarge as too_large:  # the real cause first: the server's own words
                raise ContextTooLarge(f"The server refused the request: {exc}\n{too_large}", too_large.size) from exc


def with_note(request: list[dict[str, Any]], note: str | None) -> list[dict[str, Any]]:
    """``request`` with ``note`` after its last message's text when that message is a tool
    result (a new list and message: the transcript's own are not touched)."""
    if not note or not request or request[-1].get("role") != "tool" or not isinstance(request[-1].get("content"), str):
        return request
    return [*request[:-1], {**request[-1], "content": request[-1]["content"] + note}]


def learn(session: Session, exc: ChatError, sent: RequestSize) -> None:
    """Take the server's figures: its window, and how much more its count is than ours."""
    overflow = exc.overflow
    if overflow is None:
        return
    window = session.compactor.ctx.window
    if overflow.context_limit and (window.limit is None or overflow.context_limit < window.limit):
        window.limit = overflow.context_limit
        session.context_source = "server refusal"
    if overflow.prompt_tokens and sent.prompt:
        # The server counts the prompt alone or with the reply; either way it is at least this much.
        ours = sent.prompt / session.fit.count_scale
        session.fit.count_scale = max(session.fit.count_scale, min(4.0, overflow.prompt_tokens / max(1.0, ours)))


def make_room(
    session: Session, tools: list[dict[str, Any]] | None, reply: int, listener: FitListener,
    settle: Callable[[], None] | None, *, force: bool = False,
) -> None:
    """Compact until the request fits (``force``: at least once); ContextTooLarge if it cannot."""
    size = request_size(session, tools, reply)
    if size.limit is None and session.wait_for_window(RESOLVE_WAIT_S):
        size = request_size(session, tools, reply)
    if size.fits and not force:
        return
    if settle is not None:  # passes already planned may be enough
        settle()
        size = request_size(session, tools, reply)
        if size.fits and not force:
            return
    model = getattr(session.chat, "model_name", "") or "the chat model"
    if not session.compactor.settings.enabled:
        raise ContextTooLarge(
            f"Nothing was sent: {size.describe(model)}, and compaction is off (compression.enabled). "
            "Turn it on, start a new session, or choose a model with a larger window.", size)
    listener.compacting(size)
    # The trim stage first: no model, so no wait; batch only when it is not enough.
    report: PassReport | None = session.trim_now()
    size = request_size(session, tools, reply)
    if size.fits and report is not None and report.outcome == TRIMMED:
        listener.compacted(report, size)
        return
    for _ in range(MAX_COMPACTIONS):
        try:
            report = session.publish_pass(session.plan_compress())
        except Exception:  # a bug: logged; the transcript is as it was
            log.exception("compaction before a request failed")
            report = None
        size = request_size(session, tools, reply)
        if report is None or report.outcome != STALE:
            break
    listener.compacted(report, size)
    if size.fits:
        return
    raise ContextTooLarge(
        f"Nothing was sent: even after compaction ({_what_it_did(report)}), {size.describe(model)}. What is left is "
        "the system prompt, the tool definitions, your latest messages (kept verbatim) and the recent tail. To go on: start a new "
        "session, choose a model with a larger window, or lower model.max_tokens (the reply budget).", size)


def _what_it_did(report: PassReport | None) -> str:
    if report is None:
        return "it failed; the log says why"
    fields = report.fields
    if report.outcome == "compressed":
        return f"{fields.get('tokens_before', 0):,} → {fields.get('tokens_after', 0):,} tokens"
    if report.outcome == "nothing_to_absorb":
        return "nothing more could be compacted"
    return f"{report.outcome}: {report.detail}" if report.detail else report.outcome
