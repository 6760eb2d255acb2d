"""A scripted OpenAI-compatible endpoint on 127.0.0.1: each request gets the reply a test sets."""

from __future__ import annotations

import http.server
import json
import socket
import threading
from collections.abc import Callable


class FakeEndpoint:
    """A stdlib HTTP server in a thread; ``reply`` decides what each POST gets."""

    def __init__(self) -> None:
        self.reply: Callable[[http.server.BaseHTTPRequestHandler], None] = lambda h: None
        self.requests: list[dict] = []
        self.release = threading.Event()  # set at teardown to wake sleeping handlers
        endpoint = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def log_message(self, *args) -> None:
                pass

            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length", 0))
                endpoint.requests.append(
                    {
                        "path": self.path,
                        "headers": {k.lower(): v for k, v in self.headers.items()},
                        "body": json.loads(self.rfile.read(length)),
                    }
                )
                try:
                    endpoint.reply(self)
                except (BrokenPipeError, ConnectionResetError):
                    pass  # the client hung up (cancel, timeout): expected

        class Server(http.server.ThreadingHTTPServer):
            daemon_threads = True
            block_on_close = False

        self.server = Server(("127.0.0.1", 0), Handler)
        self.base_url = f"http://127.0.0.1:{self.server.server_address[1]}/v1"
        self.thread = threading.Thread(
            target=self.server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
        )
        self.thread.start()

    def close(self) -> None:
        self.release.set()
        self.server.shutdown()
        self.server.server_close()


def send(handler, status: int, body: bytes, content_type: str = "application/json") -> None:
    handler.send_response(status)
    handler.send_header("Content-Type", content_type)
    handler.send_header("Content-Length", str(len(body)))
    handler.end_headers()
    handler.wfile.write(body)


def chunk(content: str | None = None, finish_reason: str | None = None) -> dict:
    delta = {"role": "assistant"} if content is None else {"content": content}
    return {
        "id": "chatcmpl-1",
        "object": "chat.completion.chunk",
        "model": "m",
        "choices": [{"index": 0, "delta": delta, "finish_reason": finish_reason}],
    }


def usage_chunk(prompt: int, completion: int, cached: int | None = None) -> dict:
    usage: dict = {"prompt_tokens": prompt, "completion_tokens": completion, "total_tokens": prompt + completion}
    if cached is not None:
        usage["prompt_tokens_details"] = {"cached_tokens": cached}
    return {"id": "chatcmpl-1", "object": "chat.completion.chunk", "choices": [], "usage": usage}


def start_stream(handler) -> None:
    """Headers of an HTTP/1.0 event stream: the body ends when the connection closes."""
    handler.send_response(200)
    handler.send_header("Content-Type", "text/event-stream")
    handler.end_headers()


def event(handler, data: object) -> None:
    text = data if isinstance(data, str) else json.dumps(data)
    handler.wfile.write(f"data: {text}\n\n".encode())
    handler.wfile.flush()


def sse_reply(*events: object) -> Callable:
    def reply(handler) -> None:
        start_stream(handler)
        for data in events:
            event(handler, data)

    return reply


def hang_up(handler) -> None:
    handler.close_connection = True
    handler.connection.shutdown(socket.SHUT_RDWR)
