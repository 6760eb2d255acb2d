"""What every tool is: its spec for the model, how it runs, and the one result it returns.

A tool is a name, a description, a JSON Schema for its arguments and an approval kind
(``read``, ``edit``, ``shell``, ``external``). ``run`` takes arguments already checked
against the schema (``registry.ToolRegistry`` does that) and a ``ToolContext``, and
returns a ``ToolResult``: the text that goes into the transcript as the ``tool`` message,
plus metadata for the UI and the log that never goes over the wire.

Tools are synchronous and run in a worker thread; the caller stops one by setting
``context.cancel``. Long-running tools poll it and raise ``ToolStopped``. Expected
failures (a missing file, an ambiguous edit) raise ``ToolError`` with a one-line message
the model can act on; any other exception also becomes an error result (the registry
catches it), so a call always gets exactly one result.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from enum import Enum
from pathlib import Path
from typing import Any, ClassVar, Protocol

from hermes_tui.core.transcript import Message

from .read_record import ReadRecord

# The boundary's own names are part of this interface too (`X as X`: re-exported).
from .workspace import OutsideAccess as OutsideAccess
from .workspace import OutsideApprover as OutsideApprover
from .workspace import ToolError as ToolError
from .workspace import Workspace as Workspace
from .workspace import relative_display as relative_display

# Output caps: ~4 bytes per token for code and logs, so 32 KB is about 8K tokens.
DEFAULT_MAX_OUTPUT_BYTES = 32_000
DEFAULT_SHELL_TIMEOUT_S = 120.0
MAX_SHELL_TIMEOUT_S = 600.0

BYTES_PER_TOKEN = 4


class ToolKind(str, Enum):
    """What a tool can do, which is what approval is decided on."""

    READ = "read"  # reads files in the workspace
    EDIT = "edit"  # changes files in the workspace
    SHELL = "shell"  # runs commands
    EXTERNAL = "external"  # acts outside the app (an MCP server): effects unknown


class Trust(str, Enum):
    """How far an external tool runs without asking (from its MCP server's ``trust``)."""

    ASK = "ask"  # every call asks
    READ = "read"  # declared read-only by a server trusted to say so: runs as a read does
    RUN = "run"  # its server is trusted: runs unasked, but not in read-only mode


class Status(str, Enum):
    OK = "ok"
    ERROR = "error"
    STOPPED = "stopped"
    DENIED = "denied"
    INTERRUPTED = "interrupted"


class ToolStopped(Exception):
    """Raised by a tool that saw ``context.cancel`` set."""


@dataclass
class ToolResult:
    """One call's outcome. ``content`` is the tool message; the rest is metadata."""

    content: str
    is_error: bool = False
    status: Status = Status.OK
    exit_code: int | None = None
    duration_ms: float | None = None
    bytes: int = 0  # size of the output the tool produced, before any cap
    truncated: bool = False
    paths: tuple[str, ...] = ()  # workspace-relative (or absolute, outside) paths touched
    diff: str | None = None  # unified diff of an edit, for the approval view and the log

    @classmethod
    def error(cls, message: str, **meta: Any) -> ToolResult:
        return cls(content=message, is_error=True, status=Status.ERROR, **meta)

    @classmethod
    def stopped(cls, partial: str = "", **meta: Any) -> ToolResult:
        text = (partial.rstrip("\n") + "\n" if partial else "") + "[stopped by the user]"
        return cls(content=text, is_error=True, status=Status.STOPPED, **meta)

    @classmethod
    def denied(cls, reason: str) -> ToolResult:
        return cls(content=f"denied: {reason}", is_error=True, status=Status.DENIED)

    @classmethod
    def interrupted(cls) -> ToolResult:
        """For a call left unanswered by a crash, found on resume."""
        return cls(content="[interrupted: the app stopped before this call finished]",
                   is_error=True, status=Status.INTERRUPTED)

    def metadata(self) -> dict[str, Any]:
        """The transcript metadata for this result (never sent to the model)."""
        meta: dict[str, Any] = {"status": self.status.value, "is_error": self.is_error,
                                "bytes": self.bytes, "truncated": self.truncated}
        if self.exit_code is not None:
            meta["exit_code"] = self.exit_code
        if self.duration_ms is not None:
            meta["duration_ms"] = round(self.duration_ms, 1)
        if self.paths:
            meta["paths"] = list(self.paths)
        if self.diff is not None:
            meta["diff"] = self.diff
        return meta


class CommandSandbox(Protocol):
    """What confines a command a tool runs (``sandbox.support.Sandbox``): its argv and
    environment as they must run."""

    def wrap(self, argv: list[str], env: Mapping[str, str], *, read_only: bool = False,
             extra_read: Sequence[str | Path] = ()) -> tuple[list[str], dict[str, str]]: ...


@dataclass
class ToolContext:
    """What a running tool may use: where it acts, when to stop, how much to say."""

    workspace: Workspace
    cancel: threading.Event = field(default_factory=threading.Event)
    max_output_bytes: int = DEFAULT_MAX_OUTPUT_BYTES
    shell_timeout_s: float = DEFAULT_SHELL_TIMEOUT_S
    # Asked (from the tool's thread; it may block while the user answers) when a path
    # resolves outside the workspace. None: no one to ask, so outside paths are refused.
    approve_outside: OutsideApprover | None = None
    # The environment for commands; None: ours minus credentials (shell.shell_environment).
    shell_env: dict[str, str] | None = None
    # The OS sandbox every command runs in (the agent always sets one; in full mode it
    # leaves commands as they are). None: commands run unconfined (tests of the tools).
    sandbox: CommandSandbox | None = None
    # The files read in this session (read_record.py says why): edit_file and write_file
    # change an existing file only when it was read and has not changed since. The agent
    # always sets one, kept for the whole conversation. None: no such guard (tests of the tools).
    read_record: ReadRecord | None = None

    @property
    def max_output_tokens(self) -> int:
        return self.max_output_bytes // BYTES_PER_TOKEN

    def check_cancel(self) -> None:
        if self.cancel.is_set():
            raise ToolStopped()


class Tool:
    """A tool the model can call. Subclasses set the class attributes and ``run``."""

    name: ClassVar[str]
    description: ClassVar[str]
    parameters: ClassVar[dict[str, Any]]  # JSON Schema of the arguments object
    kind: ClassVar[ToolKind]
    trust: ClassVar[Trust] = Trust.ASK  # for kind external only

    def run(self, arguments: dict[str, Any], context: ToolContext) -> ToolResult:
        raise NotImplementedError

    # --- what approval needs to know before the call runs -------------------------

    def paths(self, arguments: dict[str, Any]) -> list[str]:
        """The paths this call names, as given (resolved by approval via the workspace)."""
        return []

    def shell_command(self, arguments: dict[str, Any]) -> str | None:
        """The command line this call runs, for command rules and the allowlist."""
        return None

    def preview(self, arguments: dict[str, Any], context: ToolContext) -> str | None:
        """What the user approves: a unified diff for edits; None when there is none."""
        return None

    def spec(self) -> dict[str, Any]:
        """The OpenAI ``tools=[...]`` entry."""
        return {"type": "function",
                "function": {"name": self.name, "description": self.description,
                             "parameters": self.parameters}}


def tool_message(call_id: str, name: str, result: ToolResult) -> Message:
    """The ``tool`` message for one result; its metadata (never sent) says how it went."""
    return Message(role="tool", content=result.content, tool_call_id=call_id,
                   meta={"tool": {"name": name, **result.metadata()}})
