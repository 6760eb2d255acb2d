"""One agent turn: model → tool calls → results → model … until a reply without calls.

A turn ends when the model replies without calls (``completed``), after
``max_steps`` model calls (``max_steps``), or when ``cancel`` is set (``stopped``): the
model's stream is closed and a running tool sees the same event (``run_shell`` kills
its process group). Whatever happens, every call the model made gets exactly one
result: its own, an error, "denied", or "stopped" for every call not run because of a
stop. Each assistant message and each result is stored the moment it is complete, so a
crash loses at most the call in flight; on open, ``Session.answer_unanswered`` gives
such a call an "interrupted" result.

Text-form calls: a reply with no native calls to a request that offered tools may carry
its calls as text (a JSON object, ``<tool_call>`` tags, ``<function=...>``);
``chat.text_tool_calls`` says when they count. Those are stored and run as native calls
(the prose around them is the content), with ``meta["recovered_calls"]`` naming the form.

Small models: the first model call after the user's message must be a call to an offered
tool that can succeed, and so must the call after one that failed, once in a row
(``agent.look_first``; the client holds the model to ``chat.call_schema``). A change to a
file refused for want of a read is resumed under the same setting: the next call must read
that file, and the one after it edit it (``AgentTurn._resumable``). A request that ends
with tool results carries ``RESULT_NOTE`` after them, ``ERROR_NOTE`` after one that failed,
``RESUME_NOTE`` before a resumed edit (``agent.result_note``; not stored). Measured on Qwen2.5-Coder-1.5B
(``benchmarks/bench_agent_tasks.py``): without the first, it answered most questions about
the workspace without looking; without the second, it echoed the result in its template's
``<tool_response>`` tags or called the same tool again instead of answering. A reply cut off
at its token cap without a call is noted as such.

System prompt: built for the turn where it begins (``session.system_prompt``: the workspace,
the approval mode, the offered tools, the project's AGENTS.md) and kept first in the
transcript (``Session.refresh_system_prompt``); it does not change until the next turn.

Approval: ``tools.approval.decide`` on every call; when it asks, the UI's ``ask``
callback answers (allow once, allow for this session, always, deny). Without one
(headless) anything that would ask is denied. "Always" rules go to the persistent rule
store (our database, per workspace); "this session" rules live in memory.

MCP: before each model call the tools of the MCP servers that are ready join the
registry (``Tools.sync``), so a server still starting never holds the turn up and its
tools are offered from the first request after it is up.

Compaction: each completed exchange is counted by the one rule
(``Session.exchange_completed``, the compaction policy); the passes it asks for are
planned in the background (``session.passes``) and published together before the next
model call, one at a time in the order of the queue the app's compaction uses too
(``session.pass_queue``: what waits, what is dropped, and the batch that follows a micro
splice left over the threshold). Every model call goes through the session's guard (``session.fit``): the loop
waits for passes, and compacts, only when the next request would not fit the window (or
when it is over the threshold while passes are in flight).

Runs in a worker thread; the listener's hooks are called from that thread.
"""

from __future__ import annotations

import copy
import dataclasses
import json
import shutil
import threading
import uuid
import weakref
from collections.abc import Callable
from dataclasses import dataclass, field
from enum import Enum
from pathlib import Path
from typing import TYPE_CHECKING, Any

from hermes_tui.chat.client import CANCELLED, NO_TOOLS, ChatDelta, ChatDone, ChatError, Usage
from hermes_tui.chat.text_tool_calls import recover_calls
from hermes_tui.compaction.trim import cut
from hermes_tui.core.transcript import Message
from hermes_tui.session import system_prompt
from hermes_tui.session.fit import FitListener
from hermes_tui.session.passes import BackgroundPasses, Passes
from hermes_tui.session.session import usage_meta
from hermes_tui.tools.approval import (
    REPEAT_LIMIT,
    Action,
    ApprovalRequest,
    Decision,
    MemoryRuleStore,
    Mode,
    RepeatTracker,
    Rule,
    RuleStore,
    build_request,
    decide,
    rule_for,
)
from hermes_tui.tools.base import Status, ToolContext, ToolKind, ToolResult, tool_message
from hermes_tui.tools.read_record import ReadRecord, Seen
from hermes_tui.tools.registry import Call, ToolRegistry
from hermes_tui.tools.workspace import OutsideApprover, Workspace
from hermes_tui.util.logs import get_logger

