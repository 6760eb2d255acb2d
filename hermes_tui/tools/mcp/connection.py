"""One MCP server's connection: the live part of a server (its session, its stderr log), how
to reach it (a stdio child or a streamable HTTP URL), its tool listing, and a failure told in
one line. The manager runs these on its loop and turns their outcomes into server states."""

from __future__ import annotations

import asyncio
import os
import tempfile
from collections.abc import Mapping
from contextlib import AsyncExitStack
from dataclasses import dataclass, field
from typing import IO, Any

import anyio
import httpx2
import mcp_types as types
from mcp.client.session import ClientSession
from mcp.client.stdio import stdio_client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError
from pydantic import ValidationError

from hermes_tui.config import McpServerConfig

from ..registry import one_line
from .launch import http_headers, stdio_parameters

__all__ = ["LiveServer", "connect", "describe", "innermost", "list_tools", "stderr_size", "stderr_tail"]


@dataclass
class LiveServer:
    """A server's live part; touched only on the manager's loop."""

    name: str
    config: McpServerConfig
    session: ClientSession | None = None
    scope: anyio.CancelScope | None = None
    task: asyncio.Task[None] | None = None
    errlog: IO[str] | None = None
    crash: str | None = None  # set by a call that lost the connection
    lost: asyncio.Event = field(default_factory=asyncio.Event)  # a stdio server's output ended


def innermost(exc: BaseException) -> BaseException:
    """The first failure inside exception groups (a task group wraps what its tasks raise)."""
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    return exc


def stderr_size(errlog: IO[str] | None) -> int:
    try:
        return os.fstat(errlog.fileno()).st_size if errlog is not None else 0
    except (OSError, ValueError):
        return 0


def stderr_tail(errlog: IO[str] | None, since: int = 0) -> str:
    """The last line the server wrote to stderr (after byte ``since``), or ""."""
    if errlog is None:
        return ""
    try:
        # The file is in append mode, so moving our position never moves the server's writes.
        errlog.seek(max(since, stderr_size(errlog) - 4000))
        lines = [line.strip() for line in errlog.read().splitlines() if line.strip()]
    except (OSError, ValueError):
        return ""
    return one_line(lines[-1], 200) if lines else ""


def describe(exc: BaseException) -> str:
    """A server's failure in one line, for its state or a call's error."""
    exc = innermost(exc)
    if isinstance(exc, MCPError):
        if exc.error.code == types.CONNECTION_CLOSED:
            return "the server closed the connection"
        return f"the server answered with an error: {one_line(exc.error.message, 200)}"
    if isinstance(exc, ValidationError):
        return f"the server sent a malformed message ({exc.error_count()} problem(s), first: " \
               f"{one_line(exc.errors()[0]['msg'], 120)})"
    if isinstance(exc, FileNotFoundError):
        return f"command not found: {exc.filename or exc}"
    if isinstance(exc, httpx2.HTTPError):
        return f"HTTP: {type(exc).__name__}: {one_line(str(exc), 200)}"
    message = one_line(str(exc), 200)
    return f"{type(exc).__name__}: {message}" if message else type(exc).__name__


async def connect(server: LiveServer, stack: AsyncExitStack, environ: Mapping[str, str]) -> ClientSession:
    """A session with ``server``: its process spawned (stdio) or its URL reached (http), not yet initialized."""
    config = server.config
    if config.transport == "stdio":
        parameters = stdio_parameters(config, environ)
        # The server's stderr must not reach our terminal (it would draw over the UI);
        # its last line explains a failed start.
        server.errlog = tempfile.TemporaryFile("a+", encoding="utf-8", errors="replace")  # noqa: SIM115 - closed when the server stops
        read, write = await stack.enter_async_context(stdio_client(parameters, errlog=server.errlog))
        read = await _watched(read, server, stack)
    else:
        client = httpx2.AsyncClient(
            headers=http_headers(config, environ),
            timeout=httpx2.Timeout(config.timeout, read=max(config.call_timeout, config.timeout)))
        await stack.enter_async_context(client)
        read, write = await stack.enter_async_context(streamable_http_client(config.url, http_client=client))
    return await stack.enter_async_context(ClientSession(read, write))


async def _watched(read: Any, server: LiveServer, stack: AsyncExitStack) -> Any:
    """``read`` passed through, setting ``server.lost`` when it ends: a stdio server that
    exits while idle shows as failed at once, not at its next call."""
    send, receive = anyio.create_memory_object_stream[Any](0)

    async def forward() -> None:
        async with send:
            async for item in read:
                await send.send(item)
        server.lost.set()

    group = await stack.enter_async_context(anyio.create_task_group())
    stack.callback(group.cancel_scope.cancel)  # on exit, before the group waits for forward()
    group.start_soon(forward)
    return receive


async def list_tools(session: ClientSession) -> list[types.Tool]:
    """Every page of ``tools/list`` (bounded, in case a server pages forever)."""
    listed: list[types.Tool] = []
    cursor: str | None = None
    while True:
        params = types.PaginatedRequestParams(cursor=cursor) if cursor else None
        page = await session.list_tools(params=params)
        listed.extend(page.tools)
        cursor = page.next_cursor
        if not cursor or len(listed) > 10_000:
            return listed
