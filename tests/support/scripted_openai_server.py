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

A ``status`` reply may carry ``"fields"``, merged into the error object (llama.cpp puts
``n_prompt_tokens`` and ``n_ctx`` there).

The script may also be an object ``{"replies": [...], "window": N, ...}``: the server then
runs its model with a context window of N tokens, as a real one does:

* ``GET /v1/models`` lists the model with ``max_model_len: N`` (vLLM's field) unless
  ``"report_window": false``;
* a request that does not fit is refused with HTTP 400 before any script reply is used:
  ``"style": "llama.cpp"`` (the default) when the prompt alone reaches N, with
  llama.cpp's message, type and figures; ``"vllm"`` when prompt plus ``max_tokens``
  exceeds N, with vLLM's message. The prompt is counted as ``ceil(chars / chars_per_token)``
  over the messages' text and the tools (``"chars_per_token"``, default 4).

Each line of REQUESTS.jsonl also holds the ``status`` served and the ``prompt_tokens`` counted.

A request with ``"stream": false`` (a summarizer's) is answered with one chat completion
whose content is the reply's ``text`` joined, after the reply's ``"delay": SECONDS`` (a
slow model, so a pass can be watched in flight).
"""

from __future__ import annotations

import http.server
import json
import math
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


def prompt_tokens(body: dict, chars_per_token: float) -> int:
    """The request's prompt as this server counts it: characters of text over a ratio."""
    chars = 0
    for message in body.get("messages", []):
        content = message.get("content")
        chars += len(content) if isinstance(content, str) else len(json.dumps(content or ""))
        chars += len(json.dumps(message.get("tool_calls"))) if message.get("tool_calls") else 0
    chars += len(json.dumps(body["tools"])) if body.get("tools") else 0
    return math.ceil(chars / chars_per_token)


def overflow(body: dict, settings: dict, prompt: int) -> dict | None:
    """The error object a server with ``settings["window"]`` answers for a request too large."""
    window = settings.get("window")
    if not window:
        return None
    if settings.get("style", "llama.cpp") == "vllm":
        completion = body.get("max_tokens") or 0
        if prompt + completion <= window:
            return None
        return {"message": f"This model's maximum context length is {window} tokens. However, you requested "
                           f"{prompt + completion} tokens ({prompt} in the messages, {completion} in the completion). "
                           "Please reduce the length of the messages or completion.",
                "type": "BadRequestError", "param": None, "code": 400}
    if prompt < window:
        return None
    return {"code": 400, "message": f"request ({prompt} tokens) exceeds the available context size ({window} tokens),"
                                    " try increasing it",
            "type": "exceed_context_size_error", "n_prompt_tokens": prompt, "n_ctx": window}


def serve(script_path: Path, requests_path: Path) -> None:
    script = json.loads(script_path.read_text())
    settings = script if isinstance(script, dict) else {}
    replies = settings.get("replies", []) if settings else script
    served = 0

    class Handler(http.server.BaseHTTPRequestHandler):
        def log_message(self, *args) -> None:
            pass

        def _json(self, status: int, payload: dict) -> None:
            data = json.dumps(payload).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def do_GET(self) -> None:
            if self.path.rstrip("/").endswith("/models") and settings.get("report_window", True):
                entry = {"id": MODEL_ID, "object": "model"}
                if settings.get("window"):
                    entry["max_model_len"] = settings["window"]
                self._json(200, {"object": "list", "data": [entry]})
            else:
                self._json(404, {"error": {"message": f"no route {self.path}"}})

        def do_POST(self) -> None:
            nonlocal served
            body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))))
            prompt = prompt_tokens(body, settings.get("chars_per_token", 4))
            refused = overflow(body, settings, prompt)
            reply = {"status": 400, "error": refused} if refused else replies[min(served, len(replies) - 1)]
            with requests_path.open("a") as log:
                log.write(json.dumps({"path": self.path, "body": body, "status": reply.get("status", 200),
                                      "prompt_tokens": prompt}) + "\n")
            if refused:
                self._json(400, {"error": refused})
                return
            served += 1
            if "status" in reply:
                error = {"message": reply["error"], "type": "invalid_request_error", **reply.get("fields", {})}
                payload = json.dumps({"error": error})
                self.send_response(reply["status"])
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload.encode())
                return
            if not body.get("stream", False):
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