if TYPE_CHECKING:
    from hermes_tui.compaction.engine import PassReport
    from hermes_tui.config import AgentConfig
    from hermes_tui.session.session import Session
    from hermes_tui.tools.mcp import McpManager
    from hermes_tui.tools.sandbox.support import Sandbox

log = get_logger("agent")

COMPLETED, MAX_STEPS, STOPPED = "completed", "max_steps", "stopped"


class Answer(str, Enum):
    """The user's answer to an approval prompt."""

    ALLOW_ONCE = "allow_once"
    ALLOW_SESSION = "allow_session"
    ALWAYS = "always"
    DENY = "deny"


# ask(request, preview, reason) -> Answer: called from the loop's thread; it may block
# while the user decides. ``preview`` is an edit's diff (None when there is none);
# ``reason`` is the one line saying why it asks.
Ask = Callable[[ApprovalRequest, "str | None", str], Answer]


class AgentListener(FitListener):
    """What the UI (or the headless printer) hears from a turn. Every hook is optional
    (``compacting`` / ``compacted``: the guard before a model call, ``FitListener``)."""

    def step_started(self, step: int) -> None: ...

    def text(self, piece: str) -> None: ...

    def tool_delta(self, event: Any) -> None:
        """A piece of a call as it streams (the chat client's ``ChatToolDelta``)."""

    def reply(self, message: Message) -> None:
        """An assistant message, stored (its ``tool_calls`` are about to run)."""

    def call_started(self, call_id: str, name: str, arguments: Any) -> None: ...

    def call_finished(self, call_id: str, name: str, arguments: Any, result: ToolResult,
                      message: Message) -> None:
        """A call's result, stored."""

    def pass_published(self, report: PassReport) -> None: ...

    def system_prompt(self, message: Message) -> None:
        """The turn's system prompt, stored: new, or changed since the last turn."""

    def notice(self, text: str) -> None:
        """Something the user should know once, e.g. that the model runs without tools."""


@dataclass
class Tools:
    """A conversation's tools and what decides whether a call runs."""

    registry: ToolRegistry
    workspace: Workspace
    mode: Mode = Mode.ASK
    rules: RuleStore = field(default_factory=MemoryRuleStore)  # "always": per workspace, kept
    session_rules: MemoryRuleStore = field(default_factory=MemoryRuleStore)  # "for this session"
    repeats: RepeatTracker = field(default_factory=RepeatTracker)
    max_output_bytes: int = 32_000
    shell_timeout_s: float = 120.0
    mcp: McpManager | None = None  # its ready servers' tools join ``registry`` before each request
    # The files the model read in this conversation: edits apply only to those, as they were
    # read (tools/read_record.py). One for the conversation, so a read counts in later turns.
    read_record: ReadRecord = field(default_factory=ReadRecord)
    # The private temp dir of this conversation's commands (TMPDIR), made at the first call.
    tmpdir: str | None = field(default=None, init=False, repr=False)
    sandbox_noticed: bool = field(default=False, init=False)  # "no sandbox here" is said once

    @classmethod
    def from_config(cls, agent: AgentConfig, registry: ToolRegistry, *, rules: RuleStore | None = None,
                    workspace: str | Path | None = None, mode: str | None = None,
                    mcp: McpManager | None = None) -> Tools:
        root = workspace or agent.workspace or Path.cwd()
        return cls(registry=registry, workspace=Workspace(root), mode=Mode(mode or agent.approval),
                   rules=rules if rules is not None else MemoryRuleStore(),
                   max_output_bytes=agent.max_output_bytes, shell_timeout_s=agent.shell_timeout, mcp=mcp)

    def sync(self) -> None:
        """Offer the tools of the MCP servers that are ready now (a server that came up since
        the last request joins; one that failed leaves). Never raises: the turn goes on with
        the tools it had."""
        if self.mcp is None:
            return
        try:
            self.mcp.sync(self.registry)
        except Exception:
            log.exception("cannot take the MCP servers' tools")

    @property
    def key(self) -> str:
        """The workspace as rules are stored under it."""
        return str(self.workspace.root)

    def all_rules(self) -> list[Rule]:
        try:
            kept = self.rules.rules(self.key)
        except Exception as exc:  # noqa: BLE001 - an unreadable database must not stop the turn
            log.warning("cannot read the approval rules: %s", exc)
            kept = []
        return kept + self.session_rules.rules(self.key)

    def sandbox(self) -> Sandbox:
        """The OS sandbox of a command run now: in the current mode (``/mode`` changes it
        between calls), with this conversation's temp dir (removed with it, or at exit)."""
        from hermes_tui.tools.sandbox.support import Sandbox, make_tmpdir

        if self.tmpdir is None:
            self.tmpdir = make_tmpdir()
            weakref.finalize(self, shutil.rmtree, self.tmpdir, ignore_errors=True)
        return Sandbox(self.mode, self.workspace.root, self.tmpdir)

    def context(self, cancel: threading.Event, approve_outside: OutsideApprover | None = None) -> ToolContext:
        return ToolContext(workspace=self.workspace, cancel=cancel, max_output_bytes=self.max_output_bytes,
                           shell_timeout_s=self.shell_timeout_s, approve_outside=approve_outside,
                           sandbox=self.sandbox(), read_record=self.read_record)


