"""The chat screen: an agent conversation that never stalls, with compaction you can see.

The screen lays out the conversation, the composer and the status bar, and owns the parts
that do the work, each handed the messages that concern it:

- ``turns`` (``chat_turns.TurnController``): the agent turns, run in a thread worker, what they
  report written into the rows as it comes, their approval prompts, Escape stopping them;
- ``passes`` (``chat_compaction.PassRunner``): passes after each completed exchange, and
  ``/compact``, in another thread worker, one at a time;
- ``guard`` (``chat_fit.GuardNotes``): the compaction the guard runs before a request that
  would not fit, in the status bar and in notes;
- the slash commands (``chat_commands``), each handed the session, ``turns``, ``passes`` and
  the screen.

The composer stays live throughout: a message sent while a pass runs goes straight out; one
sent while a turn runs waits for it.
"""

from __future__ import annotations

from typing import cast

from textual import events, on, work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.message import Message as UIMessage
from textual.screen import Screen
from textual.timer import Timer
from textual.widget import Widget
from textual.widgets import Static

from hermes_tui.core.transcript import BATCH, Message
from hermes_tui.session.session import Session
from hermes_tui.store import StoreError
from hermes_tui.tui.heap import settle_heap
from hermes_tui.tui.problems import first_run_problem
from hermes_tui.tui.screens import chat_commands
from hermes_tui.tui.screens.agent_bridge import (
    CallDelta,
    CallFinished,
    CallStarted,
    PassRequested,
    ReplyDelta,
    StepReplied,
    StepStarted,
    SystemPromptSet,
    TurnEnded,
    TurnFailed,
    UserStored,
)
from hermes_tui.tui.screens.chat_compaction import PassLanded, PassRunner, TrimLanded
from hermes_tui.tui.screens.chat_fit import GuardCompacted, GuardCompacting, GuardNotes
from hermes_tui.tui.screens.chat_host import ChatHost
from hermes_tui.tui.screens.chat_turns import TurnController
from hermes_tui.tui.widgets.composer import Composer
from hermes_tui.tui.widgets.footer import ChatFooter
from hermes_tui.tui.widgets.message_views import SPINNER, InfoNote, MarkerMessage
from hermes_tui.tui.widgets.messages import MessageList
from hermes_tui.tui.widgets.status_bar import StatusBar, StatusInfo
from hermes_tui.util.logs import get_logger

log = get_logger("tui")


class WindowResolved(UIMessage):
    pass


class ArchivedLoaded(UIMessage):
    def __init__(self, view: MarkerMessage, messages: list[Message], error: StoreError | None = None):
        super().__init__()
        self.view, self.messages, self.error = view, messages, error


