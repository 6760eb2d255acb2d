"""An MCP server for the tests, on the SDK's server API: ``python mcp_server.py stdio`` or
``python mcp_server.py http PORT`` (streamable HTTP on 127.0.0.1, served by uvicorn).

Tools: a read tool, one that fails, a slow one, a large result, an image, the server's
environment, pid and working folder, the HTTP request's headers, one that kills the server in the middle of a call and one
that exits a moment after it answers.
"""

from __future__ import annotations

import base64
import os
import sys
import threading
import time

from mcp.server.mcpserver import Context, MCPServer
from mcp_types import ImageContent, ToolAnnotations

# A 1x1 PNG.
PNG = base64.b64decode(
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNkYPhfDwAChwGA60e6kgAAAABJRU5ErkJggg=="
)

server = MCPServer("hermes-test")


@server.tool(description="Read a note by its key.", annotations=ToolAnnotations(read_only_hint=True))
def read_note(key: str) -> str:
    return f"note {key}: remember the milk"


@server.tool(description="Always fails.")
def fail(reason: str = "broken") -> str:
    raise ValueError(f"it failed: {reason}")


@server.tool(description="Sleeps, then answers.")
def slow(seconds: float) -> str:
    time.sleep(seconds)
    return f"slept {seconds}"


@server.tool(description="A large result.")
def large(kilobytes: int) -> str:
    line = "x" * 99 + "\n"
    return line * (kilobytes * 1024 // 100)


@server.tool(description="An image and a caption.")
def picture() -> list:
    return ["a red pixel", ImageContent(data=base64.b64encode(PNG).decode(), mime_type="image/png")]


@server.tool(description="The server's environment.", annotations=ToolAnnotations(read_only_hint=True))
def environment() -> dict:
    return {"pid": os.getpid(), "cwd": os.getcwd(), "env": dict(os.environ)}


@server.tool(description="The headers of the HTTP request carrying this call (none over stdio).",
             annotations=ToolAnnotations(read_only_hint=True))
def request_headers(ctx: Context) -> dict:
    return {"headers": dict(ctx.headers or {})}


@server.tool(description="Exits the server in the middle of the call.")
def crash() -> str:
    os._exit(3)


@server.tool(description="Answers, then exits a moment later.")
def exit_soon() -> str:
    threading.Timer(0.3, os._exit, (4,)).start()
    return "exiting"


if __name__ == "__main__":
    if sys.argv[1] == "stdio":
        server.run()
    else:
        import uvicorn

        uvicorn.run(server.streamable_http_app(), host="127.0.0.1", port=int(sys.argv[2]), log_level="warning")
