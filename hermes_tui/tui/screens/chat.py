"""The chat screen: a conversation that never stalls, with compaction you can see.

Threads. A reply streams in a Textual thread worker (``session.reply``), its text
posted to the screen piece by piece. After the turn, the pass (or batch compaction)
runs in another thread worker: it is planned on a snapshot and published under the
session's lock (``Session.publish_pass`` drops a stale splice whole), and the screen
then brings the message list in step with the transcript. The composer stays live
throughout: a message sent while a pass runs goes straight out; one sent while a
reply still streams waits for that reply. Only one pass runs at a time; passes due
meanwhile queue up. Every thread reports back with ``post_message`` (thread-safe).
"""

from __future__ import annotations

import asyncio
import threading
from collections import deque
from collections.abc import Awaitable, Callable
from dataclasses import replace
from functools import partial
from typing import TYPE_CHECKING, Any, Protocol

from textual import events, on, work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.message import Message as UIMessage
from textual.screen import Screen
from textual.timer import Timer
from textual.widgets import Static
from textual.worker import get_current_worker

from hermes_tui.chat.client import CANCELLED, ChatError
from hermes_tui.compaction.engine import PassReport
from hermes_tui.logs import get_logger
from hermes_tui.session.session import Session, TurnResult
from hermes_tui.store import StoreError
from hermes_tui.transcript import Message
from hermes_tui.tui import commands
from hermes_tui.tui.heap import settle_heap
from hermes_tui.tui.problems import first_run_problem
from hermes_tui.tui.widgets.composer import Composer
from hermes_tui.tui.widgets.footer import ChatFooter
from hermes_tui.tui.widgets.message_views import (
    AssistantMessage,
    InfoNote,
    MarkerMessage,
    UserMessage,
)
from hermes_tui.tui.widgets.messages import MessageList
from hermes_tui.tui.widgets.status_bar import FAILED_OUTCOMES, StatusBar, StatusInfo
from hermes_tui.tui.widgets.text import columns, first_line, one_line

if TYPE_CHECKING:
    from pathlib import Path

    from hermes_tui.chat.choices import ModelChoice
    from hermes_tui.config import Config

log = get_logger("tui")


class ChatHost(Protocol):
    """What the chat screen asks of the app that hosts it (``HermesApp``), and nothing more."""

    config: Config
    config_path: Path
    reply_tokens: int | None

    def new_session(self) -> None: ...
    def show_sessions(self) -> None: ...
    def open_tool_screen(self, name: str) -> None: ...
    def use_chat_model(self, choice: ModelChoice) -> dict[str, Any]: ...


PASS, BATCH = "pass", "batch"
KEYS = (
    ("Enter", "send"),
    ("Ctrl+J", "new line (Shift+Enter too, where the terminal reports it)"),
    ("Up / Down", "earlier / later inputs (on the first / last line)"),
    ("Tab, Right", "complete a /command"),
    ("Escape", "stop the reply being written"),
    ("Ctrl+N", "new session"),
    ("Ctrl+R", "sessions"),
    ("Ctrl+O", "compact now"),
    ("Ctrl+G", "usage"),
    ("F1", "this help"),
    ("Ctrl+T", "show earlier messages (a long session shows its newest first)"),
    ("Ctrl+P", "command palette"),
    ("Ctrl+Q", "quit"),
)


# --- what the threads report ------------------------------------------------------------


class UserStored(UIMessage):
    def __init__(self, view: UserMessage, message: Message):
        super().__init__()
        self.view, self.message = view, message


class ReplyDelta(UIMessage):
    def __init__(self, view: AssistantMessage, text: str):
        super().__init__()
        self.view, self.text = view, text


class ReplyDone(UIMessage):
    def __init__(self, view: AssistantMessage, turn: TurnResult):
        super().__init__()
        self.view, self.turn = view, turn


class ReplyFailed(UIMessage):
    def __init__(self, view: AssistantMessage, error: BaseException):
        super().__init__()
        self.view, self.error = view, error


