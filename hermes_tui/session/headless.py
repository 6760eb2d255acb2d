"""``hermes-tui run PROMPT``: one agent turn without the UI.

The same loop as the app (``session.agent.AgentTurn``) with no one to ask: anything the
approval mode does not allow outright is denied, never waited for. Tool activity goes
to stderr, one line per call; the final answer to stdout (both with their control characters
made visible: ``terminal_text``; the session stores them as they came). The turn is stored as a
session like any other (``--resume ID`` carries one on); Ctrl-C or SIGTERM stops it
the way Esc does in the app (the running command's group is killed, every call gets a
result).
"""

from __future__ import annotations

import json
import signal
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TextIO

from hermes_tui.compaction.engine import PassReport
from hermes_tui.config import Config
from hermes_tui.core.transcript import Message
from hermes_tui.session.agent import (
    COMPLETED,
    MAX_STEPS,
    AgentListener,
    AgentResult,
    AgentTurn,
    Tools,
)
from hermes_tui.session.fit import RequestSize
from hermes_tui.session.passes import BackgroundPasses
from hermes_tui.session.wiring import make_tools, start_mcp
from hermes_tui.store import Store
from hermes_tui.tools.base import ToolResult
from hermes_tui.tools.mcp import McpManager, ServerStatus
from hermes_tui.tools.registry import one_line
from hermes_tui.util.terminal_text import visible_controls
from hermes_tui.util.untrusted import InputError, load_json

if TYPE_CHECKING:
    from hermes_tui.chat.client import ChatClient
    from hermes_tui.compaction.summarizer import Summarizer

TITLE_CHARS = 60


@dataclass
class RunOutcome:
    session_id: str
    result: AgentResult


class ActivityPrinter(AgentListener):
    """One line per tool call: tool, arguments, outcome, size, duration; one line when the
    guard compacts before a request, and one for what it did."""

    def __init__(self, out: TextIO) -> None:
        self.out = out

    def say(self, line: str) -> None:
        # Every line quotes outside text (a command, a path, an error a tool or server wrote),
        # and ``out`` is usually a terminal: its escape sequences must not act there.
        print(visible_controls(line), file=self.out, flush=True)

    def notice(self, text: str) -> None:
        self.say(f"note: {text}")

    def compacting(self, size: RequestSize) -> None:
        self.say(f"compacting: {size.describe()}; compacting before the request")

    def compacted(self, report: PassReport | None, size: RequestSize) -> None:
        if report is None:
            line = "compaction failed (see the log)"
        else:
            fields = report.fields
            line = (f"compacted ({report.outcome}): {fields.get('tokens_before', 0):,} -> "
                    f"{fields.get('tokens_after', 0):,} tokens; the request "
                    f"{'fits' if size.fits else 'still does not fit'} ({size.needed:,} of {size.limit or 0:,})")
        self.say(line)

    def call_finished(self, call_id: str, name: str, arguments: Any, result: ToolResult,
                      message: Message) -> None:
        outcome = result.status.value
        if result.exit_code is not None:
            outcome += f" exit {result.exit_code}"
        duration = f"{result.duration_ms:.0f} ms" if result.duration_ms is not None else "-"
        line = f"tool {name} {summarize_arguments(arguments)} -> {outcome}, {_size(result)}, {duration}"
        if result.status.value in ("denied", "error"):
            line += f": {one_line(result.content, 160)}"
        self.say(line)


def summarize_arguments(arguments: Any, limit: int = 80) -> str:
    try:
        parsed = load_json(arguments, model_output=True) if isinstance(arguments, str) else arguments
    except InputError:  # not JSON, or nested too deep to walk: shown as the text it is
        return one_line(str(arguments)[: limit * 4], limit)
    if not isinstance(parsed, dict):
        return one_line(str(arguments), limit)
    text = " ".join(f"{key}={json.dumps(value, ensure_ascii=False)}" for key, value in parsed.items())
    return one_line(text, limit)


def _size(result: ToolResult) -> str:
    size = result.bytes or len(result.content.encode())
    return f"{size} B" if size < 1024 else f"{size / 1024:.1f} KB"


@contextmanager
def stop_on_signals(cancel: threading.Event) -> Iterator[None]:
    """SIGINT and SIGTERM set ``cancel`` (the turn stops cleanly) instead of killing us mid-write."""
    previous = {sig: signal.getsignal(sig) for sig in (signal.SIGINT, signal.SIGTERM)}
    for sig in previous:
        signal.signal(sig, lambda *_: cancel.set())
    try:
        yield
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


def run_headless(
    config: Config, store: Store, prompt: str, *, workspace: str | None = None, mode: str | None = None,
    resume: str | None = None, activity: TextIO = sys.stderr, chat: ChatClient | None = None,
    summarizer: Summarizer | None = None,
) -> RunOutcome:
    """Run one turn on a new session (or ``resume``); raises ChatError, StoreError, ValueError."""
    mcp = start_mcp(config)
    try:
        tools = make_tools(config, store, mcp=mcp, workspace=workspace, mode=mode)
        if mcp is not None:
            _wait_for_servers(mcp, config, activity)
        return _run(config, store, prompt, tools, resume=resume, activity=activity, chat=chat,
                    summarizer=summarizer)
    finally:
        if mcp is not None:
            mcp.close()


def _wait_for_servers(mcp: McpManager, config: Config, activity: TextIO) -> None:
    longest = max(server.timeout for server in config.mcp_servers.values())
    mcp.wait(timeout=longest + 5)  # each start has its own bound; this one only guards a hang
    for state in mcp.states():
        if state.status is not ServerStatus.READY and state.reason != "disabled":
            print(visible_controls(f"mcp {state.line()}"), file=activity, flush=True)  # the server's own words


def _run(config: Config, store: Store, prompt: str, tools: Tools, *, resume: str | None, activity: TextIO,
         chat: ChatClient | None, summarizer: Summarizer | None) -> RunOutcome:
    from hermes_tui.session.wiring import open_session

    session_id = None
    if resume is not None:
        session_id = store.get_session(resume).id
        store.acquire_lease(session_id)  # before loading: one writer
    try:
        session = open_session(config, store, session_id=session_id, title=prompt[:TITLE_CHARS],
                               chat=chat, summarizer=summarizer)
    except BaseException:
        if session_id:
            store.release_lease(session_id)
        raise
    try:
        session.resolve_context_window()
        session.add_user_message(prompt)
        printer = ActivityPrinter(activity)
        turn = AgentTurn(session, tools, ask=None, listener=printer, max_steps=config.agent.max_steps,
                         passes=BackgroundPasses(session))
        cancel = threading.Event()
        with stop_on_signals(cancel):
            try:
                result = turn.run(cancel)
            finally:
                turn.passes.settle()  # the stored session ends compacted as far as it is due
        return RunOutcome(session.info.id, result)
    finally:
        session.close()


def failure_line(outcome: RunOutcome, max_steps: int) -> str | None:
    """The one line for a turn that did not complete; None when it did."""
    result = outcome.result
    if result.outcome == COMPLETED:
        return None
    if result.outcome == MAX_STEPS:
        return (f"the turn reached its step limit ({max_steps}, agent.max_steps) without a final answer; "
                f"session {outcome.session_id} (--resume it to go on)")
    return f"stopped; session {outcome.session_id} (--resume it to go on)"
