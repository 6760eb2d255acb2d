"""A conversation: the turn loop, compaction after each turn, and the store behind both.

The UI drives it from worker threads: ``reply`` streams a reply (chat thread),
``plan_pass`` plans the passes the policy asked for on a snapshot (pass thread) and
``publish_pass`` applies them, once no reply is streaming: a splice lands while the
chat is idle, so the chat model's next request sees it whole. Every change to the transcript and every store write happens under one lock,
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
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from hermes_tui.chat.client import CANCELLED, ChatClient, ChatDelta, ChatDone, ChatError, Usage
from hermes_tui.compaction.batch import plan_batch
from hermes_tui.compaction.engine import Compactor, PassReport
from hermes_tui.compaction.policy import Decision
from hermes_tui.compaction.state import PassResult
from hermes_tui.compaction.trim import TrimResult
from hermes_tui.config import Config
from hermes_tui.core.conversation import Conversation, Replacement
from hermes_tui.core.tokens import count_message
from hermes_tui.core.transcript import MICRO, SYSTEM_PROMPT, Message, wire_view
from hermes_tui.providers.context_limit import ContextLimit
from hermes_tui.providers.context_resolution import ContextLimitResolver
from hermes_tui.session import chat_telemetry
from hermes_tui.session.fit import FitListener, FitState, guarded_stream
from hermes_tui.session.speeds import KeptSpeed
from hermes_tui.store import SessionInfo, Store, StoreError
from hermes_tui.store.counters import save_counters
from hermes_tui.util.logs import get_logger

log = get_logger("session")

# One tool result holds at most this share of the compaction threshold (and never less
# than MIN_RESULT_TOKENS): ``Session.result_token_cap``.
RESULT_TOKEN_SHARE = 0.25
MIN_RESULT_TOKENS = 1_000


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
        compactor: Compactor, conv: Conversation, kept_speed: KeptSpeed | None = None,
    ):
        self.config = config
        self.store = store
        self.info = info
        self.chat = chat
        self.compactor = compactor
        self.conv = conv
        self.kept_speed = kept_speed  # None: the summarizer has no measured speeds to keep
        self.lock = threading.RLock()
        self.turns_completed = 0
        self.user_turns = 0  # user messages added by this process: numbers chat requests by turn
        # Context tokens of each chat request (the newest ones), for the occupancy chart.
        self.requests: deque[int] = deque(maxlen=REQUESTS_KEPT)
        self.tool_less_noticed = False  # the "runs without tools" notice is given once
        self.last_pass: PassReport | None = None
        # Hears a trim published ahead of the passes planned after it (``_trim_now``), from
        # the planning thread: the transcript changed while the passes still run.
        self.on_trim_landed: Callable[[PassReport], None] | None = None
        self.context_source: str | None = None
        self._resolver: ContextLimitResolver | None = None
        self.fit = FitState()
        state = compactor.state
        self._stored_counters = (state.passes_total, state.tokens_saved_total)
        self._in_flight = 0
        self.due: Decision | None = None  # the policy's decision for the last completed exchange
        self._micro_due: Decision | None = None  # the last one that asked for micro passes
        self._streaming = 0  # replies being streamed: passes wait for them to end
        self._idle = threading.Condition(self.lock)
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

    def wait_for_window(self, timeout: float) -> bool:
        """Wait up to ``timeout`` s for a window being resolved; whether it is known now."""
        if self._resolver is not None and self.compactor.ctx.window.limit is None:
            limit = self._resolver.wait(timeout)
            if limit is not None and self.compactor.ctx.window.limit is None:
                self._set_limit(limit)  # its callback may still be on its way
        return self.compactor.ctx.window.limit is not None

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

    def refresh_system_prompt(self, text: str) -> Message | None:
        """Make ``text`` the session's system prompt, first in the transcript; the new prompt's
        message, or None when the stored one already says it.

        Called where a turn begins (``AgentTurn.run``), never mid-turn: a change would break
        the chat model's prompt cache. A stored prompt that differs (the date, the approval
        mode, an AGENTS.md changed) is archived and the new one takes its place; a transcript
        without one (an older session, an import, perhaps beginning with its own system
        message) gets it in front. Stored first: if the store refuses, nothing changes."""
        with self.lock:
            messages = self.conv.messages
            current = messages[0] if messages and messages[0].is_system_prompt else None
            if current is not None and current.content == text:
                return None
            prompt = Message(role="system", content=text, meta={SYSTEM_PROMPT: True})
            count_message(self.conv.counter, prompt)  # stored with its count, as every other row
            self.store.set_system_prompt(self.info.id, prompt, replacing=current)
            if current is None:
                self.conv.prepend(prompt)
            else:
                self.conv.apply(Replacement(((0, current.id),), (prompt,), (current,)))
            return prompt

    def system_prompt_tokens(self) -> int:
        """The tokens of the session's system prompt in the transcript (0 without one)."""
        with self.lock:
            messages = self.conv.messages
            if not messages or not messages[0].is_system_prompt:
                return 0
            return count_message(self.conv.counter, messages[0])

    def reply(
        self, *, on_delta: Callable[[str], None] | None = None, cancel: threading.Event | None = None,
        max_tokens: int | None = None, listener: FitListener | None = None,
    ) -> TurnResult:
        """Stream the reply (``max_tokens`` None: the chat client's cap, ``model.max_tokens``)
        and keep it in the transcript and the store.

        Stopped (``cancel`` set mid-reply): the text that arrived is kept all the same, with
        meta ``{"stopped": true}``, and the turn does not count as completed: the spec runs a
        pass only after a turn that finishes normally. Stopped before any text (or only
        whitespace): nothing is kept and the CANCELLED ChatError is raised, like every
        other failure.

        The request is guarded (``session.fit``): one that would not fit the window is
        compacted first (``listener`` hears it) and never sent too large.
        """
        done: ChatDone | None = None
        parts: list[str] = []
        stopped = False
        try:
            for event in self.model_call(max_tokens=max_tokens, cancel=cancel, listener=listener):
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
        self.record_request(self.context_tokens(), done)
        meta: dict[str, Any] = {"usage": usage_meta(done)}
        if stopped:
            meta["stopped"] = True
        reply = Message(role="assistant", content=done.text, meta=meta)
        with self.lock:
            self.conv.append(reply)
            self.store.flush(self.info.id, [reply])
            if not stopped:
                self.turns_completed += 1
                self.exchange_completed(turn_ended=True)
        return TurnResult(reply, done, stopped)

    def context_tokens(self) -> int:
        """The transcript's size now: what the request just sent held (the guard compacts before
        sending; nothing is published while a reply streams)."""
        with self.lock:
            return self.conv.total_tokens

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

    def model_call(
        self, *, max_tokens: int | None, cancel: threading.Event | None, tools: list[dict[str, Any]] | None = None,
        listener: FitListener | None = None, settle: Callable[[], None] | None = None,
        must_call: list[dict[str, Any]] | None = None, note: str | None = None,
    ) -> Iterator[Any]:
        """The one way to the model: the transcript, guarded (``session.fit.guarded_stream``)."""
        return guarded_stream(self, max_tokens=max_tokens, cancel=cancel, tools=tools, listener=listener,
                              settle=settle, must_call=must_call, note=note)

    @contextmanager
    def streaming(self) -> Iterator[None]:
        """A chat request is in flight: ``publish_pass`` waits until it is over."""
        with self.lock:
            self._streaming += 1
        try:
            yield
        finally:
            with self._idle:
                self._streaming -= 1
                self._idle.notify_all()

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
    def exchange_completed(self, *, turn_ended: bool = True) -> Decision:
        """Count a completed exchange with the compaction policy (the one rule and its
        counter, ``Compactor.decide``); ``due_compaction`` then says what it decided."""
        with self.lock:
            self.due = self.compactor.decide(self.conv, turn_ended=turn_ended)
            if self.due.kind == MICRO:
                self._micro_due = self.due
            return self.due

    def due_compaction(self) -> str | None:
        """What the last completed exchange made due: MICRO, BATCH or None."""
        return self.due.kind if self.due is not None else None

    def after_splice(self, kind: str) -> str | None:
        """What follows a pass of ``kind`` that has just ended (the policy's rule, on the
        transcript now): BATCH or None. A plain read, as ``over_threshold``."""
        return self.compactor.policy.after_splice(kind, self.conv.total_tokens)

    def plan_pass(self) -> list[PassResult]:
        """Plan the micro passes of the last decision that asked for them, on a snapshot
        (worker thread; calls the summarizer). Empty when the transcript is already under
        that decision's mark (a request made while its passes were in flight)."""
        with self.lock:
            snapshot = list(self.conv.messages)
            epoch = self.conv.epoch
            decision = self._micro_due or Decision(self.compactor.policy.exchanges, MICRO)
        return self.compactor.plan_micro_passes(snapshot, decision, epoch=epoch, publish_trim=self._trim_now)

    def _trim_now(self, trim: TrimResult) -> bool:
        """Publish a planned trim at once, ahead of the passes planned after it, when the
        transcript is over the threshold and no reply streams; whether it did.

        Over the threshold the next request waits for the passes (the agent loop catches up,
        the guard compacts), and a small model on a CPU takes minutes over them: the trim
        takes no model, so it lands now and the session may go on. Under the threshold it
        lands with the passes: one publish, one break of the chat model's prompt cache."""
        with self._idle:
            if self._streaming or not self.over_threshold():
                return False
            (report,) = self.compactor.publish_all(self.conv, [trim], self._persist)
            self.last_pass = report
        landed = report.outcome == trim.outcome
        if landed and self.on_trim_landed is not None:
            self.on_trim_landed(report)
        return landed

    def publish_pass(self, planned: PassResult | list[PassResult]) -> PassReport | None:
        """Publish planned passes together, once no reply is streaming; the last one's report
        (the last published before, when nothing was planned)."""
        results = planned if isinstance(planned, list) else [planned]
        with self._idle:
            while self._streaming:
                self._idle.wait(timeout=1.0)
            reports = self.compactor.publish_all(self.conv, results, self._persist)
            if reports:
                self.last_pass = reports[-1]
            self._keep_counters()
            landed = [r for r, report in zip(results, reports, strict=False) if report.outcome == r.outcome]
            spliced = any(r.splice is not None for r in landed)
            request = wire_view(self.conv.messages) if spliced and self._rewarms() else None
            last = self.last_pass
        self._keep_speed()
        if request is not None:
            self.chat.warm(request)
        return last

    def _rewarms(self) -> bool:
        """Whether a splice is followed by re-warming the chat model's prompt cache."""
        kind = getattr(self.chat, "warm_kind", None)
        c = self.config.compression
        return (kind == "local" and c.rewarm) or (kind == "server" and c.rewarm_server)

    def finalize_turn(self) -> list[PassReport]:
        """Synchronously: what the policy decides for the exchange just completed, then batch
        if over the threshold."""
        with self.lock:
            reports = self.compactor.finalize_turn(self.conv, self._persist)
            if reports:
                self.last_pass = reports[-1]
                self._keep_counters()
        if reports:
            self._keep_speed()
        return reports

    def _keep_counters(self) -> None:
        """Store the counters when a pass moved them (a failed pass leaves no marker to carry them)."""
        state = self.compactor.state
        counters = (state.passes_total, state.tokens_saved_total)
        if counters == self._stored_counters:
            return
        try:
            save_counters(self.store, self.info.id, *counters)
            self._stored_counters = counters
        except StoreError as exc:  # the marker still carries what it carried
            log.warning("cannot store the compaction counters of session %s: %s", self.info.id, exc)

    def _keep_speed(self) -> None:
        """Store the compression model's speeds when the passes just published measured them.

        Outside the session's lock: the speeds are the model's, not the transcript's, and
        the store's own lock orders this write with the session's others."""
        if self.kept_speed is None:
            return
        try:
            self.kept_speed.save_if_new()
        except StoreError as exc:  # the next session starts from older figures, nothing else
            log.warning("cannot store the speeds of compression model %s: %s", self.kept_speed.key, exc)

    def plan_compress(self, focus: str | None = None, *, trim: bool = False) -> PassResult | list[PassResult]:
        """Plan batch compaction on a snapshot (worker thread); publish it with ``publish_pass``.

        ``trim``: the trim stage first (the batch the policy asked for; not ``/compact``),
        and no batch when the trimmed transcript is under the threshold. Over the threshold
        the trim lands at once (``_trim_now``): it is then not among the results.
        The summarizer runs outside the lock, so turns go on meanwhile.
        """
        with self.lock:
            snapshot = list(self.conv.messages)
            epoch = self.conv.epoch
        trimmed = self.compactor.plan_trim(snapshot, epoch=epoch) if trim else None
        if trimmed is None:
            return plan_batch(snapshot, self.compactor.state, self.compactor.ctx, focus)
        first: list[PassResult] = [] if self._trim_now(trimmed) else [trimmed]
        work = Conversation(snapshot, counter=self.conv.counter)
        assert trimmed.replacement is not None  # a trim plan always carries one (compaction.trim)
        work.apply(trimmed.replacement)
        if work.total_tokens <= self.compactor.ctx.window.threshold_tokens:
            return first
        return [*first, plan_batch(list(work.messages), self.compactor.state, self.compactor.ctx, focus)]

    def trim_now(self) -> PassReport | None:
        """The trim stage now, published once no reply is streaming (the fit guard's first step);
        None when there was nothing to trim."""
        with self._idle:
            while self._streaming:
                self._idle.wait(timeout=1.0)
            reports = self.compactor.trim(self.conv, self._persist)
            if reports:
                self.last_pass = reports[-1]
        return reports[-1] if reports else None

    @property
    def result_token_cap(self) -> int:
        """The most tokens of the chat model one tool result may hold: a share of the
        compaction threshold. The byte cap (``agent.max_output_bytes``) bounds what a tool
        keeps; text that tokenizes densely (``yes``: 32 KB were ~38K tokens) or a small
        window needs this bound too, or one result fills the window."""
        return max(MIN_RESULT_TOKENS, int(self.compactor.ctx.window.threshold_tokens * RESULT_TOKEN_SHARE))

    def over_threshold(self) -> bool:
        return self.conv.total_tokens > self.compactor.ctx.window.threshold_tokens

    def _persist(self, result: PassResult) -> None:
        self.store.archive_and_compact(self.info.id, result)

    # --- figures for the status bar and /usage -------------------------------------------
    def usage(self) -> dict[str, Any]:
        window = self.compactor.ctx.window
        state = self.compactor.state
        return {
            "tokens": self.conv.total_tokens,
            "system_prompt_tokens": self.system_prompt_tokens(),
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
            "compression_speed": self._compression_speed(),
        }

    def _compression_speed(self) -> dict[str, Any] | None:
        """The speeds defrag and batch are sized by (tokens/s); None for a summarizer with no
        model, which takes any piece whole. ``measured``: here or by an earlier session."""
        speed = self.compactor.ctx.speed
        if speed.fixed:
            return None
        return {"prompt_tps": speed.prompt_tps, "generation_tps": speed.generation_tps, "measured": speed.measured}


def usage_meta(done: ChatDone) -> dict[str, Any]:
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
