"""The chat screen's slash commands: ``/help``, ``/usage``, ``/mode`` … a handler for each command
of the table (``tui.commands``).

A handler takes a ``CommandContext`` (the chat's session, the screen's turns and passes, the
screen itself for notes and the app) and the command's argument. ``run`` finds the handler for
a command typed and runs it (a coroutine in a worker of the screen, its failure one notice,
never a traceback).
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from hermes_tui.analysis.occupancy_chart import usage_chart
from hermes_tui.core.transcript import BATCH
from hermes_tui.session.pass_queue import PassRequest
from hermes_tui.tools.approval import Mode
from hermes_tui.tui import commands
from hermes_tui.tui.widgets.text import columns
from hermes_tui.util.logs import get_logger

if TYPE_CHECKING:
    from hermes_tui.session.session import Session
    from hermes_tui.tui.screens.chat_compaction import PassRunner
    from hermes_tui.tui.screens.chat_host import ChatHost
    from hermes_tui.tui.screens.chat_turns import TurnController
    from hermes_tui.tui.screens.chat_view import ChatView

log = get_logger("tui")

KEYS = (
    ("Enter", "send"),
    ("Ctrl+J", "new line (Shift+Enter too, where the terminal reports it)"),
    ("Up / Down", "earlier / later inputs (on the first / last line)"),
    ("Tab, Right", "complete a /command"),
    ("Escape", "stop the reply being written and the tool running"),
    ("Ctrl+N", "new session"),
    ("Ctrl+R", "sessions"),
    ("Ctrl+O", "compact now"),
    ("Ctrl+G", "usage"),
    ("F1", "this help"),
    ("Ctrl+T", "show earlier messages (a long session shows its newest first)"),
    ("Ctrl+P", "command palette"),
    ("Ctrl+Q", "quit"),
)

MODE_HELP = {
    Mode.READ_ONLY: "reads only; edits and commands are denied (allowlisted read-only commands run)",
    Mode.ASK: "reads run; edits and commands ask first (allowlisted read-only commands run)",
    Mode.AUTO_EDIT: "reads and workspace edits run; commands ask",
    Mode.FULL: "everything inside the workspace runs unasked (paths outside still ask), and commands run "
               "with no OS sandbox: they can do anything you can",
}


@dataclass(frozen=True)
class CommandContext:
    """What a slash command works with."""

    session: Session
    view: ChatView  # notes, the status bar, whether the chat is busy, the app
    turns: TurnController  # the tools, whose approval mode /mode changes
    passes: PassRunner  # /compact, and the last outcome /usage shows

    @property
    def host(self) -> ChatHost:
        return self.view.host


Handler = Callable[[CommandContext, str], Awaitable[None] | None]


def run(text: str, context: CommandContext) -> bool:
    """Run ``text`` if it is a slash command; False when it is a message to send."""
    invocation = commands.parse(text)
    if invocation is None:
        return False
    if invocation.command is None:
        _run_guarded(context, context.view.note(f"Unknown command /{invocation.name}: /help lists the commands.",
                                                severity="warning"))
        return True
    if invocation.command.screen:
        context.host.open_tool_screen(invocation.name)
        return True
    result = HANDLERS[invocation.name](context, invocation.arg)
    if result is not None:
        _run_guarded(context, result)
    return True


def _run_guarded(context: CommandContext, coroutine: Awaitable[Any]) -> None:
    app = context.view.app

    async def guarded() -> None:
        try:
            await coroutine
        except Exception:
            log.exception("a command failed")
            app.notify("That command failed; details are in the log.", severity="error")

    context.view.run_worker(guarded(), group="commands")


# --- the handlers ---------------------------------------------------------------------------
async def show_help(context: CommandContext, arg: str) -> None:
    text = columns((c.usage, c.help) for c in commands.COMMANDS) + "\n\n" + columns(KEYS)
    await context.view.note(text, title="Commands and keys")


def new_session(context: CommandContext, arg: str) -> None:
    context.host.new_session()


def show_sessions(context: CommandContext, arg: str) -> None:
    context.host.show_sessions()


def compact(context: CommandContext, arg: str) -> None:
    # The status bar shows it running; a note says what it did when it lands.
    context.passes.request(PassRequest(BATCH, focus=arg or None, manual=True))


async def show_usage(context: CommandContext, arg: str) -> None:
    u = context.session.usage()
    window = f"{u['context_limit']:,} tokens ({u['context_source']})" if u["context_limit"] else "resolving …"
    occupancy = f"{u['occupancy_pct']:.1f}% of the compaction threshold" if u["occupancy_pct"] is not None else "–"
    threshold = f"{u['threshold_tokens']:,} tokens" if u["threshold_tokens"] else "–"
    rows = [
        ("tokens in context", f"{u['tokens']:,} ({u['messages']} messages)"),
        ("system prompt", f"{u['system_prompt_tokens']:,} tokens" if u["system_prompt_tokens"] else "–"),
        ("context window", window),
        ("compaction threshold", threshold),
        ("occupancy", occupancy),
        ("micro passes", str(u["passes"])),
        ("tokens saved", f"{u['tokens_saved']:,}"),
        ("rolling summary", f"{u['summary_tokens']:,} tokens"),
        ("batch compactions", str(u["batch_compactions"])),
        ("last pass", _last_pass_text(context, u["last_pass"])),
        ("compression model speed", _speed_text(u["compression_speed"])),
    ]
    chart = usage_chart(u["requests"], u["threshold_tokens"])
    await context.view.note(columns(rows) + (f"\n\n{chart}" if chart else ""), title="Usage")


def _last_pass_text(context: CommandContext, outcome: str | None) -> str:
    last = context.session.last_pass
    detail = last.detail if last is not None else None
    return f"{outcome}: {detail}" if outcome and detail else outcome or context.passes.last_outcome or "–"


def _speed_text(speed: dict[str, Any] | None) -> str:
    """What defrag and batch pieces are sized by: a pass's cost at a glance."""
    if speed is None:
        return "no model (any piece whole)"
    figures = f"{speed['prompt_tps']:,.0f} prompt, {speed['generation_tps']:,.0f} generated tokens/s"
    return figures + (" (measured)" if speed["measured"] else " (assumed until a call is measured)")