@dataclass
class AgentResult:
    outcome: str  # completed | max_steps | stopped
    text: str  # the last reply's text (the answer, when completed)
    steps: int  # model calls made
    calls: int  # tool calls answered
    reply: Message | None = None  # the last assistant message stored


# How often a loop waiting for passes over the threshold looks whether it is back within it.
CATCH_UP_POLL_S = 0.1

def always_rule(request: ApprovalRequest) -> Rule | None:
    """The rule an "always" answer stores (``tools.approval.rule_for``; the request carries it
    as ``rule_preview`` for the prompt to show). None: the answer holds for this call only."""
    return request.rule_preview if request.rule_preview is not None else rule_for(request)


# After tool results (``agent.result_note``): the words measured on Qwen2.5-Coder-1.5B. It
# tells the model the result is there to be used, and that answering ends the turn.
RESULT_NOTE = ("\n\n[If this result answers the user's question, answer now in plain words. "
               "Otherwise call the next tool.]")
# After a call that failed (an error result: the model can correct it): told to answer, the
# same model wrote the error back as its answer ("read shopkit/pricing.py with read_file
# before editing it").
ERROR_NOTE = "\n\n[That call failed. Call a tool again as the message says, or answer if it cannot be done.]"


# The tools that change a file, and the note of a step held to resume a change (below).
CHANGE_TOOLS = ("edit_file", "write_file")
RESUME_NOTE = ("\n\n[Now make the change to {path} with edit_file: old_string copied exactly from the file, "
               "new_string the text that replaces it.]")
# How many steps of a turn may be held to resume a change: a change that keeps failing
# (text the model cannot copy) must leave the model free to say so.
MAX_RESUMES = 2


def pinned_to(specs: list[dict[str, Any]], names: tuple[str, ...], path: str) -> list[dict[str, Any]]:
    """The specs among ``specs`` named in ``names``, each with its ``path`` held to ``path``."""
    pinned = []
    for spec in specs:
        function = spec.get("function") or {}
        properties = (function.get("parameters") or {}).get("properties")
        if function.get("name") not in names or not isinstance(properties, dict) or "path" not in properties:
            continue
        spec = copy.deepcopy(spec)
        spec["function"]["parameters"]["properties"]["path"] = {"type": "string", "const": path}
        pinned.append(spec)
    return pinned


def first_calls(specs: list[dict[str, Any]], tools: Tools | None) -> list[dict[str, Any]]:
    """The tools the first call of a turn may be to: those offered that can succeed.
    ``edit_file`` cannot before any file was read in the session (``tools.read_record``):
    held to a call, the 1.5B model edited with a guessed ``old_string`` first, was refused,
    and then explained how to edit instead of reading."""
    if tools is not None and not tools.read_record:
        return [spec for spec in specs if spec.get("function", {}).get("name") != "edit_file"]
    return specs


