"""The chat screen's agent turns: one at a time, each written into the rows as it goes.

A turn (``session.agent.AgentTurn``: model → tool calls → results → model …) runs in a
thread worker of the screen; what it does reaches the screen as messages (``agent_bridge``)
and the screen hands them to its ``TurnController``: text piece by piece, each call as it
streams, runs and finishes (a row under the reply, collapsed to one line), each result as a
row of its own. A call the approval mode does not allow outright opens the approval prompt
(``approval``); only the turn's thread waits for the answer. ``stop`` (Escape) stops the
model and any running tool; every call still gets a result. A message sent while a turn
runs waits for it.
"""

from __future__ import annotations

import threading
from collections import deque
from collections.abc import Callable
from dataclasses import replace
from functools import partial
from typing import TYPE_CHECKING

from textual.widgets import Static

from hermes_tui.chat.client import ChatError
from hermes_tui.session.agent import MAX_STEPS, STOPPED, AgentTurn
from hermes_tui.session.session import Session
from hermes_tui.store import StoreError
from hermes_tui.tui.problems import first_run_problem
from hermes_tui.tui.screens.agent_bridge import (
    CallDelta,
    CallFinished,
    CallStarted,
    ModalAsk,
    ReplyDelta,
    ScreenListener,
    ScreenPasses,
    StepReplied,
    StepStarted,
    SystemPromptSet,
    TurnEnded,
    TurnFailed,
    UserStored,
)
from hermes_tui.tui.screens.approval import ApprovalScreen
from hermes_tui.tui.widgets.message_views import (
    AssistantMessage,
    ToolCallView,
    ToolResultMessage,
    UserMessage,
)
from hermes_tui.tui.widgets.text import first_line, one_line
from hermes_tui.util.logs import get_logger

if TYPE_CHECKING:
    from hermes_tui.session.agent import Tools
    from hermes_tui.tui.screens.chat_view import ChatView

log = get_logger("tui")


