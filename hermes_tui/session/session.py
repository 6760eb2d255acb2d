"""A conversation: the turn loop, compaction after each turn, and the store behind both.

The UI drives it from worker threads: ``send`` streams a reply (chat thread),
``plan_pass`` runs a pass on a snapshot (pass thread) and ``publish_pass`` applies
it. Every change to the transcript and every store write happens under one lock,
so a reply that lands while a pass runs is simply appended, and the pass's splice
still applies (appends never invalidate it) or is dropped as stale, never half-applied.

The session's opener holds its lease in the store (one writer per session); ``close``
gives it up once the reply and the pass in flight (between ``begin_work`` and
``end_work``) have landed.
"""

from __future__ import annotations

import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass

from hermes_tui.chat.client import CANCELLED, ChatClient, ChatDelta, ChatDone, ChatError, Usage
from hermes_tui.compaction.batch import plan_batch
from hermes_tui.compaction.engine import Compactor, PassReport
from hermes_tui.compaction.micro import plan_micro_pass
from hermes_tui.compaction.state import PassResult
from hermes_tui.config import Config
from hermes_tui.conversation import Conversation
from hermes_tui.logs import get_logger
from hermes_tui.providers.context_limits import ContextLimit, ContextLimitResolver
from hermes_tui.session import chat_telemetry
from hermes_tui.store import SessionInfo, Store, StoreError
from hermes_tui.transcript import Message, wire_view

log = get_logger("session")


@dataclass
class TurnResult:
    reply: Message
    done: ChatDone
    stopped: bool = False  # the user stopped it: ``reply`` is the part that arrived


# Chat requests the occupancy chart of /usage draws (the newest; older ones are in the log).
REQUESTS_KEPT = 2_000