# What one reply may ask for. 2,000 calls in one reply, or a 20 MB write_file argument,
# left a session that could send nothing more (every request over the window) and a 39 MB
# database; no real step needs either. Calls beyond the first MAX_CALLS_PER_REPLY are not
# kept (the last kept call's result says so, and to ask again); arguments over
# MAX_ARGUMENT_BYTES are not kept (the call's result says so, and how to write in parts).
MAX_CALLS_PER_REPLY = 64
MAX_ARGUMENT_BYTES = 1_000_000
OMITTED_ARGUMENTS = "{}"  # what stands for arguments that were not kept (still valid JSON)


def _normalized_calls(raw: list[dict[str, Any]] | None, meta: dict[str, Any]) -> list[dict[str, Any]] | None:
    """The calls as the transcript keeps them: each with an id, a name and arguments text,
    within the limits (what was not kept is noted in ``meta["limits"]``)."""
    calls = []
    oversized: dict[str, int] = {}
    for call in (raw or [])[:MAX_CALLS_PER_REPLY]:
        function = call.get("function") or {}
        arguments = function.get("arguments")
        if not isinstance(arguments, str):
            arguments = json.dumps(arguments if arguments is not None else {})
        call_id = call.get("id") or f"call_{uuid.uuid4().hex[:24]}"
        size = len(arguments.encode("utf-8", "surrogatepass"))
        if size > MAX_ARGUMENT_BYTES:
            oversized[call_id], arguments = size, OMITTED_ARGUMENTS
        calls.append({"id": call_id, "type": "function",
                      "function": {"name": str(function.get("name") or ""), "arguments": arguments}})
    dropped = max(0, len(raw or []) - MAX_CALLS_PER_REPLY)
    if oversized or dropped:
        meta["limits"] = {"oversized": oversized, "calls_dropped": dropped}
    return calls or None


def _not_run(reply: Message, call_id: str) -> ToolResult | None:
    """The result of a call whose arguments were over the limit (not kept, so not run), or None."""
    size = ((reply.meta.get("limits") or {}).get("oversized") or {}).get(call_id)
    if size is None:
        return None
    return ToolResult.error(
        f"not run: its arguments were {size:,} bytes, over the limit of {MAX_ARGUMENT_BYTES:,}; "
        "write a large file in parts (write_file for the start, then edit_file to add to it)")


def _with_dropped_note(reply: Message, index: int, result: ToolResult) -> ToolResult:
    """The last kept call's result says how many calls of the reply were not kept."""
    dropped = (reply.meta.get("limits") or {}).get("calls_dropped") or 0
    if not dropped or index != len(reply.tool_calls or []) - 1:
        return result
    note = (f"\n[{dropped:,} more tool calls in this reply were not run: at most {MAX_CALLS_PER_REPLY} "
            "run per reply; ask for the rest in the next one]")
    return dataclasses.replace(result, content=result.content + note)


