"""The app's MCP host: its servers (one manager for the app's config), the tools each
session's agent turns get, and showing the servers' state.

``HermesApp`` owns one ``McpHost`` and hands it its MCP messages. The manager reports changes
from its own thread: they come to the app as a message (``McpChanged``, posted, never waited
for) and update the status bars and an open ``/tools``. New settings change only the servers
whose entry changed (``McpManager.update``); the manager goes when no server is left.
Quitting stops every server and reaps its process.

The MCP SDK (with pydantic, anyio and httpx under it) takes ~0.4 s to import: the host
imports it on a thread after the app's first frame and starts the manager when that is done
(``start_soon``); a turn picks up the manager's tools from then on.
"""

from __future__ import annotations

import asyncio
import sys
import threading
from typing import TYPE_CHECKING, Any, Protocol

from textual.message import Message

from hermes_tui.session.session import Session
from hermes_tui.tui.screens.chat import ChatScreen
from hermes_tui.util.logs import get_logger

if TYPE_CHECKING:
    from pathlib import Path

    from textual.notifications import SeverityLevel
    from textual.screen import Screen

    from hermes_tui.config import Config
    from hermes_tui.session.agent import Tools
    from hermes_tui.store import Store
    from hermes_tui.tools.approval import Mode
    from hermes_tui.tools.mcp import McpManager, ServerState

log = get_logger("tui")

MCP_REFRESH_S = 1.0  # the status bars catch up on what a change report missed (a screen opened since)


class McpChanged(Message):
    """An MCP server changed state (posted from the manager's thread)."""

    def __init__(self, state: ServerState) -> None:
        super().__init__()
        self.state = state


class McpSdkImported(Message):
    """The MCP SDK is imported (posted from the thread that imported it)."""


class McpApp(Protocol):
    """What the MCP host uses of the app. Read at each use: new settings replace ``config`` and
    ``/mode`` changes ``approval_mode`` while the host runs."""

    config: Config
    store: Store
    workspace: Path | None
    approval_mode: Mode

    @property
    def screen_stack(self) -> list[Screen[Any]]: ...
    @property
    def chat_screen(self) -> ChatScreen | None: ...
    def post_message(self, message: Message) -> bool: ...
    def notify(self, message: str, *, title: str = "", severity: SeverityLevel = "information",
               timeout: float | None = None, markup: bool = False) -> None: ...


class McpHost:
    """The MCP servers of the app's config and the tools built on them, per session."""

    def __init__(self, app: McpApp) -> None:
        self.app = app
        self.manager: McpManager | None = None  # None until the servers start, and with none configured
        self._tools: dict[str, Tools] = {}  # by session id: "for this session" rules stay with it
        self._closing: list[threading.Thread] = []  # the managers of configs left behind, stopping

    def start_soon(self) -> None:
        """Import the MCP SDK off the UI thread, then start the servers (``McpSdkImported``)."""
        if not self.app.config.mcp_servers:
            return

        def import_sdk() -> None:
            try:
                import hermes_tui.tools.mcp  # noqa: F401 - the import is the point
            except Exception:
                log.warning("importing the MCP SDK ahead of the servers' start failed", exc_info=True)
            self.app.post_message(McpSdkImported())

        threading.Thread(target=import_sdk, name="mcp-import", daemon=True).start()

    def sdk_imported(self) -> None:
        if self.manager is None and self.app.config.mcp_servers:  # a reconfigure may have started it meanwhile
            self._start()
            self.show()

    def _start(self) -> None:
        from hermes_tui.session.wiring import start_mcp

        post = self.app.post_message

        def changed(state: ServerState) -> None:
            post(McpChanged(state))

        self.manager = start_mcp(self.app.config, on_change=changed)

    def _stop(self) -> None:
        """Stop the servers of the config left behind, off the UI thread (it takes seconds)."""
        old, self.manager = self.manager, None
        self._tools.clear()
        if old is not None:
            closing = threading.Thread(target=old.close, name="mcp-close", daemon=True)
            closing.start()
            self._closing.append(closing)

    def update(self) -> None:
        """Follow a change of ``mcp_servers``: only the servers whose config changed restart;
        the others keep running as they are."""
        servers = self.app.config.mcp_servers
        if self.manager is None:
            self._start()
        elif not servers:
            self._stop()
        else:
            self.manager.update(servers)

    def forget_tools(self) -> None:
        """New settings: the approval mode or limits may have changed, so the next turn builds anew."""
        self._tools.clear()

    def tools_for(self, session: Session) -> Tools | None:
        """The tools an agent turn of ``session`` offers: the built-ins in the workspace and the
        MCP servers', "always" rules from the store, in this run's approval mode. None (and a
        notice) when the workspace is not a folder: the chat runs without tools."""
        from hermes_tui.session.wiring import make_tools

        app = self.app
        tools = self._tools.get(session.info.id)
        if tools is None or tools.mcp is not self.manager:
            try:
                tools = make_tools(app.config, app.store, mcp=self.manager, workspace=app.workspace,
                                   mode=app.approval_mode.value)
            except ValueError as exc:
                log.warning("no tools: %s", exc)
                app.notify(f"agent.workspace: {exc}. The chat runs without tools until it is fixed in /settings.",
                           title="No tools", severity="warning", timeout=15)
                return None
            self._tools[session.info.id] = tools
        return tools

    def changed(self, event: McpChanged) -> None:
        if event.state.status.value == "failed":
            log.warning("MCP server %s", event.state.line())
        self.show()

    def show(self) -> None:
        """The servers' state in every chat screen's status bar and on an open /tools."""
        from hermes_tui.tui.widgets.status_bar import StatusBar

        summary, state = "", ""
        if self.manager is not None:  # else the MCP SDK is not even imported
            from hermes_tui.tools.mcp import ServerStatus
            from hermes_tui.tui.screens.tools import ToolsScreen

            summary, states = self.manager.summary(), self.manager.states()
            if any(s.status is ServerStatus.FAILED for s in states):
                state = "-failed"
            elif any(s.status is ServerStatus.STARTING for s in states):
                state = "-running"
            for screen in self.app.screen_stack:
                if isinstance(screen, ToolsScreen) and screen.is_mounted:
                    screen.refresh_servers()
        self._follow_tools_screens()
        for screen in self.app.screen_stack:
            if isinstance(screen, ChatScreen):
                for bar in screen.query(StatusBar):
                    bar.show_mcp(summary, state)

    def _follow_tools_screens(self) -> None:
        """An open /tools whose servers were replaced (or went, or came) shows the current ones."""
        tools_screens = sys.modules.get("hermes_tui.tui.screens.tools")  # not imported: none is open
        if tools_screens is None:
            return
        ToolsScreen = tools_screens.ToolsScreen  # noqa: N806
        chat = self.app.chat_screen
        for screen in self.app.screen_stack:
            if isinstance(screen, ToolsScreen) and screen.is_mounted and screen.mcp is not self.manager \
                    and chat is not None and (tools := self.tools_for(chat.session)) is not None:
                screen.show_tools(tools)

    async def close(self) -> None:
        """Every child stopped and reaped before this returns (a daemon thread would die mid-way)."""
        if self.manager is not None:
            await asyncio.to_thread(self.manager.close)
        for closing in self._closing:
            await asyncio.to_thread(closing.join)
