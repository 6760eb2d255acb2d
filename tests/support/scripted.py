"""The scripted OpenAI-compatible server (scripted_openai_server.py) as a subprocess, and
long sessions to send to it."""

from __future__ import annotations

import json
from pathlib import Path

from hermes_tui.core.transcript import Message
from support.servers import ScriptedServer


class ScriptedServers:
    """Starts scripted servers for one test (``start``) and stops them all (``stop``)."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self.servers: list[ScriptedServer] = []

    def start(self, script: list[dict] | dict) -> ScriptedServer:
        self.servers.append(ScriptedServer(script, self.folder / f"model{len(self.servers)}"))
        return self.servers[-1]

    def stop(self) -> None:
        for server in self.servers:
            server.stop()


def answer(text: str) -> dict:
    return {"text": [text[: len(text) // 2], text[len(text) // 2:]], "finish_reason": "stop"}


def long_agent_session(exchanges: int, output_words: int, *, user_words: int = 12) -> list[Message]:
    """A system prompt, then per exchange a user message, a tool call and its (long) output and a
    reply; every line of output differs, as real file reads do."""
    messages = [Message("system", "You are a coding agent. Work in small steps.")]
    for n in range(exchanges):
        call = {"id": f"call_{n}", "type": "function",
                "function": {"name": "read_file", "arguments": json.dumps({"path": f"src/module_{n}.py"})}}
        ask = " ".join(f"request{n}word{i}" for i in range(user_words))
        output = "\n".join(f"line {i} of module {n}: value_{n}_{i} = compute({i}, {n * i})"
                           for i in range(output_words // 8))
        messages += [
            Message("user", f"Please look at module {n}. {ask}"),
            Message("assistant", f"Reading module {n}.", tool_calls=[call]),
            Message("tool", output, tool_call_id=f"call_{n}", name="read_file"),
            Message("assistant", f"Module {n} computes values from its index."),
        ]
    return messages