class PassLanded(UIMessage):
    def __init__(self, session: Session, kind: str, report: PassReport | None, manual: bool):
        super().__init__()
        self.session, self.kind, self.report, self.manual = session, kind, report, manual


class WindowResolved(UIMessage):
    pass


class ArchivedLoaded(UIMessage):
    def __init__(self, view: MarkerMessage, messages: list[Message], error: StoreError | None = None):
        super().__init__()
        self.view, self.messages, self.error = view, messages, error


# --- the screen -------------------------------------------------------------------------


class ChatScreen(Screen):
    BINDINGS = [
        Binding("escape", "cancel_reply", "Stop reply"),
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
        self.compaction: str | None = None          # PASS or BATCH while one runs
        self._queued: deque[tuple[str, str | None, bool]] = deque()
        self.last_outcome: str | None = None
        self._failure_shown: str | None = None  # the pass failure last told, so a repeat is not told each turn
        self._spinner: Timer | None = None

    @property
    def hermes(self) -> ChatHost:
        return self.app  # type: ignore[return-value]

    @property
    def busy(self) -> bool:
        """A reply or a pass is in flight, or one is queued."""
        return bool(self.replying or self.compaction or self._outbox or self._queued)

    def compose(self) -> ComposeResult:
        yield MessageList(id="messages")
        yield Static(id="hints", markup=False)
        # Up recalls what was typed in this session before, a resumed one included.
        yield Composer(id="composer", inputs=[m.content for m in self.session.conv.messages if m.role == "user"])
        yield StatusBar(id="status")
        yield ChatFooter()

    async def on_mount(self) -> None:
        self.query_one("#hints").display = False
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
            self._cancel.set()  # a reply still streaming for this screen is not wanted any more

    @property
    def messages(self) -> MessageList:
        return self.query_one(MessageList)

    # --- status -------------------------------------------------------------------------
    def status_info(self) -> StatusInfo:
        usage = self.session.usage()
        runtime = getattr(self.session.chat, "runtime", None)
        waiting = bool(
            self.replying and not self._got_text and self.compaction
            and runtime is not None and getattr(runtime, "waiting", 0) > 0
        )
        return StatusInfo(
            model=getattr(self.session.chat, "model_name", "") or "",
            tokens=usage["tokens"],
            window=usage["context_limit"],
            occupancy_pct=usage["occupancy_pct"],
            passes=usage["passes"],
            tokens_saved=usage["tokens_saved"],
            activity=self.compaction or "",
            waiting=waiting,
            replying=self.replying,
            last_outcome=self.last_outcome,
        )

    def refresh_status(self) -> None:
        bar = self.query_one(StatusBar)
        bar.show(self.status_info())
        if self._spinner is not None:
            if self.replying or self.compaction:
                self._spinner.resume()
            else:
                self._spinner.pause()

    def _tick(self) -> None:
        bar = self.query_one(StatusBar)
        bar.info = self.status_info()
        bar.tick()

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
        """Show the message and send it (after the reply being written, if there is one)."""
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

    async def _start_turn(self, text: str, user_view: UserMessage) -> None:
        user_view.remove_class("-queued")
        reply_view = AssistantMessage(None)
        await self.messages.add(reply_view)
        self.replying = True
        self._got_text = False
        self._cancel = threading.Event()
        self.refresh_status()
        self.refresh_bindings()  # Escape stops the reply: shown in the footer while there is one
        self.session.begin_work()  # the session keeps its lease until the reply is stored
        self._chat_worker(self.session, text, user_view, reply_view, self._cancel, self.hermes.reply_tokens)

    @work(thread=True, group="chat", exit_on_error=False)
    def _chat_worker(
        self, session: Session, text: str, user_view: UserMessage, reply_view: AssistantMessage,
        cancel: threading.Event, max_tokens: int | None,
    ) -> None:
        post = self.post_message
        try:
            message = session.add_user_message(text)
            post(UserStored(user_view, message))
            if not session.info.title:
                _name_after(session, text)
            turn = session.reply(
                on_delta=lambda piece: post(ReplyDelta(reply_view, piece)) and None,
                cancel=cancel, max_tokens=max_tokens,
            )
        except (ChatError, StoreError) as exc:
            log.warning("reply failed: %s: %s", type(exc).__name__, exc)
            post(ReplyFailed(reply_view, exc))
        except Exception as exc:  # a bug: logged with its traceback, never shown as one
            log.exception("reply failed")
            post(ReplyFailed(reply_view, exc))
        else:
            post(ReplyDone(reply_view, turn))
        finally:
            session.end_work()

    @on(UserStored)
    def _user_stored(self, event: UserStored) -> None:
        event.view.message = event.message
        self.refresh_status()

    @on(ReplyDelta)
    async def _reply_delta(self, event: ReplyDelta) -> None:
        if not self._got_text:
            self._got_text = True
            self.refresh_status()
        await event.view.write(event.text)

    @on(ReplyDone)
    async def _reply_done(self, event: ReplyDone) -> None:
        await event.view.finish(event.turn.reply)  # a stopped reply shows its "stopped" note
        if not event.turn.stopped:  # the spec runs passes after a turn that finishes normally
            self._after_turn()
        await self._turn_over()

    @on(ReplyFailed)
    async def _reply_failed(self, event: ReplyFailed) -> None:
        error = event.error
        await event.view.finish(None)
        if isinstance(error, ChatError) and error.kind == CANCELLED:
            # Stopped before any text arrived: there is nothing to keep.
            event.view.mount(Static("(stopped before the reply began)", classes="note"))
        else:
            await event.view.remove()
            problem, fix = first_run_problem(error)
            await self.note(f"{problem}.\nTo fix it: {fix}", title="The reply failed", severity="error")
        await self._turn_over()

    async def _turn_over(self) -> None:
        self.replying = False
        self._cancel = None
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

    # --- compaction ---------------------------------------------------------------------
    def _after_turn(self) -> None:
        due = self.session.due_compaction()  # the compaction policy's decision for this exchange
        if due is not None:
            self.request_compaction(PASS if due == "micro" else BATCH)

    def request_compaction(self, kind: str, focus: str | None = None, *, manual: bool = False) -> None:
        """Run a pass (or batch compaction) now, or after the one running."""
        if self.compaction is not None:
            self._queued.append((kind, focus, manual))
            return
        self.compaction = kind
        self.refresh_status()
        self.session.begin_work()  # a pass still lands (its session keeps its lease) after /new
        # An app worker, not this screen's: after /new the pass still lands in its own session
        # (stored); only quitting abandons it.
        self.app.run_worker(
            partial(self._compaction_worker, self.session, kind, focus, manual),
            name=f"{kind} {self.session.info.id}", group="compaction", thread=True, exit_on_error=False,
        )

    def _compaction_worker(self, session: Session, kind: str, focus: str | None, manual: bool) -> None:
        worker = get_current_worker()
        try:
            planned = _abandonable(
                session.plan_pass if kind == PASS else lambda: session.plan_compress(focus),
                cancelled=lambda: worker.is_cancelled,
            )
            if planned is None:
                return  # the app is closing: a plan is only a proposal, nothing was written
            report = session.publish_pass(planned)
        except Exception:
            log.exception("%s compaction failed; the transcript is unchanged", kind)
            report = None
        finally:
            session.end_work()
        self.post_message(PassLanded(session, kind, report, manual))

    @on(PassLanded)
    async def _pass_landed(self, event: PassLanded) -> None:
        if event.session is not self.session:
            return
        self.compaction = None
        report = event.report
        self.last_outcome = report.outcome if report is not None else "error"
        if not event.manual:  # /compact says how it went in its own note
            self._tell_failure(report)
        with self.session.lock:
            messages = list(self.session.conv.messages)
        await self.messages.sync(messages)
        if event.manual:
            await self._batch_note(report)
        if self._queued:
            kind, focus, manual = self._queued.popleft()
            self.request_compaction(kind, focus, manual=manual)
        elif event.kind == PASS and self.session.compactor.settings.enabled and self.session.over_threshold():
            self.request_compaction(BATCH)
        self.refresh_status()

    def _tell_failure(self, report: PassReport | None) -> None:
        """A failed pass's reason and what to change, once until a pass goes through."""
        detail = report.detail if report is not None else None
        if detail is None:
            if report is not None and report.outcome not in FAILED_OUTCOMES:
                self._failure_shown = None
            return
        if detail != self._failure_shown:
            self._failure_shown = detail
            self.app.notify(detail, title=f"Compaction pass failed ({report.outcome})", severity="warning", timeout=15)

    async def _batch_note(self, report: PassReport | None) -> None:
        """What ``/compact`` did."""
        if report is None:
            await self.note("Compaction failed; details are in the log. The conversation is unchanged.",
                            severity="error")
            return
        fields = report.fields
        if report.outcome == "compressed":
            await self.note(
                f"Compacted: {fields.get('messages_before')} → {fields.get('messages_after')} messages, "
                f"{fields.get('tokens_before'):,} → {fields.get('tokens_after'):,} tokens."
            )
        elif report.outcome == "nothing_to_absorb":
            await self.note("Nothing to compact yet: everything is in the protected head or the recent tail.")
        else:
            failure = report.detail or fields.get("failure") or report.outcome
            await self.note(f"Compaction did not apply ({report.outcome}: {failure}); the conversation is "
                            "unchanged.", severity="warning")

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

    # --- notes and slash commands ----------------------------------------------------------
    async def note(self, text: str, *, title: str = "", severity: str = "information",
                   markdown: bool = False) -> InfoNote:
        view = InfoNote(text, title=title, severity=severity, markdown=markdown)
        await self.messages.add(view)
        return view

    def action_slash(self, text: str) -> None:
        self.run_slash(text)

    def run_slash(self, text: str) -> bool:
        """Run ``text`` if it is a slash command; False when it is a message to send."""
        invocation = commands.parse(text)
        if invocation is None:
            return False
        if invocation.command is None:
            self._run_guarded(self.note(f"Unknown command /{invocation.name}: /help lists the commands.",
                                        severity="warning"))
            return True
        handler: Callable[[str], Any] = getattr(self, f"slash_{invocation.name}")
        result = handler(invocation.arg)
        if result is not None:
            self._run_guarded(result)
        return True

    def _run_guarded(self, coroutine: Awaitable[Any]) -> None:
        async def guarded() -> None:
            try:
                await coroutine
            except Exception:
                log.exception("a command failed")
                self.app.notify("That command failed; details are in the log.", severity="error")

        self.run_worker(guarded(), group="commands")

    async def slash_help(self, arg: str) -> None:
        text = columns((c.usage, c.help) for c in commands.COMMANDS) + "\n\n" + columns(KEYS)
        await self.note(text, title="Commands and keys")

    def slash_new(self, arg: str) -> None:
        self.hermes.new_session()

    def slash_sessions(self, arg: str) -> None:
        self.hermes.show_sessions()

    def slash_compact(self, arg: str) -> None:
        # The status bar shows it running; a note says what it did when it lands.
        self.request_compaction(BATCH, arg or None, manual=True)

    async def slash_usage(self, arg: str) -> None:
        u = self.session.usage()
        window = f"{u['context_limit']:,} tokens ({u['context_source']})" if u["context_limit"] else "resolving …"
        occupancy = f"{u['occupancy_pct']:.1f}% of the compaction threshold" if u["occupancy_pct"] is not None else "–"
        threshold = f"{u['threshold_tokens']:,} tokens" if u["threshold_tokens"] else "–"
        rows = [
            ("tokens in context", f"{u['tokens']:,} ({u['messages']} messages)"),
            ("context window", window),
            ("compaction threshold", threshold),
            ("occupancy", occupancy),
            ("micro passes", str(u["passes"])),
            ("tokens saved", f"{u['tokens_saved']:,}"),
            ("rolling summary", f"{u['summary_tokens']:,} tokens"),
            ("batch compactions", str(u["batch_compactions"])),
            ("last pass", self._last_pass_text(u["last_pass"])),
        ]
        await self.note(columns(rows), title="Usage")

    def _last_pass_text(self, outcome: str | None) -> str:
        last = self.session.last_pass
        detail = last.detail if last is not None else None
        return f"{outcome}: {detail}" if outcome and detail else outcome or self.last_outcome or "–"

    async def slash_summary(self, arg: str) -> None:
        summary = self.session.compactor.rolling_summary
        if not summary:
            await self.note("No rolling summary yet: the first pass writes one after a completed turn.",
                            title="Rolling summary")
        else:
            tokens = self.session.compactor.state.summary_tokens
            await self.note(summary, title=f"Rolling summary ({tokens:,} tokens)", markdown=True)

    async def slash_model(self, arg: str) -> None:
        """``/model NAME`` switches the chat model; ``/model`` picks it from a list. The choice
        is written to config.yaml and the app reloads its clients (as after /settings)."""
        from hermes_tui.chat.choices import ChoiceError, find_choice
        from hermes_tui.config import ConfigError
        from hermes_tui.tui.screens.model_picker import ModelPicker

        app = self.hermes
        if arg:
            try:  # scans the HF cache, may ask the endpoint: off the UI thread
                choice = await asyncio.to_thread(find_choice, arg, app.config.model, app.config_path)
            except ChoiceError as exc:
                await self.note(str(exc), title="The chat model was not changed", severity="warning")
                return
        else:
            choice = await self.app.push_screen_wait(ModelPicker(app.config.model, app.config_path, self._models_now()))
            if choice is None:
                return
        if self.busy:  # switching reopens the session: what is in flight lands in this one first
            await self.note(f"Switching to {choice.label} once the reply and the passes in flight are done.")
            while self.busy:
                await asyncio.sleep(0.1)
        try:
            changes = app.use_chat_model(choice)
        except ConfigError as exc:
            await self.note(str(exc), title="The chat model was not changed", severity="error")
            return
        self.app.notify(", ".join(f"{key} = {value}" for key, value in changes.items()), title="Chat model set")

    def _models_now(self) -> str:
        u = self.session.usage()
        window = f"{u['context_limit']:,} tokens ({u['context_source']})" if u["context_limit"] else "resolving …"
        return columns([
            ("chat model", getattr(self.session.chat, "model_name", "") or "(none)"),
            ("context window", window),
            ("compression model", getattr(self.session.compactor.ctx.summarizer, "model_name", "?")),
        ])

    def slash_models(self, arg: str) -> None:
        self.hermes.open_tool_screen("models")

    def slash_bench(self, arg: str) -> None:
        self.hermes.open_tool_screen("bench")

    def slash_settings(self, arg: str) -> None:
        self.hermes.open_tool_screen("settings")

    def slash_quit(self, arg: str) -> None:
        self.app.exit()


def _name_after(session: Session, text: str) -> None:
    """A session without a title takes its first message's first line (for /sessions)."""
    title = one_line(first_line(text), 60)
    with session.lock:
        session.store.rename_session(session.info.id, title)
        session.info = replace(session.info, title=title)


def _abandonable(plan: Callable[[], Any], *, cancelled: Callable[[], bool], poll: float = 0.1) -> Any:
    """Run ``plan`` on a daemon thread and wait for it, giving up (None) once ``cancelled()``.

    A pass can take tens of seconds on a local model; quitting must not wait for it.
    Planning writes nothing, so an abandoned plan leaves nothing behind.
    """
    box: dict[str, Any] = {}

    def run() -> None:
        try:
            box["result"] = plan()
        except BaseException as exc:  # noqa: BLE001 - handed to the waiting worker
            box["error"] = exc

    thread = threading.Thread(target=run, name="hermes-pass", daemon=True)
    thread.start()
    while thread.is_alive():
        thread.join(poll)
        if cancelled() and thread.is_alive():
            return None
    if "error" in box:
        raise box["error"]
    return box["result"]
