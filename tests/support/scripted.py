"""The scripted OpenAI-compatible server (scripted_openai_server.py) as a subprocess, and
long sessions to send to it."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from hermes_tui.transcript import Message
from support.servers import stop_server

SERVER = Path(__file__).resolve().parent / "scripted_openai_server.py"


class Scripted:
    def __init__(self, process: subprocess.Popen, base_url: str, requests_path: Path):
        self.process = process
        self.base_url = base_url
        self.requests_path = requests_path

    def served(self) -> list[dict]:
        """Every chat request: ``body``, the ``status`` served and the ``prompt_tokens`` it counted."""
        if not self.requests_path.exists():
            return []
        return [json.loads(line) for line in self.requests_path.read_text().splitlines()]

    def requests(self) -> list[dict]:
        return [line["body"] for line in self.served()]


class ScriptedServers:
    """Starts scripted servers for one test (``start``) and stops them all (``stop``)."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self.processes: list[subprocess.Popen] = []

    def start(self, script: list[dict] | dict) -> Scripted:
        n = len(self.processes)
        script_path = self.folder / f"script{n}.json"
        requests_path = self.folder / f"requests{n}.jsonl"
        script_path.write_text(json.dumps(script))
        process = subprocess.Popen(
            [sys.executable, str(SERVER), str(script_path), str(requests_path)],
            stdout=subprocess.PIPE, stdin=subprocess.DEVNULL, text=True,
        )
        self.processes.append(process)
        line = process.stdout.readline()
        assert line.startswith("PORT "), f"scripted server did not start: {line!r}"
        return Scripted(process, f"http://127.0.0.1:{int(line.split()[1])}/v1", requests_path)

    def stop(self) -> None:
        for process in self.processes:
            stop_server(process)


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
