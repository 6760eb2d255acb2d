"""The app with MCP servers under test: real servers (tests/support/mcp_server.py over stdio or
streamable HTTP, tests/support/mcp_faulty_server.py), the scripted OpenAI-compatible model, and
reading what the app and its store hold afterwards."""

from __future__ import annotations

import socket
import subprocess
import sys
import time
from pathlib import Path

from hermes_tui.config import Config
from hermes_tui.providers.extractive.summarizer import ExtractiveSummarizer
from hermes_tui.providers.openai.chat import OpenAIChatClient
from hermes_tui.store import Store
from hermes_tui.tools.mcp import ServerStatus
from hermes_tui.tui.app import HermesApp
from hermes_tui.tui.screens.tools import ToolsScreen
from hermes_tui.tui.widgets.status_bar import StatusBar
from support.chat_app import until
from support.servers import free_port

SUPPORT = Path(__file__).resolve().parent
MCP_SERVER = str(SUPPORT / "mcp_server.py")
FAULTY = str(SUPPORT / "mcp_faulty_server.py")
WAIT_S = 90.0  # bounds a hang only: Python servers start in seconds on a loaded machine
SIZE = (120, 36)


def start_http_mcp(log_path: Path) -> tuple[subprocess.Popen, str]:
    """mcp_server.py over streamable HTTP on a free port, once it accepts connections: (process, url)."""
    port = free_port()
    with log_path.open("w") as log:
        process = subprocess.Popen([sys.executable, MCP_SERVER, "http", str(port)], stdout=log, stderr=log,
                                   stdin=subprocess.DEVNULL)
    deadline = time.monotonic() + WAIT_S
    while True:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return process, f"http://127.0.0.1:{port}/mcp"
        except OSError:
            if process.poll() is not None or time.monotonic() > deadline:
                process.kill()
                raise AssertionError(f"the HTTP MCP server did not start: {log_path.read_text()[-2000:]}") from None
            time.sleep(0.1)


def stdio_server(*args: str, **settings) -> dict:
    return {"command": sys.executable, "args": [MCP_SERVER, "stdio", *args], **settings}


def faulty_server(mode: str, **settings) -> dict:
    return {"command": sys.executable, "args": [FAULTY, mode], **settings}


def mcp_config(base_url: str, workspace: Path, servers: dict[str, dict], *, approval: str = "ask") -> Config:
    config = Config().with_overrides({
        "model.provider": "openai-api", "model.model": "scripted", "model.base_url": base_url,
        "model.context_length": 32768, "auxiliary.compression.provider": "extractive",
        "agent.workspace": str(workspace), "agent.approval": approval,
    })
    return Config.model_validate({**config.model_dump(), "mcp_servers": servers})


def with_servers(config: Config, servers: dict[str, dict]) -> Config:
    return Config.model_validate({**config.model_dump(), "mcp_servers": servers})


def make_app(store: Store, base_url: str, workspace: Path, servers: dict[str, dict], *,
             approval: str = "ask") -> HermesApp:
    config = mcp_config(base_url, workspace, servers, approval=approval)
    chat = OpenAIChatClient(base_url, "scripted", api_key=None)
    return HermesApp(config, store, chat=chat, summarizer=ExtractiveSummarizer(), reply_tokens=64,
                     config_path=workspace.parent / "config.yaml")


async def started(pilot, app: HermesApp) -> None:
    """The app's MCP manager exists (it starts after the first frame, once the SDK is imported)."""
    await until(pilot, lambda: app.mcp_host.manager is not None, "the MCP servers to be started", WAIT_S)


async def ready(pilot, app: HermesApp, *names: str) -> None:
    await started(pilot, app)
    await until(pilot, lambda: all(app.mcp_host.manager.state(n).status is not ServerStatus.STARTING for n in names),
                f"servers {names} to start", WAIT_S)
    for name in names:
        state = app.mcp_host.manager.state(name)
        assert state.status is ServerStatus.READY, state.line()


async def type_message(pilot, text: str) -> None:
    """Type ``text`` into the composer key by key, then Enter."""
    pilot.app.screen.query_one("Composer").focus()
    await pilot.press(*text, "enter")


def tool_results(app: HermesApp) -> dict[str, str]:
    session = app.chat_screen.session
    with session.lock:
        return {m.tool_call_id: m.content for m in session.conv.messages if m.role == "tool"}


def stored_results(store: Store, session_id: str) -> dict[str, str]:
    return {m.tool_call_id: m.content for m in store.load_active(session_id) if m.role == "tool"}


def children_of(pid: int) -> dict[int, str]:
    """pid -> state letter of ``pid``'s child processes, read from /proc (zombies included)."""
    found = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        state, ppid = stat.rsplit(")", 1)[1].split()[:2]
        if int(ppid) == pid:
            found[int(entry.name)] = state
    return found


async def open_tools(pilot, app: HermesApp) -> ToolsScreen:
    app.run_slash("/tools")
    await until(pilot, lambda: isinstance(app.screen, ToolsScreen) and app.screen.query("#servers")
                and app.screen.query_one("#servers").row_count > 0, "the tools screen")
    return app.screen


def bar(app: HermesApp) -> StatusBar:
    return app.chat_screen.query_one(StatusBar)