async def show_summary(context: CommandContext, arg: str) -> None:
    compactor = context.session.compactor
    summary = compactor.rolling_summary
    if not summary:
        await context.view.note("No rolling summary yet: the first pass writes one after a completed turn.",
                                title="Rolling summary")
    else:
        tokens = compactor.state.summary_tokens
        await context.view.note(summary, title=f"Rolling summary ({tokens:,} tokens)", markdown=True)


async def switch_model(context: CommandContext, arg: str) -> None:
    """``/model NAME`` switches the chat model; ``/model`` picks it from a list. The choice
    is written to config.yaml and the app reloads its clients (as after /settings)."""
    from hermes_tui.config import ConfigError
    from hermes_tui.providers.choices import ChoiceError, ModelChoice, find_choice
    from hermes_tui.tui.screens.model_picker import ModelPicker

    host, view = context.host, context.view
    choice: ModelChoice | None
    if arg:
        try:  # scans the HF cache, may ask the endpoint: off the UI thread
            choice = await asyncio.to_thread(find_choice, arg, host.config.model, host.config_path)
        except ChoiceError as exc:
            await view.note(str(exc), title="The chat model was not changed", severity="warning")
            return
    else:
        choice = await view.app.push_screen_wait(ModelPicker(host.config.model, host.config_path,
                                                             _models_now(context.session)))
        if choice is None:
            return
    if view.busy:  # switching reopens the session: what is in flight lands in this one first
        await view.note(f"Switching to {choice.label} once the reply and the passes in flight are done.")
        while view.busy:
            await asyncio.sleep(0.1)
    try:
        changes = host.use_chat_model(choice)
    except ConfigError as exc:
        await view.note(str(exc), title="The chat model was not changed", severity="error")
        return
    view.app.notify(", ".join(f"{key} = {value}" for key, value in changes.items()), title="Chat model set")


def _models_now(session: Session) -> str:
    u = session.usage()
    window = f"{u['context_limit']:,} tokens ({u['context_source']})" if u["context_limit"] else "resolving …"
    return columns([
        ("chat model", getattr(session.chat, "model_name", "") or "(none)"),
        ("context window", window),
        ("compression model", getattr(session.compactor.ctx.summarizer, "model_name", "?")),
    ])


async def switch_mode(context: CommandContext, arg: str) -> None:
    """``/mode MODE`` switches the approval mode (for this run of the app; agent.approval in
    config.yaml is the one it starts in); ``/mode`` shows it and the choices."""
    host, view = context.host, context.view
    current = host.approval_mode
    if not arg:
        rows = [(("▸ " if mode is current else "  ") + mode.value, MODE_HELP[mode]) for mode in Mode]
        await view.note(columns(rows) + "\n\n/mode MODE switches (agent.approval in config.yaml sets the "
                        "one the app starts in).", title=f"Approval mode: {current.value}")
        return
    try:
        mode = Mode(arg.strip().lower())
    except ValueError:
        await view.note(f"/mode {arg}: not a mode; the modes are {', '.join(m.value for m in Mode)}.",
                        severity="warning")
        return
    host.approval_mode = mode
    tools = context.turns.tools
    if tools is not None:
        tools.mode = mode  # the call after this one is decided in the new mode
    view.refresh_status()
    warning = " Edits and commands inside the workspace now run without asking." if mode is Mode.FULL else ""
    await view.note(f"Approval mode: {mode.value} ({MODE_HELP[mode]}).{warning}",
                    severity="warning" if mode is Mode.FULL else "information")


def quit_app(context: CommandContext, arg: str) -> None:
    context.view.app.exit()


HANDLERS: dict[str, Handler] = {
    "help": show_help,
    "new": new_session,
    "sessions": show_sessions,
    "compact": compact,
    "usage": show_usage,
    "summary": show_summary,
    "model": switch_model,
    "mode": switch_mode,
    "quit": quit_app,
}
