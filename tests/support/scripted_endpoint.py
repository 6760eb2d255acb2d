"""Starting the scripted OpenAI-compatible server (``scripted_openai_server.py``) in a
subprocess, and writing its replies: tool calls streamed in pieces, or a final answer."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

from support.servers import stop_server

SERVER = Path(__file__).with_name("scripted_openai_server.py")


class Scripted:
    def __init__(self, process: subprocess.Popen, base_url: str, requests_path: Path):
        self.process = process
        self.base_url = base_url
        self.requests_path = requests_path

    def requests(self) -> list[dict]:
        """The request bodies the server got, in order."""
        if not self.requests_path.exists():
            return []
        return [json.loads(line)["body"] for line in self.requests_path.read_text().splitlines()]


class ScriptedServers:
    """Starts scripted servers in ``folder``; ``stop`` ends every one started."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self.processes: list[subprocess.Popen] = []

    def start(self, script: list[dict]) -> Scripted:
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


def call(name: str, call_id: str, pieces: int = 2, **arguments: Any) -> dict:
    """One scripted call, its arguments' JSON text sent in ``pieces`` chunks."""
    text = json.dumps(arguments)
    size = max(1, -(-len(text) // pieces))
    return {"id": call_id, "name": name, "arguments": [text[i:i + size] for i in range(0, len(text), size)]}


def calls(*tool_calls: dict, **extra: Any) -> dict:
    return {"tool_calls": list(tool_calls), "finish_reason": "tool_calls", **extra}


def answer(text: str) -> dict:
    return {"text": [text[: len(text) // 2], text[len(text) // 2:]], "finish_reason": "stop"}
