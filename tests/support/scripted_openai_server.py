"""An OpenAI-compatible chat endpoint that answers from a script, run as a subprocess.

    python tests/scripted_openai_server.py SCRIPT.json REQUESTS.jsonl

It listens on a free port of 127.0.0.1, prints ``PORT <n>`` on stdout once it is
serving, and answers each ``POST /v1/chat/completions`` with the script's next reply
(the last one again when the script runs out). ``GET /v1/models`` lists one model,
``MODEL_ID``, as a model server does. Every request body is appended to
REQUESTS.jsonl (one JSON line, written before the reply goes out).

A reply in the script is one of:

* ``{"status": 400, "error": "tools are not supported"}``: an error status with an
  OpenAI error object;
* ``{"text": [...], "tool_calls": [...], "finish_reason": "tool_calls"}``: a streamed
  reply. ``text`` is the list of content pieces; each tool call is
  ``{"id": "call_1" | null, "name": "read_file", "arguments": ["{\\"pa", "th\\": 1}"]}``:
  its first chunk carries the id (left out when null) and the name, each arguments
  piece follows in a chunk of its own. ``index`` (default: the call's position) may be
  given, or null to leave it out of the pieces; ``"interleave": true`` on the reply sends the calls' pieces alternately
  (several calls forming at once, as some servers do). A usage chunk (the reply's
  ``usage`` object when it has one) and ``[DONE]`` end the stream;
* ``{"raw": [chunk, ...]}``: these chunks (objects, or strings sent as they are:
  JSON text with escapes of our choosing), then ``[DONE]``.

Any reply may carry ``"gap": SECONDS``: the pause before each chunk, so a client can be
watched while a reply (a tool call's arguments) is still streaming in.

A request with ``"stream": false`` (a summarizer's) is answered with one chat completion
whose content is the reply's ``text`` joined, after the reply's ``"delay": SECONDS`` (a
slow model, so a pass can be watched in flight).
"""

from __future__ import annotations

import http.server
import json
import sys
import time
from itertools import zip_longest
from pathlib import Path

MODEL_ID = "scripted"


def _chunk(delta: dict, finish_reason: str | None = None) -> dict:
    return {
        "id": "chatcmpl-scripted",
        "object": "chat.completion.chunk",
        "model": "scripted",
        "choices": [{"index": 0, "delta": delta, "finish_reason": finish_reason}],
    }


def stream_chunks(reply: dict) -> list[dict]:
    """The chunks of one scripted streamed reply, in the order they are sent."""
    chunks = [_chunk({"role": "assistant"})]
    chunks += [_chunk({"content": piece}) for piece in reply.get("text", [])]
    per_call: list[list[dict]] = []
    for position, call in enumerate(reply.get("tool_calls", [])):
        index = {"index": call.get("index", position)} if call.get("index", position) is not None else {}
        first: dict = {**index, "type": "function", "function": {"name": call["name"], "arguments": ""}}
        if call.get("id") is not None:
            first["id"] = call["id"]
        pieces = [first] + [{**index, "function": {"arguments": a}} for a in call.get("arguments", [])]
        per_call.append(pieces)
    if reply.get("interleave"):
        ordered = [p for group in zip_longest(*per_call) for p in group if p is not None]
    else:
        ordered = [p for pieces in per_call for p in pieces]
    chunks += [_chunk({"tool_calls": [piece]}) for piece in ordered]
    chunks.append(_chunk({}, reply.get("finish_reason", "stop")))
    chunks.append({
        "id": "chatcmpl-scripted", "object": "chat.completion.chunk", "choices": [],
        "usage": reply.get("usage", {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15}),
    })
    return chunks


def serve(script_path: Path, requests_path: Path) -> None:
    script = json.loads(script_path.read_text())
    served = 0

    class Handler(http.server.BaseHTTPRequestHandler):
        def log_message(self, *args) -> None:
            pass

        def do_GET(self) -> None:
            if self.path.rstrip("/") != "/v1/models":
                self.send_error(404)
                return
            payload = json.dumps({"object": "list", "data": [{"id": MODEL_ID, "object": "model"}]}).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(payload)))
            self.end_headers()
            self.wfile.write(payload)

        def do_POST(self) -> None:
            nonlocal served
            body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
            with requests_path.open("a") as log:
                log.write(json.dumps({"path": self.path, "body": json.loads(body)}) + "\n")
            reply = script[min(served, len(script) - 1)]
            served += 1
            if "status" in reply:
                payload = json.dumps({"error": {"message": reply["error"], "type": "invalid_request_error"}})
                self.send_response(reply["status"])
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload.encode())
                return
            if not json.loads(body).get("stream", False):
                time.sleep(reply.get("delay", 0))
                payload = json.dumps({
                    "id": "scripted", "object": "chat.completion", "created": 0, "model": MODEL_ID,
                    "choices": [{"index": 0, "finish_reason": reply.get("finish_reason", "stop"),
                                 "message": {"role": "assistant", "content": "".join(reply.get("text", []))}}],
                    "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2},
                })
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload.encode())
                return
            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream")
            self.end_headers()
            for chunk in reply["raw"] if "raw" in reply else stream_chunks(reply):
                if reply.get("gap"):
                    time.sleep(reply["gap"])
                data = chunk if isinstance(chunk, str) else json.dumps(chunk)
                self.wfile.write(f"data: {data}\n\n".encode())
                self.wfile.flush()
            self.wfile.write(b"data: [DONE]\n\n")
            self.wfile.flush()

    server = http.server.HTTPServer(("127.0.0.1", 0), Handler)
    print(f"PORT {server.server_address[1]}", flush=True)
    server.serve_forever()


if __name__ == "__main__":
    serve(Path(sys.argv[1]), Path(sys.argv[2]))
