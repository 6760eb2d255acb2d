"""The chat screen: an agent conversation that never stalls, with compaction you can see.

Threads. A turn (``session.agent.AgentTurn``: model → tool calls → results → model …)
runs in a Textual thread worker; what it does reaches the screen as messages
(``agent_bridge``): text piece by piece, each call as it streams, runs and finishes (a
row under the reply, collapsed to one line), each result as a row of its own. A call
the approval mode does not allow outright opens the approval prompt (``approval``); only
the turn's thread waits for the answer. Escape stops the model and any running tool;
every call still gets a result. Passes run after each completed exchange in another
thread worker (``chat_compaction``). The composer stays live throughout: a message
sent while a pass runs goes straight out; one sent while a turn runs waits for it.
"""

from __future__ import annotations

import threading
from collections import deque
from dataclasses import replace

from textual import events, on, work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.message import Message as UIMessage
from textual.screen import Screen
from textual.timer import Timer
from textual.widget import Widget
from textual.widgets import Static

from hermes_tui.chat.client import ChatError
from hermes_tui.core.transcript import Message
from hermes_tui.session.agent import MAX_STEPS, STOPPED, AgentTurn, Tools
from hermes_tui.session.session import Session
from hermes_tui.store import StoreError
from hermes_tui.tui.heap import settle_heap
from hermes_tui.tui.problems import first_run_problem
from hermes_tui.tui.screens.agent_bridge import (
    CallDelta,
    CallFinished,
    CallStarted,
    ModalAsk,
    PassRequested,
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
from hermes_tui.tui.screens.chat_commands import KEYS, SlashCommandsMixin
from hermes_tui.tui.screens.chat_compaction import BATCH, PASS, PassLanded, PassRunner, TrimLanded
from hermes_tui.tui.screens.chat_fit import GuardCompacted, GuardCompacting, GuardNotes
from hermes_tui.tui.screens.chat_host import ChatHost
from hermes_tui.tui.widgets.composer import Composer
from hermes_tui.tui.widgets.footer import ChatFooter
from hermes_tui.tui.widgets.message_views import (
    SPINNER,
    AssistantMessage,
    InfoNote,
    MarkerMessage,
    ToolCallView,
    ToolResultMessage,
    UserMessage,
)
from hermes_tui.tui.widgets.messages import MessageList
from hermes_tui.tui.widgets.status_bar import StatusBar, StatusInfo
from hermes_tui.tui.widgets.text import first_line, one_line
from hermes_tui.util.logs import get_logger

__all__ = ["BATCH", "KEYS", "PASS", "ChatHost", "ChatScreen"]

log = get_logger("tui")


class WindowResolved(UIMessage):
    pass


class ArchivedLoaded(UIMessage):
    def __init__(self, view: MarkerMessage, messages: list[Message], error: StoreError | None = None):
        super().__init__()
        self.view, self.messages, self.error = view, messages, error


# --- the screen -------------------------------------------------------------------------


class ChatScreen(SlashCommandsMixin, Screen):
    BINDINGS = [
        Binding("escape", "cancel_reply", "Stop"),
        Binding("ctrl+n", "slash('/new')", "New"),
        Binding("ctrl+r", "slash('/sessions')", "Sessions"),
        Binding("ctrl+o", "slash('/compact')", "Compact"),
        Binding("ctrl+g", "slash('/usage')", "Usage"),
        Binding("f1", "slash('/help')", "Help"),
        Binding("ctrl+t", "earlier", "Earlier"),  # in the footer only while older messages wait
    ]

    def __init__(self, session: Session):
        super().__init__()
        self.session = session
        self.replying = False
        self._cancel: threading.Event | None = None
        self._got_text = False
        self._outbox: deque[tuple[str, UserMessage]] = deque()
        self.passes = PassRunner(session, self)  # compaction in the background, one pass at a time
        self._spinner: Timer | None = None
        self.tools: Tools | None = None
        self.tools_available: bool | None = None  # whether the chat model takes tools (None: not known yet)
        self.step: int | None = None  # the turn's model call, while one runs
        self._user_view: UserMessage | None = None
        self._reply_view: AssistantMessage | None = None  # the current step's reply
        self._running_call: ToolCallView | None = None
        # The guard before each model request: its compaction in the status bar, its notes.
        self.guard = GuardNotes(session, self, reply_view=lambda: self._reply_view, record=self.passes.record)

    @property
    def hermes(self) -> ChatHost:
        return self.app  # type: ignore[return-value]

    @property
    def busy(self) -> bool:
        """A turn or a pass is in flight, or one is queued."""
        return bool(self.replying or self._outbox or self.passes.busy)

    def compose(self) -> ComposeResult:
        yield MessageList(id="messages")
        yield Static(id="hints", markup=False)
        # Up recalls what was typed in this session before, a resumed one included.
        yield Composer(id="composer", inputs=[m.content for m in self.session.conv.messages if m.role == "user"])
        yield StatusBar(id="status")
        yield ChatFooter()

    async def on_mount(self) -> None:
        self.query_one("#hints").display = False
        self.tools = self.hermes.tools_for(self.session)
        with self.session.lock:
            messages = list(self.session.conv.messages)
        await self.messages.show(messages)
        self._spinner = self.set_interval(0.1, self._tick, pause=True)
        # Cached or configured: answers at once; else resolved in the background.
        self.session.resolve_context_window(lambda limit: self.post_message(WindowResolved()) and None)
        self.refresh_status()
        self.query_one(Composer).focus()
        # Startup's objects are there for good: out of the collector's way once it is shown.
        self.call_after_refresh(settle_heap)

    def on_mouse_up(self, event: events.MouseUp) -> None:
        # A click on a row of the conversation (a tool call, a marker) focuses it; the keyboard
        # goes back to the composer so typing after the click is not lost. Reached with Tab,
        # a row keeps the focus and its keys.
        focused = self.focused
        if focused is not None and self.messages in focused.ancestors:
            self.query_one(Composer).focus()

    def on_unmount(self) -> None:
        if self._cancel is not None:
            self._cancel.set()  # a turn still running for this screen is not wanted any more

    @property
    def messages(self) -> MessageList:
        return self.query_one(MessageList)

    # --- status -------------------------------------------------------------------------
    def status_info(self) -> StatusInfo:
        usage = self.session.usage()
        runtime = getattr(self.session.chat, "runtime", None)
        waiting = bool(
            self.replying and not self._got_text and self.passes.running
            and runtime is not None and getattr(runtime, "waiting", 0) > 0
        )
        if self.tools is None:
            mode = ""
        else:
            mode = "tools off" if self.tools_available is False else self.tools.mode.value
        return StatusInfo(
            model=getattr(self.session.chat, "model_name", "") or "",
            tokens=usage["tokens"],
            window=usage["context_limit"],
            occupancy_pct=usage["occupancy_pct"],
            passes=usage["passes"],
            tokens_saved=usage["tokens_saved"],
            activity=self.passes.running or (BATCH if self.guard.compacting else ""),
            waiting=waiting,
            replying=self.replying,
            last_outcome=self.passes.last_outcome,
            mode=mode,
            step=self.step if self.replying else None,
            max_steps=self.hermes.config.agent.max_steps,
        )

    def refresh_status(self) -> None:
        bar = self.query_one(StatusBar)
        bar.show(self.status_info())
        if self._spinner is not None:
            if self.replying or self.passes.running or self.guard.compacting:
                self._spinner.resume()
            else:
                self._spinner.pause()

    def _tick(self) -> None:
        bar = self.query_one(StatusBar)
        bar.info = self.status_info()
        bar.tick()
        if self._running_call is not None:
            self._running_call.tick(SPINNER[bar.frame])

    @on(WindowResolved)
    def _window_resolved(self) -> None:
        self.refresh_status()

    # --- input --------------------------------------------------------------------------
    @on(Composer.Submitted)
    async def _submitted(self, event: Composer.Submitted) -> None:
        event.stop()
        if self.run_slash(event.text):
            return
        await self.send(event.text)

    @on(Composer.Completions)
    def _completions(self, event: Composer.Completions) -> None:
        hints = self.query_one("#hints", Static)
        if event.matches:
            hints.update("   ".join(f"{c.usage} — {c.help}" if len(event.matches) == 1 else c.usage
                                    for c in event.matches))
        hints.display = bool(event.matches)

    async def send(self, text: str) -> None:
        """Show the message and send it (after the turn running, if there is one)."""
        # One frame, one layout pass, for the message, the reply's view and the footer's Escape.
        with self.app.batch_update():
            view = UserMessage(text)
            await self.messages.add(view)
            if self.replying:
                view.add_class("-queued")
                self._outbox.append((text, view))
                self.refresh_status()
                return
            await self._start_turn(text, view)

    # --- the turn -----------------------------------------------------------------------
    async def _start_turn(self, text: str, user_view: UserMessage) -> None:
        user_view.remove_class("-queued")
        self._user_view = user_view
        self._reply_view = AssistantMessage(None)
        await self.messages.add(self._reply_view)
        self.replying = True
        self._got_text = False
        self.step = None
        self._cancel = cancel = threading.Event()
        self.refresh_status()
        self.refresh_bindings()  # Escape stops the turn: shown in the footer while there is one
        self.session.begin_work()  # the session keeps its lease until the turn is stored
        if self.tools is not None:  # the same tools, unless the MCP servers started (or changed) since
            self.tools = self.hermes.tools_for(self.session)
        turn = AgentTurn(
            self.session, self.tools, ask=ModalAsk(self.app, cancel, ApprovalScreen),
            listener=ScreenListener(self.post_message), max_steps=self.hermes.config.agent.max_steps,
            max_tokens=self.hermes.reply_tokens,
            passes=ScreenPasses(self.post_message, self.passes.idle, cancel),  # type: ignore[arg-type]
        )
        self._turn_worker(turn, text, cancel)

    @work(thread=True, group="chat", exit_on_error=False)
    def _turn_worker(self, turn: AgentTurn, text: str, cancel: threading.Event) -> None:
        session, post = turn.session, self.post_message
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

    @on(UserStored)
    def _user_stored(self, event: UserStored) -> None:
        if self._user_view is not None:
            self._user_view.message = event.message
        self.refresh_status()

    @on(SystemPromptSet)
    async def _system_prompt_set(self, event: SystemPromptSet) -> None:
        with self.session.lock:
            messages = list(self.session.conv.messages)
        await self.messages.sync(messages)  # in front, in place of the one it replaced
        self.refresh_status()

    @on(StepStarted)
    async def _step_started(self, event: StepStarted) -> None:
        self.step = event.step
        if event.step > 1 or self._reply_view is None:  # the first step's view is there already
            self._reply_view = AssistantMessage(None)
            self._got_text = False
            await self.messages.add(self._reply_view)
        self.refresh_status()

    @on(ReplyDelta)
    async def _reply_delta(self, event: ReplyDelta) -> None:
        if not self._got_text:
            self._got_text = True
            self.refresh_status()
        text = event.take()
        if self._reply_view is not None and text:
            await self._reply_view.write(text)

    @on(CallDelta)
    async def _call_delta(self, event: CallDelta) -> None:
        if self._reply_view is not None:
            await self._reply_view.stream_call(event.index, event.name, event.arguments)

    @on(StepReplied)
    async def _step_replied(self, event: StepReplied) -> None:
        if self._reply_view is not None:
            await self._reply_view.finish(event.message)  # a stopped reply shows its "stopped" note

    @on(CallStarted)
    def _call_started(self, event: CallStarted) -> None:
        view = self._reply_view.call_view(event.call_id) if self._reply_view is not None else None
        if view is not None:
            view.start()
        self._running_call = view

    @on(CallFinished)
    async def _call_finished(self, event: CallFinished) -> None:
        view = self._reply_view.call_view(event.call_id) if self._reply_view is not None else None
        if view is not None:
            view.finish(event.result)
        self._running_call = None
        await self.messages.add(ToolResultMessage(event.message))

    @on(TurnEnded)
    async def _turn_ended(self, event: TurnEnded) -> None:
        result, view = event.result, self._reply_view
        if view is not None and view.message is None:  # the last step was stopped before any text
            await view.finish(None)
            view.mount(Static("(stopped before the reply began)", classes="note"))
        if result.outcome == MAX_STEPS:
            await self.note(f"The turn reached its step limit ({result.steps} model calls, agent.max_steps) "
                            "without a final answer. Send a message to let it go on.", severity="warning")
        self.tools_available = event.tools_available
        await self._tell_no_tools()
        if result.outcome == STOPPED:
            log.info("turn stopped after %d steps and %d calls", result.steps, result.calls)
        await self._turn_over()

    @on(TurnFailed)
    async def _turn_failed(self, event: TurnFailed) -> None:
        view = self._reply_view
        if view is not None and view.message is None:
            await view.finish(None)
            await view.remove()
        problem, fix = first_run_problem(event.error)
        await self.note(f"{problem}.\nTo fix it: {fix}", title="The reply failed", severity="error")
        await self._turn_over()

    async def _tell_no_tools(self) -> None:
        """A chat model that cannot call tools runs without them: said once per model."""
        if self.tools is None or self.tools_available is not False:
            return
        model = getattr(self.session.chat, "model_name", "") or ""
        if model in self.hermes.told_no_tools:
            return
        self.hermes.told_no_tools.add(model)
        await self.note(f"{one_line(model, 60) or 'The chat model'} cannot call tools (its chat template has "
                        "none mlx-lm can parse, or its endpoint refused them): the chat runs without "
                        "reading, running or editing anything.", title="No tools", severity="warning")

    async def _turn_over(self) -> None:
        self.replying = False
        self._cancel = None
        self.step = None
        self._running_call = None
        self.refresh_bindings()
        if self._outbox:
            text, view = self._outbox.popleft()
            await self._start_turn(text, view)
        self.refresh_status()

    def action_cancel_reply(self) -> None:
        if self._cancel is not None:
            self._cancel.set()

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        if action == "cancel_reply":
            return self.replying
        if action == "earlier":
            lists = self.query(MessageList)
            return bool(lists) and lists.first().earlier_count > 0
        return True

    async def action_earlier(self) -> None:
        """Show the older messages waiting above the list's first view, from their top."""
        await self.messages.show_earlier(keep_position=False)

    # --- compaction ------------------------------------------------------------------------
    @on(PassRequested)
    def _pass_requested(self, event: PassRequested) -> None:
        self.passes.requested(event)

    @on(TrimLanded)
    async def _trim_landed(self, event: TrimLanded) -> None:
        await self.passes.trim_landed(event)

    @on(PassLanded)
    async def _pass_landed(self, event: PassLanded) -> None:
        await self.passes.landed(event)

    @on(GuardCompacting)
    async def _guard_compacting(self, event: GuardCompacting) -> None:
        await self.guard.began(event)

    @on(GuardCompacted)
    async def _guard_compacted(self, event: GuardCompacted) -> None:
        await self.guard.ended(event)

    # --- the archive behind a marker --------------------------------------------------------
    @on(MarkerMessage.ShowArchived)
    def _show_archived(self, event: MarkerMessage.ShowArchived) -> None:
        self._load_archived(self.session, event.view)

    @work(thread=True, group="archive", exit_on_error=False)
    def _load_archived(self, session: Session, view: MarkerMessage) -> None:
        try:
            with session.lock:
                rows = session.store.load_all(session.info.id)
        except StoreError as exc:
            log.warning("cannot load archived messages: %s", exc)
            self.post_message(ArchivedLoaded(view, [], exc))
            return
        marker_id = view.message_id
        archived: list[Message] = []
        for message, state in rows:
            if message.id == marker_id:
                break
            if state == "archived" and not message.is_marker:
                archived.append(message)
        self.post_message(ArchivedLoaded(view, archived))

    @on(ArchivedLoaded)
    async def _archived_loaded(self, event: ArchivedLoaded) -> None:
        if event.error is not None:
            problem, fix = first_run_problem(event.error)
            self.notify(f"{problem}\n{fix}", title="Archived messages", severity="error", timeout=10)
            event.view.query_one("#show-archived").disabled = False
            return
        await event.view.show_archived(event.messages)

    # --- notes ----------------------------------------------------------------------------
    async def note(self, text: str, *, title: str = "", severity: str = "information",
                   markdown: bool = False, before: Widget | None = None) -> InfoNote:
        """A note at the end, or ``before`` a view still shown (the reply it is about)."""
        view = InfoNote(text, title=title, severity=severity, markdown=markdown)
        if before is not None and before.parent is self.messages:
            await self.messages.mount(view, before=before)
        else:
            await self.messages.add(view)
        return view


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
