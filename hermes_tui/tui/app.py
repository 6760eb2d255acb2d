"""The Textual app: opens (or resumes, or imports) a session and shows it on the chat screen.

The app owns what outlives one session: the config, the store, the chat client and
the summarizer (an MLX model is loaded once per process), and one lock that every
session of this app uses for its transcript and store writes: the store has one
connection, and a pass of the session left behind by ``/new`` still lands (in that
session) while the next one talks.

What is wrong at start (no chat model, the model missing, the endpoint down) shows on
the first-run screen with the step that fixes it; the conversation stays readable
behind it. Details go to the log, never a traceback to the screen.

The MCP servers of ``mcp_servers`` start in the background when the first session
opens and serve every session of the app (the chat never waits for them); the app's
``McpHost`` (app_mcp) holds that part.

Notices (``notify``, from the app and from every screen) are plain text: they quote outside
text (an MCP server's error, an endpoint's message, a path), so none is read as markup and
control characters in them show as text (``terminal_text``).
"""

from __future__ import annotations

import asyncio
import threading
from importlib import import_module
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rich.text import Text
from textual import events, work
from textual.app import App
from textual.binding import Binding
from textual.notifications import SeverityLevel
from textual.screen import Screen

from hermes_tui.chat.client import ChatClient
from hermes_tui.chat.unavailable import UnavailableChat
from hermes_tui.compaction.summarizer import Summarizer
from hermes_tui.config import Config
from hermes_tui.core.transcript import TranscriptError
from hermes_tui.providers.backend import ProviderError
from hermes_tui.providers.selection import warm_up
from hermes_tui.session.session import Session
from hermes_tui.session.wiring import import_transcript
from hermes_tui.store import Store, StoreError
from hermes_tui.tools.approval import Mode
from hermes_tui.tui import commands
from hermes_tui.tui.app_mcp import MCP_REFRESH_S, McpChanged, McpHost, McpSdkImported
from hermes_tui.tui.heap import HOLD_LIMIT_S, FullCollections, settle_heap
from hermes_tui.tui.palette import SlashCommandsProvider
from hermes_tui.tui.problems import QUIT, first_run_problem
from hermes_tui.tui.quitting import stop_work
from hermes_tui.tui.screens.chat import ChatScreen
from hermes_tui.tui.widgets.message_views import warm_markdown
from hermes_tui.util import paths
from hermes_tui.util.logs import get_logger
from hermes_tui.util.terminal_text import visible_controls

if TYPE_CHECKING:
    from hermes_tui.providers.choices import ModelChoice
    from hermes_tui.session.agent import Tools

log = get_logger("tui")

NEW_CHAT = ("Start a new chat", "new")