class AgentTurn:
    def __init__(
        self, session: Session, tools: Tools | None, *, ask: Ask | None = None,
        listener: AgentListener | None = None, max_steps: int = 25, max_tokens: int | None = None,
        passes: Passes | None = None,
    ) -> None:
        self.session = session
        self.tools = tools
        self.ask = ask
        self.listener = listener or AgentListener()
        self.max_steps = max_steps
        self.max_tokens = max_tokens
        self.passes: Passes = passes or BackgroundPasses(session, on_published=self.listener.pass_published)
        self.calls = 0
        self._retried = False  # the last step was held to a call after a call that failed
        # Changes that failed in this turn and have not landed since: resolved path -> the
        # path as the model wrote it; and how many steps were held to resume one.
        self._unfinished: dict[Path, str] = {}
        self._resumes = 0
        self._read_held: set[Path] = set()  # files whose read a step was held to

    # --- the loop ------------------------------------------------------------------------
    def run(self, cancel: threading.Event | None = None) -> AgentResult:
        """Run the turn on the transcript as it is (the user's message already added).

        Raises ChatError for a model call that failed (what was stored stays stored) and
        StoreError when a message cannot be stored."""
        cancel = cancel or threading.Event()
        reply: Message | None = None
        self._sandbox_notice()
        # Here, where the app's turns and ``hermes-tui run`` both begin, and nowhere later: a
        # prompt changed mid-turn would break the chat model's prompt cache.
        prompt = self.session.refresh_system_prompt(self.system_prompt())
        if prompt is not None:
            self.listener.system_prompt(prompt)
        for step in range(1, self.max_steps + 1):
            self._catch_up(cancel)
            self.passes.publish_ready()
            self.listener.step_started(step)
            stepped = self._model_step(cancel)
            if stepped is None:  # stopped before any text: nothing to keep
                return AgentResult(STOPPED, reply.content if reply else "", step, self.calls, reply)
            reply, stopped = stepped
            if stopped:
                return AgentResult(STOPPED, reply.content, step, self.calls, reply)
            if reply.tool_calls:
                self._answer_calls(reply, cancel)
            self._exchange_completed(turn_ended=not reply.tool_calls)
            if cancel.is_set():
                return AgentResult(STOPPED, reply.content, step, self.calls, reply)
            if not reply.tool_calls:
                self.session.turns_completed += 1
                return AgentResult(COMPLETED, reply.content, step, self.calls, reply)
        return AgentResult(MAX_STEPS, reply.content if reply else "", self.max_steps, self.calls, reply)

    def system_prompt(self) -> str:
        """The system prompt for this turn: its workspace, approval mode and offered tools (none
        when the turn has no tools or the model takes none)."""
        tools = self.tools
        takes_tools = tools is not None and len(tools.registry) and getattr(self.session.chat, "supports_tools", False)
        if not takes_tools:
            agent = self.session.config.agent
            root = tools.workspace.root if tools is not None else Path(agent.workspace or Path.cwd()).expanduser()
            return system_prompt.build(root, mode=None)
        assert tools is not None
        return system_prompt.build(tools.workspace.root, mode=tools.mode.value, interactive=self.ask is not None,
                                   tools=[tool.name for tool in tools.registry])

    def _model_step(self, cancel: threading.Event) -> tuple[Message, bool] | None:
        """One model call: the assistant message, stored, and whether it was stopped."""
        session = self.session
        extra: dict[str, Any] = {}
        if self.tools is not None:
            self.tools.sync()
        if self.tools is not None and len(self.tools.registry):
            if getattr(session.chat, "supports_tools", False):
                extra["tools"] = self.tools.registry.specs()
            else:
                self._tool_less(f"model {getattr(session.chat, 'model_name', '?')} has no tool support: "
                                "the chat goes on without tools (no reads, commands or edits)")
        parts: list[str] = []
        done: ChatDone | None = None
        stopped = False
        try:
            try:
                done = self._stream(cancel, extra, parts)
            except ChatError as exc:
                # The endpoint refused the tools (it said so before any reply): the same
                # request again without them, as the client now expects.
                if exc.kind != NO_TOOLS or "tools" not in extra or parts:
                    raise
                self._tool_less(str(exc))
                del extra["tools"]
                done = self._stream(cancel, extra, parts)
        except ChatError as exc:
            if exc.kind != CANCELLED:
                raise
            if not "".join(parts).strip():
                return None
            # Calls cut off mid-stream are dropped with the stream: only the text is kept.
            done, stopped = ChatDone("".join(parts), Usage(prompt_tokens=None, completion_tokens=None)), True
        assert done is not None  # ChatClient.stream ends with exactly one ChatDone
        session.record_request(session.context_tokens(), done)
        meta: dict[str, Any] = {"usage": usage_meta(done)}
        if stopped:
            meta["stopped"] = True
        raw_calls, content = getattr(done, "tool_calls", None), done.text
        if not stopped and not raw_calls and extra.get("tools"):
            # Calls a small model wrote as text (the module's rule says when they count): kept
            # as native calls, so the transcript stays OpenAI format, with how they were found.
            recovered = recover_calls(done.text, extra["tools"])
            if recovered is not None:
                raw_calls, content = recovered.calls, recovered.content
                meta["recovered_calls"] = recovered.form
        calls = None if stopped else _normalized_calls(raw_calls, meta)
        reply = Message(role="assistant", content=content, tool_calls=calls, meta=meta)
        session.append(reply)
        self.listener.reply(reply)
        if not stopped and not calls and done.usage.finish_reason == "length":
            # A reply that reached its cap ends the turn like an answer: say it was cut, not
            # finished (held to a call, the 1.5B model wrote one whose file content repeated
            # until the cap, so the call never closed and could not run).
            cap = self.max_tokens if self.max_tokens is not None else getattr(session.chat, "max_tokens", "?")
            self.listener.notice(f"the reply was cut off at its cap of {cap} tokens (model.max_tokens) "
                                 "before it ended; what it holds is incomplete")
        return reply, stopped

    def _stream(self, cancel: threading.Event, extra: dict[str, Any], parts: list[str]) -> ChatDone | None:
        """One guarded model call (``Session.model_call``): text and call pieces to the listener."""
        done: ChatDone | None = None
        tools = extra.get("tools")
        must_call, note = self._steering(tools) if tools else (None, None)
        for event in self.session.model_call(max_tokens=self.max_tokens, cancel=cancel, tools=tools,
                                             listener=self.listener, settle=self.passes.settle,
                                             must_call=must_call, note=note):
            if isinstance(event, ChatDelta):
                parts.append(event.text)
                self.listener.text(event.text)
            elif isinstance(event, ChatDone):
                done = event
            else:
                self.listener.tool_delta(event)
        return done

    def _steering(self, tools: list[dict[str, Any]]) -> tuple[list[dict[str, Any]] | None, str | None]:
        """For this step: the tools its reply must call (None: free) and the note after the
        results it answers (None: none). See the module's "Small models"."""
        agent = self.session.config.agent
        with self.session.lock:
            last = self.session.conv.messages[-1] if self.session.conv.messages else None
        if last is None or last.role not in ("user", "tool"):
            return None, None
        failed = last.role == "tool" and (last.meta.get("tool") or {}).get("status") == Status.ERROR.value
        resume = self._resumable(tools, failed) if agent.look_first and last.role == "tool" else None
        if resume is not None:
            self._retried = failed
            return resume[0], (resume[1] if agent.result_note else None)
        # Held to a call: after the user's message, and once after a call that failed (a
        # second failure in a row leaves the model free to say it cannot).
        held = last.role == "user" or (failed and not self._retried)
        self._retried = failed and (held or self._retried)
        must_call = first_calls(tools, self.tools) if agent.look_first and held else None
        note = None
        if agent.result_note and last.role == "tool":
            note = ERROR_NOTE if failed else RESULT_NOTE
        return must_call, note

    def _track_change(self, name: str, arguments: str, result: ToolResult) -> None:
        """Keep the changes that failed in this turn (``_unfinished``) until one lands. A
        change the user declined is not one to resume."""
        if name not in CHANGE_TOOLS or self.tools is None:
            return
        try:
            path = json.loads(arguments).get("path")
        except (ValueError, AttributeError):
            return
        if not isinstance(path, str) or not path:
            return
        resolved = self.tools.workspace.resolve(path)
        if result.status is Status.ERROR:
            self._unfinished[resolved] = path
        else:
            self._unfinished.pop(resolved, None)

    def _resumable(self, offered: list[dict[str, Any]], failed: bool) -> tuple[list[dict[str, Any]], str] | None:
        """The calls this step is held to, to resume a change that failed, and the note after
        the results it answers; or None.

        A change refused for want of a read (``tools.read_record``) is resumed: first the
        step is held to ``read_file`` of that file (once per file), then, the file read, to
        an ``edit_file`` of it. Told to read first, the 1.5B model read the file and then
        answered in prose (most often that the change was made) in all 11 such reads in the
        benchmark's kept runs, or did not read it at all; it had meant to change the file,
        and the read was only the app's condition. Only ``edit_file``: held to either tool,
        the model wrote the whole file in all 4 resumes measured, twice the same blind
        content it had been refused, and never the file as read plus the change; an edit
        has to match the file's text. ``edit_file``'s own refusal holds the file, so its
        resume is the edit at once. A change that failed for another reason (text not found)
        is resumed the same way. At most ``MAX_RESUMES`` edits a turn."""
        if self.tools is None:
            return None
        for resolved, path in self._unfinished.items():
            seen = self.tools.read_record.check(resolved)
            if seen is Seen.CURRENT and self._resumes < MAX_RESUMES:
                specs = pinned_to(offered, ("edit_file",), path)
                if specs:
                    self._resumes += 1
                    return specs, RESUME_NOTE.format(path=path)
            elif seen is not Seen.CURRENT and resolved not in self._read_held and resolved.is_file():
                specs = pinned_to(offered, ("read_file",), path)
                if specs:
                    self._read_held.add(resolved)
                    return specs, ERROR_NOTE if failed else RESULT_NOTE
        return None

    def _sandbox_notice(self) -> None:
        """Once per conversation, where commands would run unconfined: that they do, and
        that every command not on the allowlist asks."""
        tools = self.tools
        if tools is None or tools.sandbox_noticed or tools.mode is Mode.FULL:
            return
        from hermes_tui.tools.sandbox.support import available

        support = available()
        if not support.available:
            tools.sandbox_noticed = True
            self.listener.notice(f"No OS sandbox here ({support.reason}): commands are not confined, "
                                 "so every command that is not on the read-only allowlist asks first")

    def _tool_less(self, text: str) -> None:
        if not self.session.tool_less_noticed:
            self.session.tool_less_noticed = True
            self.listener.notice(text)

    def _answer_calls(self, reply: Message, cancel: threading.Event) -> None:
        if self.tools is None:
            self._answer_each(reply, cancel)
            return
        with self.tools.read_record.reply():  # a read counts for the replies after this one
            self._answer_each(reply, cancel)

    def _answer_each(self, reply: Message, cancel: threading.Event) -> None:
        answered: set[str] = set()
        try:
            for index, call in enumerate(reply.tool_calls or []):
                call_id, function = call["id"], call["function"]
                name, arguments = function["name"], function["arguments"]
                self.listener.call_started(call_id, name, arguments)
                try:
                    result = _not_run(reply, call_id) or self._result(name, arguments, cancel)
                except Exception as exc:  # a bug in approval or the UI's callback: an error result
                    log.exception("tool call %s failed outside the tool", name)
                    result = ToolResult.error(f"{name} failed: {type(exc).__name__}")
                result = _with_dropped_note(reply, index, self._within_tokens(result))
                message = tool_message(call_id, name, result)
                self._track_change(name, arguments, result)
                self.session.append(message)
                answered.add(call_id)
                self.calls += 1
                self.listener.call_finished(call_id, name, arguments, result, message)
        finally:
            with self.session.lock:  # a result the store refused is in the transcript all the same
                answered |= {m.tool_call_id for m in self.session.conv.messages[-len(reply.tool_calls or []):]
                             if m.role == "tool" and m.tool_call_id is not None}
            unanswered = [c for c in reply.tool_calls or [] if c["id"] not in answered]
            if unanswered:  # an exception escaped (a store failure, an interrupt): keep it valid
                for call in unanswered:
                    try:
                        self.session.append(tool_message(call["id"], call["function"]["name"],
                                                         ToolResult.stopped()))
                    except Exception:  # noqa: BLE001 - the store is failing: the next open answers it
                        log.warning("cannot store the result of call %s", call["id"])

    def _within_tokens(self, result: ToolResult) -> ToolResult:
        """``result`` cut to its head and tail when it holds more of the chat model's tokens
        than one result may (``Session.result_token_cap``)."""
        counter, cap = self.session.conv.counter, self.session.result_token_cap
        tokens = counter.count_text(result.content)
        if tokens <= cap:
            return result
        head, middle, tail = cut(result.content, counter, cap * 2 // 3, cap // 3)
        marker = f"[… {counter.count_text(middle):,} tokens omitted: at most {cap:,} tokens per result …]"
        content = f"{head.rstrip(chr(10))}\n{marker}\n{tail.lstrip(chr(10))}"
        return dataclasses.replace(result, content=content, truncated=True)

    def _result(self, name: str, arguments: str, cancel: threading.Event) -> ToolResult:
        if cancel.is_set():
            return ToolResult.stopped()
        tools = self.tools
        if tools is None:
            return ToolResult.error(f"unknown tool {name!r}; no tools are available")
        call = tools.registry.prepare(name, arguments)
        if isinstance(call, ToolResult):
            return call
        repeats = tools.repeats.observe(call.name, call.arguments)
        request = build_request(call.tool, call.arguments, tools.workspace, repeats)
        decision = decide(request, mode=tools.mode, rules=tools.all_rules(), interactive=self.ask is not None)
        decision = self._unconfined(request, decision)
        approve_outside = None
        if decision.action is Action.DENY:
            return ToolResult.denied(decision.reason)
        if decision.action is Action.ASK:
            # The paths outside that the user is asked about: the preview (which writes
            # nothing) may read them to show the diff, and the run may use them once allowed.
            outside = tools.workspace.approver_for(request.outside) if request.outside else None
            preview = tools.registry.preview(call, tools.context(cancel, outside))
            if isinstance(preview, ToolResult):
                return preview  # the edit cannot apply: nothing to approve
            answer = self._ask(request, preview, decision.reason, call)
            if answer is Answer.DENY:
                return ToolResult.denied("the user declined this call")
            if repeats >= REPEAT_LIMIT:
                tools.repeats.reset()
            approve_outside = outside
        return tools.registry.run(call, tools.context(cancel, approve_outside))

    def _unconfined(self, request: ApprovalRequest, decision: Decision) -> Decision:
        """Where no OS sandbox confines commands, a command runs unasked only when it is on
        the read-only allowlist (or in full mode): an "always" rule alone no longer suffices,
        since nothing would hold the command to what the mode allows."""
        tools = self.tools
        check = request.command_check
        if (tools is None or request.kind is not ToolKind.SHELL or decision.action is not Action.ALLOW
                or tools.mode is Mode.FULL or (check is not None and check.read_only)):
            return decision
        from hermes_tui.tools.sandbox.support import available

        support = available()
        if support.available:
            return decision
        reason = f"{decision.reason}, but no OS sandbox confines it here ({support.reason})"
        if self.ask is None:
            return Decision(Action.DENY, f"{reason}; no one to ask (headless), so denied")
        return Decision(Action.ASK, reason)

    def _ask(self, request: ApprovalRequest, preview: str | None, reason: str, call: Call) -> Answer:
        assert self.ask is not None and self.tools is not None
        answer = Answer(self.ask(request, preview, reason))
        if answer in (Answer.ALWAYS, Answer.ALLOW_SESSION):
            rule = always_rule(request)
            if rule is None:
                return answer  # nothing a rule can allow: this time only
            if answer is Answer.ALWAYS:
                try:
                    self.tools.rules.add(self.tools.key, rule)
                except Exception as exc:  # noqa: BLE001 - allowed all the same; only remembering failed
                    log.warning("cannot store the rule '%s': %s", rule, exc)
                    self.tools.session_rules.add(self.tools.key, rule)
            else:
                self.tools.session_rules.add(self.tools.key, rule)
        return answer

    # --- compaction between steps -------------------------------------------------------
    def _exchange_completed(self, *, turn_ended: bool) -> None:
        due = self.session.exchange_completed(turn_ended=turn_ended).kind
        if due is not None:
            self.passes.request(due)  # MICRO or BATCH

    def _catch_up(self, cancel: threading.Event) -> None:
        """Over the threshold while passes are in flight, wait for them: a model faster than
        the passes would otherwise outrun them until batch compaction is the only way back.
        The wait ends as soon as the transcript is back within the threshold: the trim stage
        lands ahead of slow passes (``Session._trim_now``), and the loop need not wait for the
        model's. (A request that would not fit at all is the guard's: ``session.fit``.)"""
        while self.passes.busy and self.session.over_threshold() and not cancel.is_set():
            self.passes.settle(timeout=CATCH_UP_POLL_S)
