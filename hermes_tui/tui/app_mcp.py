"""The app's part of MCP: its servers (one manager for the app's config), the tools each
session's agent turns get, and showing the servers' state.

The manager reports changes from its own thread: they come to the app as a message
(``McpChanged``, posted, never waited for) and update the status bars and an open
``/tools``. New settings change only the servers whose entry changed (``McpManager.update``);
the manager goes when no server is left. Quitting stops every server and reaps its process.

The MCP SDK (with pydantic, anyio and httpx under it) takes ~0.4 s to import: the app
imports it on a thread after its first frame and starts the manager when that is done
(``start_mcp_soon``); a turn picks up the manager's tools from then on.
"""

from __future__ import annotations

import asyncio
import sys
import threading
from typing import TYPE_CHECKING

from textual.message import Message

from hermes_tui.session.session import Session
from hermes_tui.tui.screens.chat import ChatScreen
from hermes_tui.util.logs import get_logger

if TYPE_CHECKING:
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


class McpHost:
    """Mixed into the app (a Textual ``App``), which sets these in its ``__init__``."""

    config: Config
    store: Store
    workspace: object
    approval_mode: Mode
    mcp: McpManager | None
    _tools: dict[str, Tools]
    _mcp_closing: list[threading.Thread]

    def start_mcp_soon(self) -> None:
        """Import the MCP SDK off the UI thread, then start the servers (``McpSdkImported``)."""
        if not self.config.mcp_servers:
            return

        def import_sdk() -> None:
            try:
                import hermes_tui.tools.mcp  # noqa: F401 - the import is the point
            except Exception:
                log.warning("importing the MCP SDK ahead of the servers' start failed", exc_info=True)
            self.post_message(McpSdkImported())  # type: ignore[attr-defined]

        threading.Thread(target=import_sdk, name="mcp-import", daemon=True).start()

    def on_mcp_sdk_imported(self, event: McpSdkImported) -> None:
        if self.mcp is None and self.config.mcp_servers:  # a reconfigure may have started it meanwhile
            self._start_mcp()
            self._show_mcp()

    def _start_mcp(self) -> None:
        from hermes_tui.session.wiring import start_mcp

        self.mcp = start_mcp(self.config, on_change=lambda state: self.post_message(McpChanged(state)))

    def _stop_mcp(self) -> None:
        """Stop the servers of the config left behind, off the UI thread (it takes seconds)."""
        old, self.mcp = self.mcp, None
        self._tools.clear()
        if old is not None:
            closing = threading.Thread(target=old.close, name="mcp-close", daemon=True)
            closing.start()
            self._mcp_closing.append(closing)

    def _update_mcp(self) -> None:
        """Follow a change of ``mcp_servers``: only the servers whose config changed restart;
        the others keep running as they are."""
        if self.mcp is None:
            self._start_mcp()
        elif not self.config.mcp_servers:
            self._stop_mcp()
        else:
            self.mcp.update(self.config.mcp_servers)

    def tools_for(self, session: Session) -> Tools | None:
        """The tools an agent turn of ``session`` offers: the built-ins in the workspace and the
        MCP servers', "always" rules from the store, in this run's approval mode. None (and a
        notice) when the workspace is not a folder: the chat runs without tools."""
        from hermes_tui.session.wiring import make_tools

        tools = self._tools.get(session.info.id)
        if tools is None or tools.mcp is not self.mcp:
            try:
                tools = make_tools(self.config, self.store, mcp=self.mcp, workspace=self.workspace,
                                   mode=self.approval_mode.value)
            except ValueError as exc:
                log.warning("no tools: %s", exc)
                self.notify(f"agent.workspace: {exc}. The chat runs without tools until it is fixed in /settings.",
                            title="No tools", severity="warning", timeout=15)
                return None
            self._tools[session.info.id] = tools
        return tools

    def on_mcp_changed(self, event: McpChanged) -> None:
        if event.state.status.value == "failed":
            log.warning("MCP server %s", event.state.line())
        self._show_mcp()

    def _show_mcp(self) -> None:
        from hermes_tui.tui.widgets.status_bar import StatusBar

        summary, state = "", ""
        if self.mcp is not None:  # else the MCP SDK is not even imported
            from hermes_tui.tools.mcp import ServerStatus
            from hermes_tui.tui.screens.tools import ToolsScreen

            summary, states = self.mcp.summary(), self.mcp.states()
            if any(s.status is ServerStatus.FAILED for s in states):
                state = "-failed"
            elif any(s.status is ServerStatus.STARTING for s in states):
                state = "-running"
            for screen in self.screen_stack:
                if isinstance(screen, ToolsScreen) and screen.is_mounted:
                    screen.refresh_servers()
        self._follow_tools_screens()
        for screen in self.screen_stack:
            if isinstance(screen, ChatScreen):
                for bar in screen.query(StatusBar):
                    bar.show_mcp(summary, state)

    def _follow_tools_screens(self) -> None:
        """An open /tools whose servers were replaced (or went, or came) shows the current ones."""
        tools_screens = sys.modules.get("hermes_tui.tui.screens.tools")  # not imported: none is open
        if tools_screens is None:
            return
        ToolsScreen = tools_screens.ToolsScreen  # noqa: N806
        chat = self.chat_screen
        for screen in self.screen_stack:
            if isinstance(screen, ToolsScreen) and screen.is_mounted and screen.mcp is not self.mcp \
                    and chat is not None and (tools := self.tools_for(chat.session)) is not None:
                screen.show_tools(tools)

    async def on_unmount(self) -> None:
        # Every child stopped and reaped before we return (a daemon thread would die mid-way).
        if self.mcp is not None:
            await asyncio.to_thread(self.mcp.close)
        for closing in self._mcp_closing:
            await asyncio.to_thread(closing.join)
