"""The JSON schema a reply matches when it is one call to an offered tool.

The agent's first step of a turn asks for a call (``agent.look_first``): small local models
answer a question about the workspace from memory rather than look (Qwen2.5-Coder-1.5B
called a tool in 2 of 12 first replies, whatever the system prompt said), and some servers
cannot be told to call through ``tool_choice`` (llama.cpp finds no tool-call format in
Qwen2.5-Coder's own chat template, so it ignores ``"required"``). A JSON schema as
``response_format`` holds the model to it on every server that takes one (llama.cpp, vLLM,
LM Studio, Ollama, OpenAI); the reply is then the call as JSON text, which
``chat.text_tool_calls`` reads as it reads any call written as text.

The schema is one object per offered tool: ``{"name": <the tool's name>, "arguments":
{...}}``, the arguments limited to the tool's required parameters and its optional *string*
ones (a path, a glob). Optional numbers and flags are left out: held to the whole schema,
the 1.5B model filled every one of them, and with values that lose the step (``limit: 1``
on a read, ``max_results: 1`` on a search). The tool's defaults serve the first look; the
steps after it are free to pass them.
"""

from __future__ import annotations

import copy
from typing import Any

SCHEMA_NAME = "tool_call"


def call_schema(tools: list[dict[str, Any]]) -> dict[str, Any]:
    """The schema of one call to one of ``tools`` (OpenAI ``tools=[...]`` specs)."""
    options = []
    for spec in tools:
        function = spec.get("function") or {}
        name = function.get("name")
        if not isinstance(name, str):
            continue
        options.append({
            "type": "object",
            "properties": {"name": {"const": name}, "arguments": _first_look(function.get("parameters") or {})},
            "required": ["name", "arguments"],
            "additionalProperties": False,
        })
    return {"anyOf": options}


def response_format(tools: list[dict[str, Any]]) -> dict[str, Any]:
    """The ``response_format`` of an OpenAI-compatible request whose reply must be a call."""
    return {"type": "json_schema", "json_schema": {"name": SCHEMA_NAME, "schema": call_schema(tools)}}


def _first_look(parameters: dict[str, Any]) -> dict[str, Any]:
    """A tool's parameters schema without its optional parameters that are not strings."""
    properties = parameters.get("properties")
    if not isinstance(properties, dict):
        return {"type": "object"}
    required = [key for key in parameters.get("required", []) if key in properties]
    kept = {key: copy.deepcopy(value) for key, value in properties.items()
            if key in required or (isinstance(value, dict) and value.get("type") == "string")}
    return {"type": "object", "properties": kept, "required": required, "additionalProperties": False}