class HermesApp(App[None]):
    CSS_PATH = "app.tcss"
    TITLE = "hermes-tui"
    COMMANDS = App.COMMANDS | {SlashCommandsProvider}
    BINDINGS = [Binding("ctrl+q", "quit", "Quit", priority=True)]

    def __init__(
        self,
        config: Config,
        store: Store,
        session_id: str | None = None,
        import_path: Path | None = None,
        chat: ChatClient | None = None,
        summarizer: Summarizer | None = None,
        *,
        reply_tokens: int | None = None,
        config_path: Path | None = None,
        server_ports: tuple[int, ...] | None = None,
        workspace: Path | None = None,
        import_session: str | None = None,
    ):
        super().__init__()
        self.config = config
        self.store = store
        # A reply's cap; None: the chat client's own, model.max_tokens (tests pass a small one).
        self.reply_tokens = reply_tokens
        self.config_path = Path(config_path) if config_path else paths.config_path()
        # Where the first-run screen looks for model servers; None: the usual ports.
        self.server_ports = server_ports
        self._start_session_id = session_id
        self._import_path = Path(import_path) if import_path else None
        self._import_session = import_session  # which session of a file that holds several
        self._chat_given, self._summarizer_given = chat, summarizer
        self.chat: ChatClient | None = chat
        self.summarizer: Summarizer | None = summarizer
        self.session_lock = threading.RLock()
        self._problems: list[Exception] = []
        self._import_error: Exception | None = None
        # Tools act in ``workspace`` (else agent.workspace, else where the app started); the
        # approval mode starts as agent.approval and /mode changes it for this run.
        self.workspace = workspace
        self.approval_mode = Mode(config.agent.approval)
        self.told_no_tools: set[str] = set()
        self._sessions: list[Session] = []  # every session opened: work may be in flight for one left behind
        self.full_collections = FullCollections()  # the garbage collector's full passes, between keys
        self.mcp_host = McpHost(self)  # the MCP servers and the tools each session's turns get

    # --- start ------------------------------------------------------------------------------
    def on_mount(self) -> None:
        self._make_clients()
        self.call_after_refresh(self.mcp_host.start_soon)  # the servers start after the first frame
        self.set_interval(MCP_REFRESH_S, self.mcp_host.show)
        self.call_after_refresh(warm_up, self.config)  # off the first reply's path
        self.set_timer(HOLD_LIMIT_S, settle_heap)  # the chat screen settles it sooner
        self.full_collections.start()
        self.set_interval(1.0, self.full_collections.tick)
        self.call_after_refresh(warm_markdown)
        if self._import_path is None:
            self._start(self._start_session_id)
            return
        try:
            session_id = import_transcript(self.store, self.config, self._import_path, session=self._import_session).id
        except (TranscriptError, StoreError) as exc:
            # The file is what was asked for: say why it cannot be opened and write
            # nothing (not even an empty new chat) unless the user asks for one.
            log.warning("cannot import %s: %s", self._import_path, exc)
            self._import_error = exc
            # Imported here, not at start-up: most starts never show it.
            from hermes_tui.tui.screens.first_run import FirstRunScreen

            screen = FirstRunScreen(
                f"Cannot open the transcript: {exc}",
                f"Fix the file and open it again (hermes-tui open {self._import_path}), or start a new chat.",
                [NEW_CHAT, QUIT],
            )
            self.push_screen(screen, self._after_failed_import)
            return
        self._start(session_id)

    async def on_event(self, event: events.Event) -> None:
        if isinstance(event, events.Key):
            self.full_collections.typed()
        await super().on_event(event)

    def _start(self, session_id: str | None) -> None:
        try:
            session = self.open_session(session_id)
        except StoreError as exc:
            log.warning("cannot open session %s: %s", session_id, exc)
            self.notify(str(exc), title="Cannot resume", severity="error", timeout=15)
            session = self.open_session(None)
        self.push_screen(ChatScreen(session))
        self._show_problems()

    def _after_failed_import(self, action: str | None) -> None:
        if action == NEW_CHAT[1]:
            self._start(None)
        else:
            self.exit(return_code=2, message=f"hermes-tui: {self._import_error}")

    def _make_clients(self) -> None:
        """The chat client and the summarizer, from config unless given; what fails is kept to show."""
        from hermes_tui.providers.selection import make_chat_client, make_summarizer

        self._problems = []
        if self._chat_given is None:
            try:
                self.chat = make_chat_client(self.config.model)
            except ProviderError as exc:
                log.warning("no chat model: %s", exc)
                self._problems.append(exc)
                self.chat = UnavailableChat(exc)
        if self._summarizer_given is None:
            try:
                self.summarizer = make_summarizer(self.config.auxiliary.compression)
            except ProviderError as exc:
                # Passes still run, with the summarizer that needs no model; the notice says so.
                from hermes_tui.providers.extractive.summarizer import ExtractiveSummarizer

                log.warning("no compression model, using the extractive summarizer: %s", exc)
                if not self._problems:  # without a chat model the first-run screen says enough
                    from hermes_tui.providers.selection import recommended_compression_hint

                    hint = recommended_compression_hint(self.config.auxiliary.compression)
                    self.notify(
                        "Passes use the built-in extractive summarizer until one is set in /settings."
                        + (f" {hint}" if hint else ""),
                        title="No compression model", severity="warning", timeout=15 if hint else 8,
                    )
                self.summarizer = ExtractiveSummarizer()

    def _show_problems(self) -> None:
        if self._problems:
            problem = self._problems[0]
            from hermes_tui.tui.screens.first_run import FirstRunScreen, Setup

            # No usable chat model: the screen also offers the ways to one on this machine.
            setup = Setup(self.config_path, self.config, self.server_ports) if isinstance(problem, ProviderError) else None
            self.push_screen(FirstRunScreen.for_error(problem, setup), self._first_run_action)

    def _first_run_action(self, action: str | None) -> None:
        from hermes_tui.tui.screens.first_run import RELOAD

        if action == "settings":
            self.open_tool_screen("settings")
        elif action == "models":
            self.open_tool_screen("models")
        elif action == "retry":
            self.reconfigure(self.config)
        elif action == RELOAD:  # the first-run screen saved new settings
            from hermes_tui.config import ConfigError, load_config

            try:
                self.reconfigure(load_config(self.config_path))
            except ConfigError as exc:
                self.show_error(exc)
                self._show_problems()
        elif action == "quit":
            self.exit()

    async def on_unmount(self) -> None:
        # Before ``run`` returns and the store closes: the turns and passes land first, then
        # the MCP servers stop and their processes are reaped.
        await stop_work(self, self._sessions)
        self.full_collections.stop()
        await self.mcp_host.close()

    # --- MCP ----------------------------------------------------------------------------------
    def on_mcp_sdk_imported(self, event: McpSdkImported) -> None:
        self.mcp_host.sdk_imported()

    def on_mcp_changed(self, event: McpChanged) -> None:
        self.mcp_host.changed(event)

    def tools_for(self, session: Session) -> Tools | None:
        """The tools an agent turn of ``session`` offers (``McpHost.tools_for``)."""
        return self.mcp_host.tools_for(session)

    # --- sessions ---------------------------------------------------------------------------
    def open_session(self, session_id: str | None = None, *, title: str = "") -> Session:
        from hermes_tui.session.wiring import open_session

        assert self.chat is not None and self.summarizer is not None
        if session_id:
            session_id = self.store.get_session(session_id).id
            self.store.acquire_lease(session_id)  # before loading: what it loads is what it writes after
        try:
            session = open_session(
                self.config, self.store, session_id=session_id, title=title, chat=self.chat,
                summarizer=self.summarizer,
            )
        except BaseException:
            if session_id:
                self.store.release_lease(session_id)
            raise
        session.lock = self.session_lock  # one lock for every session of this app: one store connection
        self._sessions.append(session)
        return session

    @property
    def chat_screen(self) -> ChatScreen | None:
        for screen in reversed(self.screen_stack):
            if isinstance(screen, ChatScreen):
                return screen
        return None

    def _show_session(self, session: Session) -> None:
        screen = ChatScreen(session)
        if self.chat_screen is None:
            self.push_screen(screen)
            return
        while not isinstance(self.screen, ChatScreen):
            self.pop_screen()
        left = self.screen.session
        self.switch_screen(screen)
        left.close()  # its lease goes once what is in flight for it has landed

    def new_session(self) -> None:
        try:
            self._show_session(self.open_session(None))
        except StoreError as exc:
            self.show_error(exc)

    def resume(self, session_id: str) -> None:
        try:
            self._show_session(self.open_session(session_id))
        except StoreError as exc:
            self.show_error(exc)

    def show_sessions(self) -> None:
        from hermes_tui.tui.screens.sessions import SessionsScreen

        current = self.chat_screen.session.info.id if self.chat_screen else None

        def chosen(session_id: str | None) -> None:
            if session_id and session_id != current:
                self.resume(session_id)

        self.push_screen(SessionsScreen(self.store, current), chosen)

    def reconfigure(self, config: Config) -> None:
        """New settings: new clients, and the current session reopened with them.

        Reopening reads the session back from the store, so a reply or a pass still in
        flight (or queued) would land in the session left behind: while the chat is busy
        the change waits for it, and a notice says so. The latest change wins.
        """
        self.workers.cancel_group(self, "reconfigure")  # a change still waiting is superseded
        screen = self.chat_screen
        if screen is not None and screen.busy:
            self.notify("They take effect once the reply and the passes in flight are done.",
                        title="New settings saved", timeout=8)
            self._reconfigure_when_idle(config)
            return
        self._apply_config(config)

    @work(group="reconfigure")
    async def _reconfigure_when_idle(self, config: Config) -> None:
        while (screen := self.chat_screen) is not None and screen.busy:
            await asyncio.sleep(0.1)
        self._apply_config(config)

    def _apply_config(self, config: Config) -> None:
        servers_changed = config.mcp_servers != self.config.mcp_servers
        self.config = config
        self._make_clients()
        if servers_changed:
            self.mcp_host.update()
            self.mcp_host.show()
        self.mcp_host.forget_tools()  # the approval mode or limits may have changed
        current = self.chat_screen.session.info.id if self.chat_screen else None
        self.resume(current) if current else self.new_session()
        self._show_problems()

    def use_chat_model(self, choice: ModelChoice) -> dict[str, Any]:
        """Make ``choice`` the chat model: write it to config.yaml (only the changed keys,
        through ``config.edit``), then reload the clients and the session as after the
        settings or models screen. Returns the changes written. Raises ConfigError."""
        from hermes_tui.config import ConfigError, load_config
        from hermes_tui.config.edit import save_changes
        from hermes_tui.providers.choices import changes_for

        try:
            on_disk = load_config(self.config_path).model
        except ConfigError:
            on_disk = self.config.model  # save_changes keeps the unreadable file aside
        changes = changes_for(choice, on_disk)
        result = save_changes(self.config_path, changes, base=self.config)
        self.reconfigure(result.config)
        return changes

    # --- other screens ----------------------------------------------------------------------
    # Built anew at each opening from the app's state of the moment (the config path, the chat's
    # tools), so not installed by name in Textual's SCREENS: an installed screen is built once and
    # kept for the app's lifetime, and a second /settings would show the first one's form.
    # The command table names each such screen's module (``commands.SlashCommand.screen``),
    # imported when first opened: most runs never show it.
    def open_tool_screen(self, name: str) -> None:
        command = commands.BY_NAME.get(name)
        screen: Screen[Any] | None = None
        if command is not None and command.screen:
            screen = import_module(f"hermes_tui.tui.screens.{command.screen}").open_screen(self)
        if command is None or screen is None:
            self.notify(f"The {name} screen is not part of this build yet.", title=f"/{name}", severity="warning")
            return
        if command.returns_config:
            self.push_screen(screen, lambda config: self.reconfigure(config) if config is not None else None)
        else:
            self.push_screen(screen)

    def chat_tools(self) -> Tools | None:
        """The tools of the session on the chat screen; None without a chat or with no tools."""
        screen = self.chat_screen
        return self.tools_for(screen.session) if screen is not None else None

    def notify(self, message: str, *, title: str = "", severity: SeverityLevel = "information",
               timeout: float | None = None, markup: bool = False) -> None:
        """A notice, always as plain text: ``markup`` is ignored (``Widget.notify`` passes
        True for every screen's notice, and what they say is often outside text, where
        ``[/]`` would raise ``MarkupError`` and ``[bold]`` would restyle it)."""
        super().notify(visible_controls(str(message)), title=visible_controls(str(title)), severity=severity,
                       timeout=timeout, markup=False)

    def show_error(self, exc: Exception) -> None:
        problem, fix = first_run_problem(exc)
        self.notify(f"{problem}\n{fix}", severity="error", timeout=15)

    def _handle_exception(self, error: Exception) -> None:
        # A bug must not print a traceback over the user's terminal: it goes to the log, and
        # one line says where. Under tests (headless) Textual's own handling re-raises it.
        log.error("unexpected error; the app stops", exc_info=error)
        if self.is_headless:
            super()._handle_exception(error)
            return
        self.exit(
            return_code=1,
            # Text, not a str: Rich prints a str as markup, and the error may quote outside text.
            message=Text(visible_controls(
                f"hermes-tui: unexpected error ({type(error).__name__}: {error}); details in {paths.log_path()}")),
        )

    # --- commands ---------------------------------------------------------------------------
    def run_slash(self, text: str) -> None:
        """A slash command from the command palette (or anywhere): run on the chat screen."""
        screen = self.chat_screen
        if screen is not None:
            screen.run_slash(text)