class TurnController:
    """Runs the chat's agent turns, one at a time, and writes what each reports into the rows."""

    def __init__(self, session: Session, view: ChatView, *, passes_idle: Callable[[], bool]) -> None:
        self.session = session
        self._view = view
        self._passes_idle = passes_idle  # the turn waits on it when the next request would not fit
        self.tools: Tools | None = None  # what the turns offer (None: the chat runs without tools)
        self.tools_available: bool | None = None  # whether the chat model takes tools (None: not known yet)
        self.replying = False
        self.got_text = False  # the current step's reply has text (till then the status bar may say waiting)
        self.step: int | None = None  # the turn's model call, while one runs
        self.reply_view: AssistantMessage | None = None  # the current step's reply
        self.running_call: ToolCallView | None = None  # its spinner turns with the status bar's
        self._cancel: threading.Event | None = None  # set to stop the turn running
        self._outbox: deque[tuple[str, UserMessage]] = deque()  # sent while a turn ran: waiting for it
        self._user_view: UserMessage | None = None

    @property
    def busy(self) -> bool:
        """A turn runs, or a message waits for one."""
        return bool(self.replying or self._outbox)

    def stop(self) -> None:
        """Stop the turn running, if one is (Escape, or the screen going away)."""
        if self._cancel is not None:
            self._cancel.set()

    async def send(self, text: str) -> None:
        """Show the message and send it (after the turn running, if there is one)."""
        view = self._view
        # One frame, one layout pass, for the message, the reply's view and the footer's Escape.
        with view.app.batch_update():
            user_view = UserMessage(text)
            await view.messages.add(user_view)
            if self.replying:
                user_view.add_class("-queued")
                self._outbox.append((text, user_view))
                view.refresh_status()
                return
            await self._start(text, user_view)

    async def _start(self, text: str, user_view: UserMessage) -> None:
        view = self._view
        user_view.remove_class("-queued")
        self._user_view = user_view
        self.reply_view = AssistantMessage(None)
        await view.messages.add(self.reply_view)
        self.replying = True
        self.got_text = False
        self.step = None
        self._cancel = cancel = threading.Event()
        view.refresh_status()
        view.refresh_bindings()  # Escape stops the turn: shown in the footer while there is one
        self.session.begin_work()  # the session keeps its lease until the turn is stored
        host = view.host
        if self.tools is not None:  # the same tools, unless the MCP servers started (or changed) since
            self.tools = host.tools_for(self.session)
        turn = AgentTurn(
            self.session, self.tools, ask=ModalAsk(view.app, cancel, ApprovalScreen),
            listener=ScreenListener(view.post_message), max_steps=host.config.agent.max_steps,
            max_tokens=host.reply_tokens,
            passes=ScreenPasses(view.post_message, self._passes_idle, cancel),
        )
        view.run_worker(partial(self._run, turn, text, cancel), name="turn", group="chat", thread=True,
                        exit_on_error=False)

    def _run(self, turn: AgentTurn, text: str, cancel: threading.Event) -> None:
        """(the turn's thread) Store the message, run the turn, report how it ended."""
        session, post = turn.session, self._view.post_message
        try:
            message = session.add_user_message(text)
            post(UserStored(message))
            if not session.info.title:
                _name_after(session, text)
            result = turn.run(cancel)
        except (ChatError, StoreError) as exc:
            log.warning("turn failed: %s: %s", type(exc).__name__, exc)
            post(TurnFailed(exc))
        except Exception as exc:  # a bug: logged with its traceback, never shown as one
            log.exception("turn failed")
            post(TurnFailed(exc))
        else:
            post(TurnEnded(result, tools_available=_takes_tools(session)))
        finally:
            session.end_work()

    # --- what the turn reports ----------------------------------------------------------------
    def user_stored(self, event: UserStored) -> None:
        if self._user_view is not None:
            self._user_view.message = event.message
        self._view.refresh_status()

    async def system_prompt_set(self, event: SystemPromptSet) -> None:
        with self.session.lock:
            messages = list(self.session.conv.messages)
        await self._view.messages.sync(messages)  # in front, in place of the one it replaced
        self._view.refresh_status()

    async def step_started(self, event: StepStarted) -> None:
        self.step = event.step
        if event.step > 1 or self.reply_view is None:  # the first step's view is there already
            self.reply_view = AssistantMessage(None)
            self.got_text = False
            await self._view.messages.add(self.reply_view)
        self._view.refresh_status()

    async def reply_delta(self, event: ReplyDelta) -> None:
        if not self.got_text:
            self.got_text = True
            self._view.refresh_status()
        text = event.take()
        if self.reply_view is not None and text:
            await self.reply_view.write(text)

    async def call_delta(self, event: CallDelta) -> None:
        if self.reply_view is not None:
            await self.reply_view.stream_call(event.index, event.name, event.arguments)

    async def step_replied(self, event: StepReplied) -> None:
        if self.reply_view is not None:
            await self.reply_view.finish(event.message)  # a stopped reply shows its "stopped" note

    def call_started(self, event: CallStarted) -> None:
        view = self.reply_view.call_view(event.call_id) if self.reply_view is not None else None
        if view is not None:
            view.start()
        self.running_call = view

    async def call_finished(self, event: CallFinished) -> None:
        view = self.reply_view.call_view(event.call_id) if self.reply_view is not None else None
        if view is not None:
            view.finish(event.result)
        self.running_call = None
        await self._view.messages.add(ToolResultMessage(event.message))

    async def ended(self, event: TurnEnded) -> None:
        result, view = event.result, self.reply_view
        if view is not None and view.message is None:  # the last step was stopped before any text
            await view.finish(None)
            view.mount(Static("(stopped before the reply began)", classes="note"))
        if result.outcome == MAX_STEPS:
            await self._view.note(f"The turn reached its step limit ({result.steps} model calls, agent.max_steps) "
                                  "without a final answer. Send a message to let it go on.", severity="warning")
        self.tools_available = event.tools_available
        await self._tell_no_tools()
        if result.outcome == STOPPED:
            log.info("turn stopped after %d steps and %d calls", result.steps, result.calls)
        await self._over()

    async def failed(self, event: TurnFailed) -> None:
        view = self.reply_view
        if view is not None and view.message is None:
            await view.finish(None)
            await view.remove()
        problem, fix = first_run_problem(event.error)
        await self._view.note(f"{problem}.\nTo fix it: {fix}", title="The reply failed", severity="error")
        await self._over()

    async def _tell_no_tools(self) -> None:
        """A chat model that cannot call tools runs without them: said once per model."""
        if self.tools is None or self.tools_available is not False:
            return
        model = getattr(self.session.chat, "model_name", "") or ""
        told = self._view.host.told_no_tools
        if model in told:
            return
        told.add(model)
        await self._view.note(f"{one_line(model, 60) or 'The chat model'} cannot call tools (its chat template "
                              "has none mlx-lm can parse, or its endpoint refused them): the chat runs without "
                              "reading, running or editing anything.", title="No tools", severity="warning")

    async def _over(self) -> None:
        self.replying = False
        self._cancel = None
        self.step = None
        self.running_call = None
        self._view.refresh_bindings()
        if self._outbox:
            text, user_view = self._outbox.popleft()
            await self._start(text, user_view)
        self._view.refresh_status()


def _name_after(session: Session, text: str) -> None:
    """A session without a title takes its first message's first line (for /sessions)."""
    title = one_line(first_line(text), 60)
    with session.lock:
        session.store.rename_session(session.info.id, title)
        session.info = replace(session.info, title=title)


def _takes_tools(session: Session) -> bool:
    """Whether the chat model takes tools (asked in the turn's thread: MLX may load the model)."""
    try:
        return bool(getattr(session.chat, "supports_tools", False))
    except ChatError:
        return False
