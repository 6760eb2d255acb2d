"""A pass-through HTTP proxy in front of an OpenAI-compatible server that keeps every exchange.

The agent-task benchmark puts it between ``hermes-tui run`` and the model server to see
what the app really sent (the messages of the last request, how large each one was) and
what the server answered (its usage figures, its refusals), without touching the app.
Streams are relayed chunk by chunk, so the app sees the server's own pacing.
"""

from __future__ import annotations

import http.client
import json
import threading
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import urlsplit

# Headers that describe one hop, not the message: never relayed.
HOP_HEADERS = {"connection", "keep-alive", "transfer-encoding", "content-length", "host"}


@dataclass
class Exchange:
    path: str
    request: dict[str, Any] | None
    status: int
    body: bytes

    @property
    def usage(self) -> dict[str, Any] | None:
        """The server's usage figures: the last ``usage`` object in the (streamed) answer."""
        found = None
        for line in self.body.decode("utf-8", "replace").splitlines():
            line = line.removeprefix("data: ").strip()
            if '"usage"' not in line:
                continue
            try:
                usage = json.loads(line).get("usage")
            except (json.JSONDecodeError, AttributeError):
                continue
            if usage:
                found = usage
        return found


@dataclass
class Recording:
    exchanges: list[Exchange] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def chats(self) -> list[Exchange]:
        with self.lock:
            return [e for e in self.exchanges if e.path.endswith("/chat/completions")]


class RecordingProxy:
    def __init__(self, upstream: str) -> None:
        """``upstream``: the server's base, e.g. ``http://127.0.0.1:8080`` (any path is kept)."""
        parts = urlsplit(upstream)
        self.host, self.port = parts.hostname or "127.0.0.1", parts.port or 80
        self.recording = Recording()
        proxy = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: Any) -> None:  # quiet: the benchmark prints its own lines
                pass

            def do_GET(self) -> None:
                proxy._relay(self, "GET")

            def do_POST(self) -> None:
                proxy._relay(self, "POST")

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.thread = threading.Thread(target=self.server.serve_forever, name="recording proxy", daemon=True)

    @property
    def base(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}"

    def start(self) -> RecordingProxy:
        self.thread.start()
        return self

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()

    def _relay(self, handler: BaseHTTPRequestHandler, method: str) -> None:
        length = int(handler.headers.get("Content-Length") or 0)
        body = handler.rfile.read(length) if length else None
        headers = {k: v for k, v in handler.headers.items() if k.lower() not in HOP_HEADERS}
        upstream = http.client.HTTPConnection(self.host, self.port, timeout=3600)
        kept = bytearray()
        status = 502
        try:
            upstream.request(method, handler.path, body=body, headers=headers)
            response = upstream.getresponse()
            status = response.status
            handler.send_response(response.status)
            for key, value in response.getheaders():
                if key.lower() not in HOP_HEADERS:
                    handler.send_header(key, value)
            handler.send_header("Transfer-Encoding", "chunked")
            handler.send_header("Connection", "close")
            handler.end_headers()
            while chunk := response.read1(65536):
                kept += chunk
                handler.wfile.write(b"%x\r\n%s\r\n" % (len(chunk), chunk))
                handler.wfile.flush()
            handler.wfile.write(b"0\r\n\r\n")
        except (ConnectionError, OSError):
            pass  # the app hung up (a cancelled turn) or the server died: kept as far as it went
        finally:
            upstream.close()
            handler.close_connection = True
            try:
                request = json.loads(body) if body else None
            except json.JSONDecodeError:
                request = None
            with self.recording.lock:
                self.recording.exchanges.append(Exchange(handler.path, request, status, bytes(kept)))
