"""Replies for the scripted OpenAI-compatible server (started by ``support.scripted``): tool calls
streamed in pieces, or a final answer."""

from __future__ import annotations

import json
from typing import Any

from support.scripted import ScriptedServers, answer
from support.servers import ScriptedServer

__all__ = ["ScriptedServer", "ScriptedServers", "answer", "call", "calls"]


def call(name: str, call_id: str, pieces: int = 2, **arguments: Any) -> dict:
    """One scripted call, its arguments' JSON text sent in ``pieces`` chunks."""
    text = json.dumps(arguments)
    size = max(1, -(-len(text) // pieces))
    return {"id": call_id, "name": name, "arguments": [text[i:i + size] for i in range(0, len(text), size)]}


def calls(*tool_calls: dict, **extra: Any) -> dict:
    return {"tool_calls": list(tool_calls), "finish_reason": "tool_calls", **extra}


