"""A real HTTP server on 127.0.0.1 that answers ``POST /v1/chat/completions`` slowly.

Each mode sends a reply that would be valid, one byte every ``interval`` seconds, so
that every single read returns quickly while the whole reply takes ``drip_s`` seconds
or more: a client whose timeout bounds each read (not the call) never times out.

* ``json``: headers at once, then a chat completion body dripped;
* ``sse``: headers at once, then an event stream whose chunks arrive dripped;
* ``headers``: the status line and headers themselves dripped;
* ``silent``: headers at once, then nothing (until the client hangs up or teardown).

``hung_up`` is set when the client closed the connection (a write failed, or a read
saw the end), ``finished`` when the whole reply went out (the client waited for all of
it), ``handled`` when the handler has returned.
"""

from __future__ import annotations

import http.server
import json
import socket
import threading
import time

MODES = ("json", "sse", "headers", "silent")


def completion_body(min_bytes: int) -> bytes:
    """A non-streaming chat completion at least ``min_bytes`` long."""
    content = "A summary of the exchange. " * (min_bytes // 27 + 1)
    return json.dumps({
        "id": "chatcmpl-drip",
        "object": "chat.completion",
        "model": "m",
        "choices": [{"index": 0, "message": {"role": "assistant", "content": content}, "finish_reason": "stop"}],
    }).encode()


def stream_body(min_bytes: int) -> bytes:
    """An event stream of chat completion chunks, ``[DONE]`` last, at least ``min_bytes`` long."""
    events = []
    size = 0
    while size < min_bytes:
        chunk = {"id": "chatcmpl-drip", "object": "chat.completion.chunk", "model": "m",
                 "choices": [{"index": 0, "delta": {"content": "word "}, "finish_reason": None}]}
        events.append(f"data: {json.dumps(chunk)}\n\n")
        size += len(events[-1])
    events.append("data: [DONE]\n\n")
    return "".join(events).encode()


class DripServer:
    """``with DripServer("json") as server: ... server.base_url ...``"""

    def __init__(self, mode: str, *, interval: float = 0.5, drip_s: float = 120.0) -> None:
        assert mode in MODES, mode
        self.mode = mode
        self.interval = interval
        self.min_bytes = int(drip_s / interval) + 1
        self.requests = 0
        self.hung_up = threading.Event()
        self.finished = threading.Event()
        self.handled = threading.Event()
        self.release = threading.Event()  # set at teardown: every handler returns
        server = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def log_message(self, *args) -> None:
                pass

            def do_POST(self) -> None:
                self.rfile.read(int(self.headers.get("Content-Length", 0)))
                server.requests += 1
                try:
                    server._reply(self)
                except (BrokenPipeError, ConnectionResetError):
                    server.hung_up.set()
                finally:
                    server.handled.set()

        class Server(http.server.ThreadingHTTPServer):
            daemon_threads = True
            block_on_close = False

        self._server = Server(("127.0.0.1", 0), Handler)
        self.base_url = f"http://127.0.0.1:{self._server.server_address[1]}/v1"
        self._thread = threading.Thread(
            target=self._server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True,
            name="drip-server",
        )

    def __enter__(self) -> DripServer:
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.release.set()
        self._server.shutdown()
        self._server.server_close()

    # -- replies ------------------------------------------------------------------

    def _reply(self, handler: http.server.BaseHTTPRequestHandler) -> None:
        if self.mode == "sse":
            head, body = self._head("text/event-stream", None), stream_body(self.min_bytes)
        elif self.mode == "silent":
            head, body = self._head("application/json", 100), b""
        else:
            body = completion_body(self.min_bytes)
            head = self._head("application/json", len(body))
        if self.mode == "headers":
            self._drip(handler, head + body)
        else:
            handler.wfile.write(head)
            handler.wfile.flush()
            if self.mode == "silent":
                self._wait_for_hang_up(handler)
                return
            self._drip(handler, body)
        self.finished.set()

    @staticmethod
    def _head(content_type: str, length: int | None) -> bytes:
        lines = ["HTTP/1.0 200 OK", f"Content-Type: {content_type}"]
        if length is not None:
            lines.append(f"Content-Length: {length}")
        return ("\r\n".join(lines) + "\r\n\r\n").encode()

    def _drip(self, handler, data: bytes) -> None:
        for i in range(len(data)):
            if self.release.wait(self.interval):
                return
            handler.wfile.write(data[i : i + 1])
            handler.wfile.flush()

    def _wait_for_hang_up(self, handler) -> None:
        """Send nothing; notice the client closing its end (the read sees EOF)."""
        sock: socket.socket = handler.connection
        sock.settimeout(0.05)
        while not self.release.is_set():
            try:
                if sock.recv(1) == b"":
                    self.hung_up.set()
                    return
            except TimeoutError:
                continue
            except OSError:
                self.hung_up.set()
                return


def wait_until(predicate, limit: float = 10.0) -> bool:
    end = time.monotonic() + limit
    while not predicate():
        if time.monotonic() > end:
            return False
        time.sleep(0.01)
    return True
