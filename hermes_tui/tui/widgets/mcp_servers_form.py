"""The settings screen's MCP servers: one row per server (enabled switch, remove), and a line to
add a stdio server (a command line) or a streamable HTTP one (a URL).

Nothing is written here: ``changes()`` gives what the form changed as dotted config changes
(``mcp_servers.NAME.enabled``, ``mcp_servers.NAME`` = a new entry or ``REMOVE``), which the
screen saves with the rest through ``config.edit``, so the user's comments stay. What a row
cannot edit (env, headers, trust, tool lists) is kept as it is in the file.
"""

from __future__ import annotations

import shlex
from typing import Any

from textual import on
from textual.app import ComposeResult
from textual.containers import Horizontal, Vertical
from textual.message import Message
from textual.widgets import Button, Input, Label, Static, Switch

from hermes_tui.config import SERVER_NAME, McpServerConfig
from hermes_tui.config.edit import REMOVE
from hermes_tui.config.schema import ValidationError

__all__ = ["McpServersForm", "new_server"]


def new_server(name: str, target: str) -> dict[str, Any]:
    """The config entry for a server added as ``target`` (a URL or a command line); raises
    ValueError with the one line to show."""
    name, target = name.strip(), target.strip()
    if not SERVER_NAME.fullmatch(name):
        raise ValueError(f"server name {name!r}: use 1-32 letters, digits, _ or -")
    if not target:
        raise ValueError(f"{name}: give a command line (stdio) or an http(s):// URL")
    if target.startswith(("http://", "https://")):
        entry: dict[str, Any] = {"url": target}
    else:
        try:
            words = shlex.split(target)
        except ValueError as exc:
            raise ValueError(f"{name}: the command line does not parse: {exc}") from None
        entry = {"command": words[0], "args": words[1:]} if words[1:] else {"command": words[0]}
    try:
        McpServerConfig.model_validate(entry)
    except ValidationError as exc:
        raise ValueError(f"{name}: {exc.errors()[0]['msg']}") from None
    return entry


def _target(server: McpServerConfig) -> str:
    if server.transport == "http":
        return server.url
    return shlex.join([server.command, *server.args])


class McpServersForm(Vertical):
    DEFAULT_CSS = """
    McpServersForm {
        height: auto;
        .mcp-row { height: 1; }
        .mcp-row.-removed { display: none; }
        .mcp-name { width: 20; padding-right: 1; }
        .mcp-target { width: 1fr; color: $text-muted; text-wrap: nowrap; text-overflow: ellipsis; }
        .mcp-row Switch { height: 1; border: none; padding: 0; background: transparent; }
        .mcp-row Button, #mcp-add { margin-left: 2; }
        #mcp-new { height: 1; margin-top: 1; }
        #mcp-new-name { width: 20; }
        #mcp-new-target { width: 1fr; }
        #mcp-error { color: $error; height: auto; display: none; }
        #mcp-error.-shown { display: block; }
    }
    """

    class Changed(Message):
        """A server was added or removed (the screen's "modified" mark follows)."""

    def __init__(self, servers: dict[str, McpServerConfig], **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.servers = dict(servers)
        self.added: dict[str, dict[str, Any]] = {}
        self.removed: set[str] = set()

    def compose(self) -> ComposeResult:
        for name, server in self.servers.items():
            yield self._row(name, _target(server), server.enabled)
        with Horizontal(id="mcp-new"):
            yield Input(placeholder="name", id="mcp-new-name", compact=True)
            yield Input(placeholder="command and arguments, or an http(s):// URL", id="mcp-new-target",
                        compact=True)
            yield Button("Add server", id="mcp-add", compact=True)
        yield Static("", id="mcp-error", markup=False)

    def _row(self, name: str, target: str, enabled: bool) -> Horizontal:
        return Horizontal(
            Label(name, classes="mcp-name", markup=False),
            Static(target, classes="mcp-target", markup=False),
            Switch(enabled, id=f"mcp-enabled-{name}", animate=False),
            Button("Remove", id=f"mcp-remove-{name}", compact=True),
            classes="mcp-row", id=f"mcp-row-{name}",
        )

    # --- what changed ---------------------------------------------------------------
    def changes(self) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for name, server in self.servers.items():
            if name in self.removed:
                out[f"mcp_servers.{name}"] = REMOVE
                continue
            enabled = self.query_one(f"#mcp-enabled-{name}", Switch).value
            if enabled != server.enabled:
                out[f"mcp_servers.{name}.enabled"] = enabled
        for name, entry in self.added.items():
            enabled = self.query_one(f"#mcp-enabled-{name}", Switch).value
            out[f"mcp_servers.{name}"] = entry if enabled else {**entry, "enabled": False}
        return out

    # --- editing ----------------------------------------------------------------------
    @on(Button.Pressed, "#mcp-add")
    @on(Input.Submitted, "#mcp-new-name, #mcp-new-target")
    async def add(self, event: Message | None = None) -> None:
        if event is not None:
            event.stop()
        name_input = self.query_one("#mcp-new-name", Input)
        target_input = self.query_one("#mcp-new-target", Input)
        name = name_input.value.strip()
        error = self.query_one("#mcp-error", Static)
        try:
            if name in self.added or name in self.servers:
                raise ValueError(f"a server named {name} is configured already (removed: save first)")
            entry = new_server(name, target_input.value)
        except ValueError as exc:
            error.update(str(exc))
            error.add_class("-shown")
            return
        error.remove_class("-shown")
        self.added[name] = entry
        shown = entry.get("url") or shlex.join([entry["command"], *entry.get("args", [])])
        await self.mount(self._row(name, shown, True), before=self.query_one("#mcp-new"))
        name_input.value = target_input.value = ""
        self.post_message(self.Changed())

    @on(Button.Pressed, ".mcp-row Button")
    async def remove_server(self, event: Button.Pressed) -> None:
        event.stop()
        name = (event.button.id or "").removeprefix("mcp-remove-")
        if name in self.added:
            del self.added[name]
            await self.query_one(f"#mcp-row-{name}").remove()
        else:
            self.removed.add(name)
            self.query_one(f"#mcp-row-{name}").add_class("-removed")
        self.post_message(self.Changed())
