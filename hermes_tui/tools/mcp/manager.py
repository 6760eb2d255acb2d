"""The MCP servers of a session: started in the background, their tools offered as ``Tool``s.

``McpManager`` runs every server on one asyncio loop in its own thread, so the sync tool
loop (a worker thread) and the UI can both use it without waiting for a server. Each
server goes ``starting`` → ``ready`` or ``failed(reason)``, and ``stopped`` when closed.
Starting (spawn or connect, ``initialize``, ``tools/list``) is bounded by the server's
``timeout``; a server that exits, crashes or hangs is recorded with a one-line reason and
nothing else waits for it. A crash during a call fails that call and the server.

A server's tools become ``McpTool``s named ``server__tool``, after its allow/deny list,
each schema checked as a built-in's is (a tool the registry refuses is left out, with a
note). ``sync(registry)`` puts the ready servers' tools into a ``ToolRegistry``;
``on_change`` is called whenever a server's state changes, from the manager's thread (or
the one calling ``restart``): a UI hands it over to its own thread.

Approval follows the server's ``trust``: ``ask`` asks before every call (unless an
"always" rule allows it); ``read-only`` runs unasked only the tools the server marks
``readOnlyHint`` (and lets them run in read-only mode), asking for the rest; ``trusted``
runs every tool unasked (read-only mode still refuses those not marked read-only).

How a server is reached, listed and its failures told is :mod:`.connection`.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import fnmatch
import itertools
import logging
import os
import threading
import time
import weakref
from collections.abc import Callable, Iterable, Mapping
from contextlib import AsyncExitStack
from dataclasses import dataclass
from enum import Enum
from typing import Any

import anyio
import mcp_types as types
from mcp.shared.exceptions import MCPError
from pydantic import ValidationError

from hermes_tui.config import McpServerConfig

from ..base import Tool, ToolContext, ToolKind, ToolResult, Trust
from ..registry import ToolRegistry, one_line
from .connection import (
    LiveServer,
    connect,
    describe,
    innermost,
    list_tools,
    stderr_size,
    stderr_tail,
)
from .launch import LaunchError
from .names import namespaced
from .results import to_tool_result

log = logging.getLogger(__name__)

MAX_DESCRIPTION = 1024  # a server's description is untrusted text sent with every request
CLOSE_TIMEOUT_S = 10.0  # the SDK stops a stdio server within ~4 s (stdin closed, TERM, KILL)
_POLL_S = 0.05


class ServerStatus(str, Enum):
    STARTING = "starting"
    READY = "ready"
    FAILED = "failed"
    STOPPED = "stopped"


@dataclass(frozen=True)
class ServerState:
    """One server as the status bar and ``/tools`` show it."""

    name: str
    transport: str  # stdio | http
    trust: str
    status: ServerStatus
    reason: str = ""  # for failed: why, one line
    tools: tuple[str, ...] = ()  # the names offered to the model
    notes: tuple[str, ...] = ()  # tools left out, and why
    startup_ms: float | None = None

    def line(self) -> str:
        if self.status is ServerStatus.READY:
            count = len(self.tools)
            return f"{self.name}: ready, {count} tool{'s' if count != 1 else ''}"
        if self.status is ServerStatus.FAILED:
            return f"{self.name}: failed: {self.reason}"
        return f"{self.name}: {self.status.value}"


class McpTool(Tool):
    """One tool of one MCP server; ``run`` is a ``tools/call`` through the manager."""

    kind = ToolKind.EXTERNAL

    def __init__(self, manager: McpManager, server: str, remote: types.Tool, name: str, trust: Trust) -> None:
        self.name = name  # type: ignore[misc]
        self.server = server
        self.remote_name = remote.name
        text = remote.description or remote.title or remote.name
        self.description = one_line(text, MAX_DESCRIPTION)  # type: ignore[misc]
        self.parameters = remote.input_schema  # type: ignore[misc]
        self.trust = trust  # type: ignore[misc]
        self.read_only_hint = bool(remote.annotations and remote.annotations.read_only_hint)
        self._manager = manager

    def run(self, arguments: dict[str, Any], context: ToolContext) -> ToolResult:
        return self._manager.call(self.server, self.remote_name, arguments, cancel=context.cancel)


def _tool_trust(server_trust: str, read_only_hint: bool) -> Trust:
    if read_only_hint and server_trust in ("read-only", "trusted"):
        return Trust.READ
    return Trust.RUN if server_trust == "trusted" else Trust.ASK


def _allowed(name: str, config: McpServerConfig) -> bool:
    def listed(patterns: Iterable[str]) -> bool:
        return any(fnmatch.fnmatchcase(name, p) for p in patterns)

    allow = config.tools.allow
    return (allow is None or listed(allow)) and not listed(config.tools.deny)


class McpManager:
    """Every configured MCP server of a session; see the module docstring."""

    def __init__(self, servers: Mapping[str, McpServerConfig], *, environ: Mapping[str, str] | None = None,
                 on_change: Callable[[ServerState], None] | None = None) -> None:
        self._configs = dict(servers)
        self._environ = dict(os.environ if environ is None else environ)
        self._on_change = on_change
        self._lock = threading.Lock()
        self._states: dict[str, ServerState] = {}
        self._tools: dict[str, list[McpTool]] = {}
        self._synced: weakref.WeakKeyDictionary[ToolRegistry, set[str]] = weakref.WeakKeyDictionary()
        self._live: dict[str, LiveServer] = {}
        self._calls: dict[int, anyio.CancelScope] = {}
        self._call_ids = itertools.count()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._closed = False
        for name, config in self._configs.items():
            self._states[name] = ServerState(name, config.transport, config.trust, ServerStatus.STOPPED,
                                             reason="" if config.enabled else "disabled")

    # --- lifecycle (any thread) -------------------------------------------------------

    def start(self) -> None:
        """Start every enabled server in the background; returns at once."""
        for name, config in self._configs.items():
            if config.enabled:
                self.restart(name)

    def restart(self, name: str) -> None:
        """Stop ``name`` if it runs and start it again (also a disabled or failed one)."""
        if name not in self._configs:
            raise KeyError(name)
        if self._closed:
            raise RuntimeError("the MCP manager is closed")
        if self._loop is None:
            self._loop = asyncio.new_event_loop()
            self._thread = threading.Thread(target=self._loop.run_forever, name="mcp", daemon=True)
            self._thread.start()
        self._publish(name, ServerStatus.STARTING)
        asyncio.run_coroutine_threadsafe(self._restart(name), self._loop)

    def update(self, servers: Mapping[str, McpServerConfig]) -> None:
        """Take a new set of servers, touching only what changed; returns at once.

        A server whose config is the same keeps running as it is (its process, its state,
        calls in flight); an added or changed one starts (a changed one is stopped first);
        a removed one stops and is forgotten; a disabled one stops and shows as disabled.
        """
        if self._closed:
            raise RuntimeError("the MCP manager is closed")
        new = dict(servers)
        with self._lock:  # states() and tools() read the configs and the states together
            old, self._configs = self._configs, new
            for name in old.keys() - new.keys():
                self._states.pop(name, None)
                self._tools.pop(name, None)
            changed = [name for name, config in new.items() if old.get(name) != config]
            for name in changed:
                config = new[name]
                self._states[name] = ServerState(name, config.transport, config.trust, ServerStatus.STOPPED,
                                                 reason="" if config.enabled else "disabled")
                self._tools[name] = []
        if self._loop is not None:
            for name in old:
                if name not in new or (name in changed and not new[name].enabled):
                    asyncio.run_coroutine_threadsafe(self._retire(name), self._loop)
        for name in changed:
            if new[name].enabled:
                self.restart(name)  # stops the one of the old config first
        for name in changed:
            if not new[name].enabled and self._on_change is not None:
                self._on_change(self.state(name))

    def wait(self, names: Iterable[str] | None = None, timeout: float | None = None) -> bool:
        """Block until none of ``names`` (default: all) is starting; False on timeout."""
        wanted = list(self._configs) if names is None else list(names)
        deadline = None if timeout is None else time.monotonic() + timeout
        while any(self.state(n).status is ServerStatus.STARTING for n in wanted):
            if deadline is not None and time.monotonic() >= deadline:
                return False
            time.sleep(_POLL_S)
        return True

    def close(self, timeout: float = CLOSE_TIMEOUT_S) -> None:
        """Stop every server (children ended and reaped) and the manager's thread."""
        if self._closed:
            return
        self._closed = True
        if self._loop is None:
            return
        future = asyncio.run_coroutine_threadsafe(self._stop_all(), self._loop)
        try:
            future.result(timeout)
        except Exception as exc:  # noqa: BLE001 - a timeout or a server's own failure: quit anyway
            log.warning("MCP servers did not all stop within %.0f s: %s", timeout, exc)
        self._loop.call_soon_threadsafe(self._loop.stop)
        if self._thread is not None:
            self._thread.join(timeout)
        if not self._loop.is_running():
            self._loop.close()

    def __enter__(self) -> McpManager:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # --- what the UI and the loop read (any thread) -----------------------------------

    def names(self) -> list[str]:
        return list(self._configs)

    def state(self, name: str) -> ServerState:
        with self._lock:
            return self._states[name]

    def states(self) -> list[ServerState]:
        with self._lock:
            return [self._states[name] for name in self._configs]

    def summary(self) -> str:
        """One short line for the status bar, e.g. ``MCP 2/3 ready, 1 failed``; "" with no servers."""
        states = [s for s in self.states() if s.reason != "disabled" or s.status is not ServerStatus.STOPPED]
        if not states:
            return ""
        count = {status: sum(s.status is status for s in states) for status in ServerStatus}
        text = f"MCP {count[ServerStatus.READY]}/{len(states)} ready"
        extra = [f"{count[st]} {st.value}" for st in (ServerStatus.STARTING, ServerStatus.FAILED) if count[st]]
        return ", ".join([text, *extra])

    def tools(self) -> list[McpTool]:
        """The tools of the servers that are ready, in config order."""
        with self._lock:
            return [tool for name in self._configs for tool in self._tools.get(name, ())]

    def sync(self, registry: ToolRegistry) -> None:
        """Make ``registry`` hold exactly the ready servers' tools (besides its own)."""
        wanted = {tool.name: tool for tool in self.tools()}
        mine = self._synced.setdefault(registry, set())  # the names this manager put there
        for name in list(mine):
            if name not in wanted or registry.get(name) is not wanted[name]:
                registry.unregister(name)
                mine.discard(name)
        for name, tool in wanted.items():
            if name not in mine and name not in registry:
                registry.register(tool)  # checked when the server was listed
                mine.add(name)

    def call(self, server: str, tool: str, arguments: dict[str, Any],
             cancel: threading.Event | None = None) -> ToolResult:
        """``tools/call`` on ``server``, from any thread but the manager's; one result always."""
        if server not in self._configs:  # removed by ``update`` after the model was offered its tools
            return ToolResult.error(f"MCP server {server} is no longer configured")
        state = self.state(server)
        if state.status is not ServerStatus.READY or self._loop is None or self._closed:
            why = f": {state.reason}" if state.reason else ""
            return ToolResult.error(f"MCP server {server} is not running ({state.status.value}{why})")
        call_id = next(self._call_ids)
        future = asyncio.run_coroutine_threadsafe(self._call(server, tool, arguments, call_id), self._loop)
        # The SDK times the call out itself; this bound only covers a loop that stopped answering.
        deadline = time.monotonic() + self._configs[server].call_timeout + CLOSE_TIMEOUT_S
        while True:
            try:
                return future.result(_POLL_S)
            except concurrent.futures.TimeoutError:
                pass
            except concurrent.futures.CancelledError:
                return ToolResult.stopped()
            if cancel is not None and cancel.is_set():
                self._loop.call_soon_threadsafe(self._cancel_call, call_id)
                cancel = None  # asked once; the result (stopped) follows
            if time.monotonic() > deadline:
                future.cancel()
                return ToolResult.error(f"{server}: no answer from the MCP client; the call was abandoned")

    # --- on the loop ----------------------------------------------------------------

    def _publish(self, name: str, status: ServerStatus, *, reason: str = "", tools: list[McpTool] | None = None,
                 notes: tuple[str, ...] = (), startup_ms: float | None = None) -> None:
        config = self._configs.get(name)
        if config is None:
            return  # removed by ``update``: nothing shows it any more
        state = ServerState(name, config.transport, config.trust, status, one_line(reason, 300),
                            tuple(t.name for t in tools or ()), notes, startup_ms)
        with self._lock:
            if name not in self._configs:
                return
            self._states[name] = state
            self._tools[name] = list(tools or ())
        if self._on_change is not None:
            try:
                self._on_change(state)
            except Exception:
                log.exception("MCP state listener failed")

    async def _restart(self, name: str) -> None:
        old = self._live.pop(name, None)  # it no longer speaks for the server's state
        if old is not None:
            await self._stop(old)
        server = LiveServer(name, self._configs[name])
        self._live[name] = server
        server.task = asyncio.ensure_future(self._serve(server))

    async def _stop(self, server: LiveServer) -> None:
        if server.scope is not None:
            server.scope.cancel()
        elif server.task is not None:
            server.task.cancel()  # not started yet: its body (and its finally) never runs
        if server.task is not None:
            await asyncio.gather(server.task, return_exceptions=True)
        with self._lock:
            starting = server.name in self._states and self._states[server.name].status is ServerStatus.STARTING
        if server.scope is None and starting:
            self._publish(server.name, ServerStatus.STOPPED)

    async def _retire(self, name: str) -> None:
        """Stop the server ``update`` removed or disabled; a disabled one shows so once stopped
        (it may have come up while this waited for the loop)."""
        server = self._live.pop(name, None)
        if server is not None:
            await self._stop(server)
        config = self._configs.get(name)
        if config is not None and not config.enabled and name not in self._live:
            self._publish(name, ServerStatus.STOPPED, reason="disabled")

    async def _stop_all(self) -> None:
        for scope in list(self._calls.values()):
            scope.cancel()
        await asyncio.gather(*(self._stop(s) for s in list(self._live.values())), return_exceptions=True)

    async def _serve(self, server: LiveServer) -> None:
        name, config = server.name, server.config
        started = time.monotonic()
        outcome: tuple[ServerStatus, str] = (ServerStatus.STOPPED, "")
        try:
            with anyio.CancelScope() as scope:
                server.scope = scope
                async with AsyncExitStack() as stack:
                    session = await connect(server, stack, self._environ)
                    try:
                        with anyio.fail_after(config.timeout):
                            await session.initialize()
                            listed = await list_tools(session)
                    except TimeoutError:
                        raise LaunchError(f"no answer within {config.timeout:g} s (initialize, tools/list)") from None
                    tools, notes = self._expose(name, listed)
                    server.session = session
                    self._publish(name, ServerStatus.READY, tools=tools, notes=notes,
                                  startup_ms=(time.monotonic() - started) * 1000)
                    await server.lost.wait()
                    tail = stderr_tail(server.errlog)
                    outcome = (ServerStatus.FAILED, "exited" + (f": {tail}" if tail else ""))
        except asyncio.CancelledError:
            pass  # stopped before it entered its scope
        except BaseException as exc:  # noqa: BLE001 - a server's failure is a state, never a crash of ours
            leaf = innermost(exc)
            if isinstance(leaf, LaunchError):
                reason = str(leaf)
            else:
                reason = describe(leaf)
                if isinstance(leaf, MCPError) and leaf.error.code == types.CONNECTION_CLOSED:
                    reason = "exited during startup" if config.transport == "stdio" else reason
                tail = stderr_tail(server.errlog)
                reason = f"{reason}: {tail}" if tail else reason
            outcome = (ServerStatus.FAILED, reason)
        finally:
            server.session = None
            if server.crash is not None:
                outcome = (ServerStatus.FAILED, server.crash)
            if server.errlog is not None:
                server.errlog.close()
            if self._live.get(name) is server:
                self._publish(name, outcome[0], reason=outcome[1])

    def _expose(self, server: str, listed: list[types.Tool]) -> tuple[list[McpTool], tuple[str, ...]]:
        config = self._configs[server]
        with self._lock:
            taken = {t.name for other, tools in self._tools.items() if other != server for t in tools}
        checker = ToolRegistry()
        tools, notes = [], []
        for remote in listed:
            if not _allowed(remote.name, config):
                continue
            read_only = bool(remote.annotations and remote.annotations.read_only_hint)
            tool = McpTool(self, server, remote, namespaced(server, remote.name, taken),
                           _tool_trust(config.trust, read_only))
            try:
                checker.register(tool)
            except ValueError as exc:
                notes.append(f"{one_line(remote.name, 64)} left out: {one_line(str(exc), 200)}")
                continue
            tools.append(tool)
        return tools, tuple(notes)

    def _cancel_call(self, call_id: int) -> None:
        scope = self._calls.get(call_id)
        if scope is not None:
            scope.cancel()

    async def _call(self, name: str, tool: str, arguments: dict[str, Any], call_id: int) -> ToolResult:
        server = self._live.get(name)
        session = server.session if server is not None else None
        if server is None or session is None:
            return ToolResult.error(f"MCP server {name} is not running")
        timeout = server.config.call_timeout
        stderr_before = stderr_size(server.errlog)
        with anyio.CancelScope() as scope:
            self._calls[call_id] = scope
            try:
                result = await session.call_tool(tool, arguments, read_timeout_seconds=timeout)
            except MCPError as exc:
                if exc.error.code == types.REQUEST_TIMEOUT:
                    return ToolResult.error(f"{name}: {tool} gave no answer within {timeout:g} s")
                if exc.error.code == types.CONNECTION_CLOSED:
                    tail = stderr_tail(server.errlog, stderr_before)
                    server.crash = "crashed during a call to " + tool + (f": {tail}" if tail else "")
                    if self._live.get(name) is server:  # now, not after its cleanup
                        self._publish(name, ServerStatus.FAILED, reason=server.crash)
                    if server.scope is not None:
                        server.scope.cancel()
                    return ToolResult.error(f"{name}: the MCP server stopped during the call (it crashed?); "
                                            f"it is marked failed and can be restarted")
                return ToolResult.error(f"{name}: {one_line(exc.error.message, 300)}")
            except ValidationError as exc:
                return ToolResult.error(f"{name}: {tool} returned a malformed result "
                                        f"({one_line(exc.errors()[0]['msg'], 160)})")
            except Exception as exc:  # noqa: BLE001 - the SDK's checks (output schema, result kinds)
                return ToolResult.error(f"{name}: {tool} failed: {describe(exc)}")
            finally:
                self._calls.pop(call_id, None)
        if scope.cancelled_caught:
            return ToolResult.stopped()
        return to_tool_result(result)
