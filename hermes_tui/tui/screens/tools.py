"""The /tools screen: every tool the agent may call and whether a call of it runs, asks or is
refused; the MCP servers, their state and why one failed; restart a server.

Approval is shown as ``tools.approval.decide`` judges a plain call of the tool (no path
outside the workspace, no command) under the current mode and rules, with its reason:
a command or a path outside the workspace may still ask where the table says "runs".
The rules listed are this workspace's: "always" (kept in our database) and "for this
session".

The MCP part follows the servers as they change: the app calls ``refresh_servers`` from
its own thread when the manager reports a change (and on a timer, for what a report
may miss). ``r`` or the button restarts the selected server, without waiting for it. When the
app's servers are replaced (new settings), the app hands the screen the tools of the new
ones (``show_tools``): the screen open never shows a manager that is gone.

Tool names, server names and a server's reason for failing are the servers' own text: every
cell is a ``Text`` made by ``widgets.outside`` (a ``str`` cell is parsed as markup; ``[/]``
in a server's error raised ``MarkupError``), with control characters visible.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from rich.text import Text
from textual import on
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal
from textual.content import Content
from textual.screen import Screen
from textual.widgets import Button, DataTable, Footer, Static

from hermes_tui.tools.approval import Action, ApprovalRequest, Rule, decide
from hermes_tui.tools.base import Tool, ToolKind
from hermes_tui.tools.mcp import McpManager, McpTool, ServerState, ServerStatus
from hermes_tui.tui.screens.chat_host import ScreenHost
from hermes_tui.tui.widgets.outside import shown, shown_cell

if TYPE_CHECKING:
    from hermes_tui.session.agent import Tools

__all__ = ["ToolsScreen", "approval_of", "server_row"]

SHOWN = {Action.ALLOW: "runs", Action.ASK: "asks", Action.DENY: "refused"}
STATUS_STYLE = {ServerStatus.READY: "green", ServerStatus.STARTING: "yellow", ServerStatus.FAILED: "red",
                ServerStatus.STOPPED: "dim"}


def approval_of(tool: Tool, tools: Tools) -> tuple[str, str]:
    """("runs" | "asks" | "refused", the reason) for a plain call of ``tool`` now."""
    request = ApprovalRequest(tool=tool.name, kind=tool.kind, trust=tool.trust)
    decision = decide(request, mode=tools.mode, rules=tools.all_rules())
    if tool.kind is ToolKind.SHELL and decision.action is Action.ASK:
        # Judged without a command: say what a command's text changes.
        return SHOWN[decision.action], f"{tool.name}: commands ask, but for read-only ones on the allowlist"
    return SHOWN[decision.action], decision.reason


def server_row(state: ServerState) -> tuple[Text, Text, Text, Text, Text]:
    """name, transport, trust, state (styled), detail: the reason, or the tools offered."""
    if state.status is ServerStatus.READY:
        count = len(state.tools)
        detail = f"{count} tool{'s' if count != 1 else ''}"
        if state.startup_ms is not None:
            detail += f", up in {state.startup_ms / 1000:.1f} s"
        if state.notes:
            detail += f"; {len(state.notes)} left out: {state.notes[0]}"
    else:
        detail = state.reason
    return (shown_cell(state.name), shown_cell(state.transport), shown_cell(state.trust),
            Text(state.status.value, style=STATUS_STYLE[state.status]), shown_cell(detail))


class ToolsScreen(Screen[None]):
    DEFAULT_CSS = """
    ToolsScreen {
        background: $background;
        #heading { height: 1; padding: 0 1; background: $panel; text-style: bold; }
        .section { padding: 0 1; margin-top: 1; color: $primary; text-style: bold; }
        #tools { height: 1fr; margin: 0 1; }
        #servers { height: auto; max-height: 12; margin: 0 1; }
        #rules, #no-servers { padding: 0 2; color: $text-muted; height: auto; }
        #bar { height: 1; padding: 0 1; }
        #bar Button { margin-right: 2; }
    }
    """

    BINDINGS = [
        Binding("escape", "close", "Close"),
        Binding("r", "restart", "Restart server"),
    ]

    def __init__(self, tools: Tools) -> None:
        super().__init__()
        self.tools = tools
        self._shown: list[ServerState] | None = None

    @property
    def mcp(self) -> McpManager | None:
        return self.tools.mcp

    def compose(self) -> ComposeResult:
        yield Static(self._heading(), id="heading")
        yield Static("Tools", classes="section")
        yield DataTable(id="tools", cursor_type="row", zebra_stripes=True)
        yield Static("Rules for this workspace", classes="section")
        yield Static("", id="rules", markup=False)
        yield Static("MCP servers", classes="section")
        # Both parts are there; which one shows follows whether there are servers (show_tools).
        yield Static("None configured: add them under mcp_servers: in config.yaml (or in /settings).",
                     id="no-servers", markup=False)
        yield DataTable(id="servers", cursor_type="row")
        with Horizontal(id="bar"):
            yield Button("Restart server (r)", id="restart", compact=True)
        yield Footer()

    def on_mount(self) -> None:
        self.query_one("#tools", DataTable).add_columns("tool", "from", "approval", "why")
        self.query_one("#servers", DataTable).add_columns("server", "transport", "trust", "state", "detail")
        self.set_interval(1.0, self.refresh_servers)
        self._show_parts()
        if self.mcp is not None:
            self.query_one("#servers", DataTable).focus()
        self.refresh_servers()

    def show_tools(self, tools: Tools) -> None:
        """Show ``tools`` from now on (the app's, after its servers were replaced)."""
        self.tools = tools
        self._shown = None
        self.query_one("#heading", Static).update(self._heading())
        self._show_parts()
        self.refresh_servers()

    def _heading(self) -> Content:
        return shown(f"Tools · approval mode: {self.tools.mode.value} · workspace: {self.tools.key}")

    def _show_parts(self) -> None:
        servers = self.mcp is not None
        self.query_one("#no-servers").display = not servers
        self.query_one("#servers").display = servers
        self.query_one("#bar").display = servers

    # --- what it shows -----------------------------------------------------------------
    def refresh_servers(self) -> None:
        """Bring the tables in step with the servers (cheap when nothing changed)."""
        states = self.mcp.states() if self.mcp is not None else []
        if states == self._shown:
            return
        self._shown = states
        self.tools.sync()  # a server that came up or went away: its tools with it
        self._fill_tools()
        table = self.query_one("#servers", DataTable)
        row = table.cursor_row
        table.clear()
        if states:
            for state in states:
                table.add_row(*server_row(state), key=state.name)
            table.move_cursor(row=min(max(row, 0), len(states) - 1))

    def _fill_tools(self) -> None:
        table = self.query_one("#tools", DataTable)
        table.clear()
        for tool in self.tools.registry:
            source = f"MCP {tool.server}" if isinstance(tool, McpTool) else "built-in"
            state, why = approval_of(tool, self.tools)
            table.add_row(shown_cell(tool.name), shown_cell(source), state, shown_cell(why), key=tool.name)  # state: ours
        rules = [f"always {r.action.value}: {r}" for r in self._kept_rules()]
        rules += [f"this session {r.action.value}: {r}" for r in self.tools.session_rules.rules(self.tools.key)]
        self.query_one("#rules", Static).update(shown("\n".join(rules) or "none (answer \"always\" to a prompt to add one)"))

    def _kept_rules(self) -> list[Rule]:
        try:
            return self.tools.rules.rules(self.tools.key)
        except Exception:  # noqa: BLE001 - an unreadable database: the screen still shows the rest
            return []

    def selected_server(self) -> str | None:
        if self.mcp is None or not self._shown:
            return None
        row = self.query_one("#servers", DataTable).cursor_row
        return self._shown[row].name if 0 <= row < len(self._shown) else None

    # --- actions -------------------------------------------------------------------
    def action_restart(self) -> None:
        name = self.selected_server()
        if name is None or self.mcp is None:
            return
        try:
            self.mcp.restart(name)
        except RuntimeError as exc:  # closed: the app is quitting or reconfiguring
            self.notify(str(exc), severity="warning")
            return
        self.notify(f"Restarting {name}…", title="MCP")
        self.refresh_servers()

    @on(Button.Pressed, "#restart")
    def _restart_pressed(self) -> None:
        self.action_restart()

    def action_close(self) -> None:
        self.dismiss(None)


def open_screen(host: ScreenHost) -> ToolsScreen | None:
    """What ``/tools`` opens (``commands.SlashCommand.screen``); None without a chat or with no
    tools for it (the workspace is not a folder)."""
    tools = host.chat_tools()
    return ToolsScreen(tools) if tools is not None else None
