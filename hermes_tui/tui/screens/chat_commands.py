"""The chat screen's slash commands: ``/help``, ``/usage``, ``/mode`` … (the table is ``tui.commands``).

A mixin of ``ChatScreen``: ``run_slash`` finds the handler ``slash_<name>`` for a command
of the table and runs it (a coroutine in a worker, its failure one notice, never a traceback).
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

from hermes_tui.analysis.occupancy_chart import usage_chart
from hermes_tui.compaction.policy import BATCH
from hermes_tui.session.pass_queue import PassRequest
from hermes_tui.tools.approval import Mode
from hermes_tui.tui import commands
from hermes_tui.tui.widgets.text import columns
from hermes_tui.util.logs import get_logger

if TYPE_CHECKING:
    from hermes_tui.session.agent import Tools
    from hermes_tui.session.session import Session
    from hermes_tui.tui.screens.chat_host import ChatHost
    from hermes_tui.tui.widgets.message_views import InfoNote

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


class SlashCommandsMixin:
    session: Session
    tools: Tools | None
    last_outcome: str | None
    busy: bool
    app: Any
    hermes: ChatHost
    refresh_status: Callable[[], None]
    request_compaction: Callable[..., None]

    async def note(self, text: str, *, title: str = "", severity: str = "information",
                   markdown: bool = False) -> InfoNote: ...

    def action_slash(self, text: str) -> None:
        self.run_slash(text)

    def run_slash(self, text: str) -> bool:
        """Run ``text`` if it is a slash command; False when it is a message to send."""
        invocation = commands.parse(text)
        if invocation is None:
            return False
        if invocation.command is None:
            self._run_guarded(self.note(f"Unknown command /{invocation.name}: /help lists the commands.",
                                        severity="warning"))
            return True
        handler: Callable[[str], Any] = getattr(self, f"slash_{invocation.name}")
        result = handler(invocation.arg)
        if result is not None:
            self._run_guarded(result)
        return True

    def _run_guarded(self, coroutine: Awaitable[Any]) -> None:
        async def guarded() -> None:
            try:
                await coroutine
            except Exception:
                log.exception("a command failed")
                self.app.notify("That command failed; details are in the log.", severity="error")

        self.run_worker(guarded(), group="commands")  # type: ignore[attr-defined]

    async def slash_help(self, arg: str) -> None:
        text = columns((c.usage, c.help) for c in commands.COMMANDS) + "\n\n" + columns(KEYS)
        await self.note(text, title="Commands and keys")

    def slash_new(self, arg: str) -> None:
        self.hermes.new_session()

    def slash_sessions(self, arg: str) -> None:
        self.hermes.show_sessions()

    def slash_compact(self, arg: str) -> None:
        # The status bar shows it running; a note says what it did when it lands.
        self.request_compaction(PassRequest(BATCH, focus=arg or None, manual=True))

    async def slash_usage(self, arg: str) -> None:
        u = self.session.usage()
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
            ("last pass", self._last_pass_text(u["last_pass"])),
            ("compression model speed", _speed_text(u["compression_speed"])),
        ]
        chart = usage_chart(u["requests"], u["threshold_tokens"])
        await self.note(columns(rows) + (f"\n\n{chart}" if chart else ""), title="Usage")

    def _last_pass_text(self, outcome: str | None) -> str:
        last = self.session.last_pass
        detail = last.detail if last is not None else None
        return f"{outcome}: {detail}" if outcome and detail else outcome or self.last_outcome or "–"

    async def slash_summary(self, arg: str) -> None:
        summary = self.session.compactor.rolling_summary
        if not summary:
            await self.note("No rolling summary yet: the first pass writes one after a completed turn.",
                            title="Rolling summary")
        else:
            tokens = self.session.compactor.state.summary_tokens
            await self.note(summary, title=f"Rolling summary ({tokens:,} tokens)", markdown=True)

    async def slash_model(self, arg: str) -> None:
        """``/model NAME`` switches the chat model; ``/model`` picks it from a list. The choice
        is written to config.yaml and the app reloads its clients (as after /settings)."""
        from hermes_tui.config import ConfigError
        from hermes_tui.providers.choices import ChoiceError, find_choice
        from hermes_tui.tui.screens.model_picker import ModelPicker

        app = self.hermes
        if arg:
            try:  # scans the HF cache, may ask the endpoint: off the UI thread
                choice = await asyncio.to_thread(find_choice, arg, app.config.model, app.config_path)
            except ChoiceError as exc:
                await self.note(str(exc), title="The chat model was not changed", severity="warning")
                return
        else:
            choice = await self.app.push_screen_wait(ModelPicker(app.config.model, app.config_path, self._models_now()))
            if choice is None:
                return
        if self.busy:  # switching reopens the session: what is in flight lands in this one first
            await self.note(f"Switching to {choice.label} once the reply and the passes in flight are done.")
            while self.busy:
                await asyncio.sleep(0.1)
        try:
            changes = app.use_chat_model(choice)
        except ConfigError as exc:
            await self.note(str(exc), title="The chat model was not changed", severity="error")
            return
        self.app.notify(", ".join(f"{key} = {value}" for key, value in changes.items()), title="Chat model set")

    def _models_now(self) -> str:
        u = self.session.usage()
        window = f"{u['context_limit']:,} tokens ({u['context_source']})" if u["context_limit"] else "resolving …"
        return columns([
            ("chat model", getattr(self.session.chat, "model_name", "") or "(none)"),
            ("context window", window),
            ("compression model", getattr(self.session.compactor.ctx.summarizer, "model_name", "?")),
        ])

    async def slash_mode(self, arg: str) -> None:
        """``/mode MODE`` switches the approval mode (for this run of the app; agent.approval in
        config.yaml is the one it starts in); ``/mode`` shows it and the choices."""
        current = self.hermes.approval_mode
        if not arg:
            rows = [(("▸ " if mode is current else "  ") + mode.value, MODE_HELP[mode]) for mode in Mode]
            await self.note(columns(rows) + "\n\n/mode MODE switches (agent.approval in config.yaml sets the "
                            "one the app starts in).", title=f"Approval mode: {current.value}")
            return
        try:
            mode = Mode(arg.strip().lower())
        except ValueError:
            await self.note(f"/mode {arg}: not a mode; the modes are {', '.join(m.value for m in Mode)}.",
                            severity="warning")
            return
        self.hermes.approval_mode = mode
        if self.tools is not None:
            self.tools.mode = mode  # the call after this one is decided in the new mode
        self.refresh_status()
        warning = " Edits and commands inside the workspace now run without asking." if mode is Mode.FULL else ""
        await self.note(f"Approval mode: {mode.value} ({MODE_HELP[mode]}).{warning}",
                        severity="warning" if mode is Mode.FULL else "information")

    def slash_models(self, arg: str) -> None:
        self.hermes.open_tool_screen("models")

    def slash_tools(self, arg: str) -> None:
        self.hermes.open_tool_screen("tools")

    def slash_bench(self, arg: str) -> None:
        self.hermes.open_tool_screen("bench")

    def slash_settings(self, arg: str) -> None:
        self.hermes.open_tool_screen("settings")

    def slash_quit(self, arg: str) -> None:
        self.app.exit()


def _speed_text(speed: dict | None) -> str:
    """What defrag and batch pieces are sized by: a pass's cost at a glance."""
    if speed is None:
        return "no model (any piece whole)"
    figures = f"{speed['prompt_tps']:,.0f} prompt, {speed['generation_tps']:,.0f} generated tokens/s"
    return figures + (" (measured)" if speed["measured"] else " (assumed until a call is measured)")
