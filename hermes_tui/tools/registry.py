"""The tools a conversation offers, and how one call from the model becomes one result.

The model sends a tool name and its arguments as a JSON string. ``prepare`` turns that
into a ``Call`` (the tool and the parsed, schema-checked arguments) or an error
``ToolResult`` saying what to fix: invalid JSON, an unknown tool, a schema mismatch. The
loop decides approval on the ``Call`` and then ``run``s it. ``run`` never raises for
anything a tool does: an exception becomes an error result with its one-line message, a
cancel becomes a "stopped" result, and the content is capped at the context's limit.

Arguments are checked with ``jsonschema``: the built-in schemas are small, but MCP tools
bring whatever their servers declare (``$ref``, ``oneOf``, formats), and a validator of
our own would accept what it does not understand.
"""

from __future__ import annotations

import re
import time
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Any

from hermes_tui.util.untrusted import NOT_JSON, InputError, load_json

from .base import Status, Tool, ToolContext, ToolError, ToolResult, ToolStopped
from .output import cap_text

# What OpenAI-compatible APIs accept as a function name.
_NAME = re.compile(r"^[A-Za-z0-9_-]{1,64}$")


@dataclass(frozen=True)
class Call:
    tool: Tool
    arguments: dict[str, Any]

    @property
    def name(self) -> str:
        return self.tool.name


def one_line(text: str, limit: int = 300) -> str:
    line = " ".join(str(text).split())
    return line if len(line) <= limit else line[: limit - 1] + "…"


class ToolRegistry:
    def __init__(self, tools: Iterable[Tool] = (), *, schemas_checked: bool = False) -> None:
        self._tools: dict[str, Tool] = {}
        self._validators: dict[str, Any] = {}
        for tool in tools:
            self.register(tool, schema_checked=schemas_checked)

    def register(self, tool: Tool, *, schema_checked: bool = False) -> None:
        """Add ``tool``; ``ValueError`` for a bad name, a taken name or an invalid schema.

        ``schema_checked``: the schema is the project's own and its tests check it, so it is
        not checked again here; its validator is then built at the first call."""
        if not _NAME.match(tool.name):
            raise ValueError(f"tool name {tool.name!r}: use 1-64 letters, digits, _ or -")
        if tool.name in self._tools:
            raise ValueError(f"tool name {tool.name!r} is already registered")
        if not schema_checked:
            import jsonschema  # on first use: importing it costs the app's first frame ~30 ms

            cls = jsonschema.validators.validator_for(tool.parameters)
            try:
                cls.check_schema(tool.parameters)
            except jsonschema.SchemaError as e:
                raise ValueError(f"tool {tool.name}: invalid parameters schema: {e.message}") from None
        if tool.parameters.get("type") != "object":
            raise ValueError(f"tool {tool.name}: parameters must be an object schema")
        self._tools[tool.name] = tool
        self._validators.pop(tool.name, None)

    def _validator(self, tool: Tool) -> Any:
        validator = self._validators.get(tool.name)
        if validator is None:
            import jsonschema

            validator = jsonschema.validators.validator_for(tool.parameters)(tool.parameters)
            self._validators[tool.name] = validator
        return validator

    def unregister(self, name: str) -> None:
        self._tools.pop(name, None)
        self._validators.pop(name, None)

    def __contains__(self, name: str) -> bool:
        return name in self._tools

    def __iter__(self) -> Iterator[Tool]:
        return iter(self._tools.values())

    def __len__(self) -> int:
        return len(self._tools)

    def get(self, name: str) -> Tool | None:
        return self._tools.get(name)

    def specs(self) -> list[dict[str, Any]]:
        """The request's ``tools=[...]``, in registration order."""
        return [tool.spec() for tool in self._tools.values()]

    # --- one call ----------------------------------------------------------------

    def prepare(self, name: str, arguments: str | dict[str, Any] | None) -> Call | ToolResult:
        tool = self._tools.get(name)
        if tool is None:
            known = ", ".join(self._tools) or "none"
            return ToolResult.error(f"unknown tool {name!r}; available tools: {known}")
        if isinstance(arguments, dict):
            parsed: Any = arguments
        elif arguments is None or not arguments.strip():
            parsed = {}  # some models send "" for a call without arguments
        else:
            try:
                parsed = load_json(arguments, model_output=True)
            except InputError as e:  # not JSON, nested too deep, a number too long
                what = "valid" if e.kind == NOT_JSON else "usable"
                where = f" at line {e.line} column {e.column}" if e.line is not None else ""
                return ToolResult.error(
                    f"arguments for {name} are not {what} JSON ({e.detail}{where}); send one JSON object")
        if not isinstance(parsed, dict):
            return ToolResult.error(f"arguments for {name} must be a JSON object, "
                                    f"not {type(parsed).__name__}")
        from jsonschema.exceptions import best_match

        error = best_match(self._validator(tool).iter_errors(parsed))
        if error is not None:
            where = "/".join(str(p) for p in error.absolute_path)
            at = f" at '{where}'" if where else ""
            return ToolResult.error(f"invalid arguments for {name}{at}: {one_line(error.message)}")
        return Call(tool=tool, arguments=parsed)

    def preview(self, call: Call, context: ToolContext) -> str | None | ToolResult:
        """The tool's preview (an edit's diff) for the approval view, or the error result
        to give instead of asking (the edit cannot apply: nothing to approve)."""
        try:
            return call.tool.preview(call.arguments, context)
        except ToolError as e:
            return ToolResult.error(error_text(e, call.name))
        except Exception as e:  # noqa: BLE001 - a tool's bug becomes a result the model can read
            return ToolResult.error(f"{call.name} failed: {type(e).__name__}: {one_line(str(e))}")

    def run(self, call: Call, context: ToolContext) -> ToolResult:
        start = time.monotonic()
        if context.cancel.is_set():
            result = ToolResult.stopped()
        else:
            try:
                result = call.tool.run(call.arguments, context)
            except ToolStopped:
                result = ToolResult.stopped()
            except ToolError as e:
                result = ToolResult.error(error_text(e, call.name))
            except Exception as e:  # noqa: BLE001 - a tool's bug must not break the transcript
                message = one_line(str(e))
                detail = f"{type(e).__name__}: {message}" if message else type(e).__name__
                result = ToolResult.error(f"{call.name} failed: {detail}")
        if result.duration_ms is None:
            result.duration_ms = (time.monotonic() - start) * 1000
        content, cut = cap_text(result.content, context.max_output_bytes)
        if cut:
            result.content, result.truncated = content, True
        if result.status is Status.OK and result.is_error:
            result.status = Status.ERROR
        return result

    def dispatch(self, name: str, arguments: str | dict[str, Any] | None,
                 context: ToolContext) -> ToolResult:
        """``prepare`` then ``run``, without approval (for callers that decided already)."""
        call = self.prepare(name, arguments)
        if isinstance(call, ToolResult):
            return call
        return self.run(call, context)


def error_text(error: ToolError, tool: str) -> str:
    """What the model reads for an expected failure: the message on one line, then its detail."""
    message = one_line(str(error)) or f"{tool} failed"
    return f"{message}\n{error.detail}" if error.detail else message