class ChatScreen(Screen[None]):
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
        self.passes = PassRunner(session, self)  # compaction in the background, one pass at a time
        self.turns = TurnController(session, self, passes_idle=self.passes.idle)
        # The guard before each model request: its compaction in the status bar, its notes.
        self.guard = GuardNotes(session, self, reply_view=lambda: self.turns.reply_view, record=self.passes.record)
        self._spinner: Timer | None = None

    @property
    def host(self) -> ChatHost:
        return cast(ChatHost, self.app)

    @property
    def busy(self) -> bool:
        """A turn or a pass is in flight, or one is queued."""
        return self.turns.busy or self.passes.busy

    def compose(self) -> ComposeResult:
        yield MessageList(id="messages")
        yield Static(id="hints", markup=False)
        # Up recalls what was typed in this session before, a resumed one included.
        yield Composer(id="composer", inputs=[m.content for m in self.session.conv.messages if m.role == "user"])
        yield StatusBar(id="status")
        yield ChatFooter()

    async def on_mount(self) -> None:
        self.query_one("#hints").display = False
        self.turns.tools = self.host.tools_for(self.session)
        with self.session.lock:
            messages = list(self.session.conv.messages)
        await self.messages.show(messages)
        self._spinner = self.set_interval(0.1, self._tick, pause=True)
        # Cached or configured: answers at once; else resolved in the background.
        def resolved(_limit: object) -> None:
            self.post_message(WindowResolved())

        self.session.resolve_context_window(resolved)
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
        self.turns.stop()  # a turn still running for this screen is not wanted any more

    @property
    def messages(self) -> MessageList:
        return self.query_one(MessageList)

    # --- status -------------------------------------------------------------------------
    def status_info(self) -> StatusInfo:
        usage = self.session.usage()
        runtime = getattr(self.session.chat, "runtime", None)
        turns = self.turns
        waiting = bool(
            turns.replying and not turns.got_text and self.passes.running
            and runtime is not None and getattr(runtime, "waiting", 0) > 0
        )
        if turns.tools is None:
            mode = ""
        else:
            mode = "tools off" if turns.tools_available is False else turns.tools.mode.value
        return StatusInfo(
            model=getattr(self.session.chat, "model_name", "") or "",
            tokens=usage["tokens"],
            window=usage["context_limit"],
            occupancy_pct=usage["occupancy_pct"],
            passes=usage["passes"],
            tokens_saved=usage["tokens_saved"],
            activity=self.passes.running or (BATCH if self.guard.compacting else ""),
            waiting=waiting,
            replying=turns.replying,
            last_outcome=self.passes.last_outcome,
            mode=mode,
            step=turns.step if turns.replying else None,
            max_steps=self.host.config.agent.max_steps,
        )

    def refresh_status(self) -> None:
        bar = self.query_one(StatusBar)
        bar.show(self.status_info())
        if self._spinner is not None:
            if self.turns.replying or self.passes.running or self.guard.compacting:
                self._spinner.resume()
            else:
                self._spinner.pause()

    def _tick(self) -> None:
        bar = self.query_one(StatusBar)
        bar.info = self.status_info()
        bar.tick()
        if self.turns.running_call is not None:
            self.turns.running_call.tick(SPINNER[bar.frame])

    @on(WindowResolved)
    def _window_resolved(self) -> None:
        self.refresh_status()

    # --- input --------------------------------------------------------------------------
    @on(Composer.Submitted)
    async def _submitted(self, event: Composer.Submitted) -> None:
        event.stop()
        if self.run_slash(event.text):
            return
        await self.turns.send(event.text)

    def run_slash(self, text: str) -> bool:
        """Run ``text`` if it is a slash command; False when it is a message to send."""
        return chat_commands.run(text, chat_commands.CommandContext(self.session, self, self.turns, self.passes))

    def action_slash(self, text: str) -> None:
        self.run_slash(text)

    @on(Composer.Completions)
    def _completions(self, event: Composer.Completions) -> None:
        hints = self.query_one("#hints", Static)
        if event.matches:
            hints.update("   ".join(f"{c.usage} — {c.help}" if len(event.matches) == 1 else c.usage
                                    for c in event.matches))
        hints.display = bool(event.matches)

    def action_cancel_reply(self) -> None:
        self.turns.stop()

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        if action == "cancel_reply":
            return self.turns.replying
        if action == "earlier":
            lists = self.query(MessageList)
            return bool(lists) and lists.first().earlier_count > 0
        return True

    async def action_earlier(self) -> None:
        """Show the older messages waiting above the list's first view, from their top."""
        await self.messages.show_earlier(keep_position=False)

    # --- what the turn's thread reports: to the turn controller -----------------------------
    @on(UserStored)
    def _user_stored(self, event: UserStored) -> None:
        self.turns.user_stored(event)

    @on(SystemPromptSet)
    async def _system_prompt_set(self, event: SystemPromptSet) -> None:
        await self.turns.system_prompt_set(event)

    @on(StepStarted)
    async def _step_started(self, event: StepStarted) -> None:
        await self.turns.step_started(event)

    @on(ReplyDelta)
    async def _reply_delta(self, event: ReplyDelta) -> None:
        await self.turns.reply_delta(event)

    @on(CallDelta)
    async def _call_delta(self, event: CallDelta) -> None:
        await self.turns.call_delta(event)

    @on(StepReplied)
    async def _step_replied(self, event: StepReplied) -> None:
        await self.turns.step_replied(event)

    @on(CallStarted)
    def _call_started(self, event: CallStarted) -> None:
        self.turns.call_started(event)

    @on(CallFinished)
    async def _call_finished(self, event: CallFinished) -> None:
        await self.turns.call_finished(event)

    @on(TurnEnded)
    async def _turn_ended(self, event: TurnEnded) -> None:
        await self.turns.ended(event)

    @on(TurnFailed)
    async def _turn_failed(self, event: TurnFailed) -> None:
        await self.turns.failed(event)

    # --- compaction: to the pass runner and the guard's notes -------------------------------
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