class Session:
    def __init__(
        self, *, config: Config, store: Store, info: SessionInfo, chat: ChatClient,
        compactor: Compactor, conv: Conversation,
    ):
        self.config = config
        self.store = store
        self.info = info
        self.chat = chat
        self.compactor = compactor
        self.conv = conv
        self.lock = threading.RLock()
        self.turns_completed = 0
        self.user_turns = 0  # user messages added by this process: numbers chat requests by turn
        # Context tokens of each chat request (the newest ones), for the occupancy chart.
        self.requests: deque[int] = deque(maxlen=REQUESTS_KEPT)
        self.last_pass: PassReport | None = None
        self.context_source: str | None = None
        self._resolver: ContextLimitResolver | None = None
        self._in_flight = 0
        self._pass_due = False
        self._closing: bool | None = False  # None once the lease is given up

    # --- the session's lease ----------------------------------------------------------------
    def begin_work(self) -> None:
        """A reply or a pass is about to run (call it before starting the thread): ``close`` waits
        for the matching ``end_work``."""
        with self.lock:
            self._in_flight += 1

    def end_work(self) -> None:
        with self.lock:
            self._in_flight -= 1
            self._release_if_done()

    def wait_idle(self, timeout: float) -> bool:
        """Wait (at most ``timeout`` s) until no reply or pass is in flight; whether none is.

        Before the store closes on quit: work stopped by then has stored what it keeps."""
        deadline = time.monotonic() + timeout
        while self._in_flight > 0:  # a plain read: the lock may be held by the worker we wait for
            if time.monotonic() >= deadline:
                return False
            time.sleep(0.02)
        return True

    def close(self) -> None:
        """Done with this session: give up its lease now, or when the work in flight ends (once)."""
        with self.lock:
            if self._closing is None:
                return
            self._closing = True
            self._release_if_done()

    def _release_if_done(self) -> None:
        if self._closing and self._in_flight == 0:
            self._closing = None  # released: a second close does nothing
            try:
                self.store.release_lease(self.info.id)
            except StoreError as exc:  # the lease lapses once this process exits
                log.warning("cannot release the lease of session %s: %s", self.info.id, exc)

    # --- the context window ---------------------------------------------------------------
    def resolve_context_window(self, on_resolved: Callable[[ContextLimit], None] | None = None) -> None:
        """Use a cached or configured window now; otherwise resolve it in the background.

        Until then the window's limit stays None and telemetry reports occupancy as null.
        """
        cached = ContextLimitResolver.cached(self.config.model)
        if cached is not None:
            self._set_limit(cached)
            if on_resolved:
                on_resolved(cached)
            return

        def resolved(limit: ContextLimit) -> None:
            self._set_limit(limit)
            if on_resolved:
                on_resolved(limit)

        self._resolver = ContextLimitResolver().start(self.config.model, resolved)

    def _set_limit(self, limit: ContextLimit) -> None:
        self.compactor.ctx.window.limit = limit.tokens
        self.context_source = limit.source

    # --- a turn ---------------------------------------------------------------------------
    def add_user_message(self, text: str) -> Message:
        message = Message(role="user", content=text)
        with self.lock:
            self.user_turns += 1
            self.conv.append(message)
            self.store.flush(self.info.id, [message])
        return message

    def reply(
        self, *, on_delta: Callable[[str], None] | None = None, cancel: threading.Event | None = None,
        max_tokens: int | None = None,
    ) -> TurnResult:
        """Stream the reply (``max_tokens`` None: the chat client's cap, ``model.max_tokens``)
        and keep it in the transcript and the store.

        Stopped (``cancel`` set mid-reply): the text that arrived is kept all the same, with
        meta ``{"stopped": true}``, and the turn does not count as completed: the spec runs a
        pass only after a turn that finishes normally. Stopped before any text (or only
        whitespace): nothing is kept and the CANCELLED ChatError is raised, like every
        other failure.
        """
        with self.lock:
            request = wire_view(self.conv.messages)
            context_tokens = self.conv.total_tokens
        done: ChatDone | None = None
        parts: list[str] = []
        stopped = False
        try:
            for event in self.chat.stream(request, max_tokens=max_tokens, cancel=cancel):
                if isinstance(event, ChatDelta):
                    parts.append(event.text)
                    if on_delta:
                        on_delta(event.text)
                else:
                    done = event
        except ChatError as exc:
            if exc.kind != CANCELLED or not "".join(parts).strip():
                raise
            # The provider reports no usage for a cancelled call: none is recorded (never a guess).
            done, stopped = ChatDone("".join(parts), Usage(prompt_tokens=None, completion_tokens=None)), True
        assert done is not None  # ChatClient.stream ends with exactly one ChatDone
        self.record_request(context_tokens, done)
        meta: dict = {"usage": usage_meta(done)}
        if stopped:
            meta["stopped"] = True
        reply = Message(role="assistant", content=done.text, meta=meta)
        with self.lock:
            self.conv.append(reply)
            self.store.flush(self.info.id, [reply])
            if not stopped:
                self.turns_completed += 1
                self.exchange_completed()
        return TurnResult(reply, done, stopped)

    def record_request(self, context_tokens: int, done: ChatDone) -> None:
        """One chat request done: its telemetry line (prompt, cached and prefilled tokens) and
        its size for the occupancy chart."""
        window = self.compactor.ctx.window
        with self.lock:
            self.requests.append(context_tokens)
            turn = self.user_turns
        chat_telemetry.log_chat(chat_telemetry.chat_fields(
            done, session_id=self.info.id, turn=turn, context_tokens=context_tokens,
            occupancy_pct=window.occupancy_pct(context_tokens),
            threshold_tokens=window.threshold_tokens if window.limit else None, context_limit=window.limit,
            main_model=self.config.model.model or None,
        ))

    def append(self, message: Message) -> None:
        """Keep one finished message: in the transcript and, at once, in the store."""
        with self.lock:
            self.conv.append(message)
            self.store.flush(self.info.id, [message])

    def answer_unanswered(self) -> list[Message]:
        """Give every call the transcript ends with that has no result an "interrupted" one.

        A crash mid-turn leaves the last assistant message's calls (some or all) without
        results, always at the end: the loop answers every call before anything else is
        added. Called on open, before anything is appended, so the transcript is valid for
        any API again. Returns the results added (stored)."""
        from hermes_tui.tools.base import ToolResult, tool_message

        with self.lock:
            messages = self.conv.messages
            end = len(messages)
            while end and messages[end - 1].role == "tool":
                end -= 1
            if not end or messages[end - 1].role != "assistant" or not messages[end - 1].tool_calls:
                return []
            answered = {m.tool_call_id for m in messages[end:]}
            added = []
            for call in messages[end - 1].tool_calls or []:
                if call.get("id") in answered:
                    continue
                name = (call.get("function") or {}).get("name") or ""
                added.append(tool_message(call.get("id", ""), name, ToolResult.interrupted()))
            for message in added:
                self.conv.append(message)
            self.store.flush(self.info.id, added)
            return added

    # --- compaction -----------------------------------------------------------------------
    def exchange_completed(self) -> bool:
        """Count a completed exchange with the compactor (the one rule and its counter,
        ``Compactor.count_completed``); ``pass_due`` then says what it decided."""
        with self.lock:
            self._pass_due = self.compactor.count_completed()
            return self._pass_due

    def pass_due(self) -> bool:
        """Whether the last completed exchange made a micro pass due."""
        return self._pass_due

    def plan_pass(self) -> PassResult:
        """Plan a micro pass on a snapshot (worker thread; calls the summarizer)."""
        with self.lock:
            snapshot = list(self.conv.messages)
            total, epoch = self.conv.total_tokens, self.conv.epoch
        result = plan_micro_pass(snapshot, self.compactor.state, self.compactor.ctx, total_tokens=total)
        result.epoch = epoch
        return result

    def publish_pass(self, result: PassResult) -> PassReport:
        with self.lock:
            report = self.compactor.publish(self.conv, result, self._persist)
            self.last_pass = report
            return report

    def finalize_turn(self) -> list[PassReport]:
        """Synchronously: a micro pass (when due) and batch if over the threshold."""
        with self.lock:
            reports = self.compactor.finalize_turn(self.conv, self._persist)
            if reports:
                self.last_pass = reports[-1]
            return reports

    def plan_compress(self, focus: str | None = None) -> PassResult:
        """Plan batch compaction on a snapshot (worker thread); publish it with ``publish_pass``.

        The summarizer runs outside the lock, so turns go on meanwhile.
        """
        with self.lock:
            snapshot = list(self.conv.messages)
        return plan_batch(snapshot, self.compactor.state, self.compactor.ctx, focus)

    def over_threshold(self) -> bool:
        return self.conv.total_tokens > self.compactor.ctx.window.threshold_tokens

    def _persist(self, result: PassResult) -> None:
        self.store.archive_and_compact(self.info.id, result)

    # --- figures for the status bar and /usage -------------------------------------------
    def usage(self) -> dict:
        window = self.compactor.ctx.window
        state = self.compactor.state
        return {
            "tokens": self.conv.total_tokens,
            "messages": len(self.conv),
            "context_limit": window.limit,
            "context_source": self.context_source,
            "threshold_tokens": window.threshold_tokens if window.limit else None,
            "occupancy_pct": window.occupancy_pct(self.conv.total_tokens),
            "passes": state.passes_total,
            "tokens_saved": state.tokens_saved_total,
            "summary_tokens": state.summary_tokens,
            "batch_compactions": self.compactor.batch_compactions,
            "last_pass": self.last_pass.outcome if self.last_pass else None,
            "requests": list(self.requests),
        }


def usage_meta(done: ChatDone) -> dict:
    usage = done.usage
    return {
        key: value
        for key, value in {
            "prompt_tokens": usage.prompt_tokens,
            "cached_tokens": usage.cached_tokens,
            "completion_tokens": usage.completion_tokens,
            "finish_reason": usage.finish_reason,
        }.items()
        if value is not None
    }
