"""One view per transcript message: user, assistant (streamed), tool call and result, system,
marker, note. Each carries the id of the message it shows (None: not in the transcript yet).

What a message holds is outside text (a model's, a tool's, an imported transcript's): it is
shown through ``outside`` (literal, never markup, its control characters visible) and kept
as it came in ``message``."""

from __future__ import annotations

import asyncio
import contextlib
import threading
from typing import TYPE_CHECKING, Any

from textual.app import ComposeResult
from textual.containers import Vertical
from textual.content import Content
from textual.message import Message as UIMessage
from textual.widget import Widget
from textual.widgets import Button, Collapsible, Label, Static

from hermes_tui.core.content_parts import attachments
from hermes_tui.core.transcript import BATCH, Message
from hermes_tui.tui.widgets.outside import shown
from hermes_tui.tui.widgets.text import (
    attachment_label,
    body_text,
    first_line,
    one_line,
    pretty_args,
    short_args,
)
from hermes_tui.util.terminal_text import visible_controls

if TYPE_CHECKING:
    from textual.widgets import Markdown

    from hermes_tui.tools.base import ToolResult
    from hermes_tui.tui.widgets.streaming_markdown import StreamingMarkdown

STREAM_INTERVAL = 0.05  # s: a streaming reply is laid out at most 20 times a second



# Textual's Markdown (markdown-it and Pygments under it) is imported where a view first needs
# it: ~25 ms of start-up a new chat's first frame does without. ``warm_markdown`` imports it
# on a thread right after that frame, so the first reply does not wait for it either.
def markdown_widget() -> type[Markdown]:
    from textual.widgets import Markdown

    return Markdown


def streaming_markdown_widget() -> type[StreamingMarkdown]:
    from hermes_tui.tui.widgets.streaming_markdown import StreamingMarkdown

    return StreamingMarkdown


def warm_markdown() -> threading.Thread:
    thread = threading.Thread(target=streaming_markdown_widget, name="warm-markdown", daemon=True)
    thread.start()
    return thread



def attachment_rows(message: Message | None) -> list[Static]:
    if message is None or message.parts is None:
        return []
    return [Static(shown(attachment_label(a)), classes="note part-placeholder") for a in attachments(message.parts)]



class MessageView(Vertical):
    """Base of every row in the chat."""

    DEFAULT_CLASSES = "message"

    def __init__(self, message: Message | None = None, **kwargs: Any):
        super().__init__(**kwargs)
        self.message = message

    @property
    def message_id(self) -> str | None:
        return self.message.id if self.message is not None else None



class UserMessage(MessageView):
    DEFAULT_CLASSES = "message user"

    def __init__(self, text: str, message: Message | None = None):
        super().__init__(message)
        self.text = text

    def compose(self) -> ComposeResult:
        rows = attachment_rows(self.message)
        if self.text or not rows:
            yield Static(shown(self.text), classes="body")
        yield from rows



class Folded(Collapsible):
    """A ``Collapsible`` that starts with its ``-collapsed`` class already set. Textual sets
    it at mount, which styles the row and all it holds a second time: most of the cost of
    mounting the rows of a resumed session's first screen."""

    def __init__(self, *children: Widget, **kwargs: Any) -> None:
        super().__init__(*children, **kwargs)
        if self.collapsed:
            self.add_class("-collapsed", update=False)  # not mounted yet: styled once, at mount


class ToolCallView(Folded):
    """One tool call: name and short arguments; the full arguments when opened.

    Live, during an agent turn, the row follows the call: its name and arguments as they
    stream in (``stream``), the complete call (``settle``), a spinner while it runs
    (``start``, ``tick``), then how it went (``finish``: exit code, size, duration)."""

    DEFAULT_CLASSES = "tool-call"

    def __init__(self, call: dict[str, Any] | None = None):
        call = call or {}
        function = call.get("function") or {}
        self.call_id: str | None = call.get("id")
        self.tool_name = str(function.get("name") or "tool")
        self.arguments = function.get("arguments", "")
        self.state = ""  # "" (as stored) | "streaming" | "running" | "done"
        self.outcome = Content("")
        super().__init__(Static(shown(pretty_args(self.arguments)), classes="detail"),
                         title=self._title_text())

    def _retitle(self, spin: str = "") -> None:
        # Textual declares Collapsible.title a str; the label it is shown in takes a Content too.
        self.title = self._title_text(spin)  # type: ignore[assignment]  # a Content, as the label takes

    def _title_text(self, spin: str = "") -> Content:
        # A Content built from parts, never markup: a call's name and arguments are the
        # model's text (`echo [a` made a markup title raise MarkupError and end the app).
        title = Content.assemble("⚙ ", shown(self.tool_name), "  ", shown(short_args(self.arguments)))
        if self.state == "streaming":
            return title + Content.assemble("  ", ("…", "dim"))
        if self.state == "running":
            return title + Content.assemble("  ", (f"{spin} running", "dim"))
        if self.outcome:
            return title + Content("  ") + self.outcome
        return title

    def stream(self, name: str | None, piece: str) -> None:
        """A piece of the call as it forms."""
        self.state = "streaming"
        if name:
            self.tool_name = name
        self.arguments = (self.arguments if isinstance(self.arguments, str) else "") + piece
        self._retitle()

    def settle(self, call: dict[str, Any]) -> None:
        """The call is complete (as stored): its id, name and arguments are final."""
        function = call.get("function") or {}
        self.call_id = call.get("id")
        self.tool_name = str(function.get("name") or "tool")
        self.arguments = function.get("arguments", "")
        self.state = ""
        self.query_one(".detail", Static).update(shown(pretty_args(self.arguments)))
        self._retitle()

    def start(self) -> None:
        self.state = "running"
        self.tick(SPINNER[0])

    def tick(self, spin: str) -> None:
        if self.state == "running":
            self._retitle(spin)

    def finish(self, result: ToolResult) -> None:
        """How the call went."""
        self.state = "done"
        size = result.bytes if result.status.value == "ok" else 0
        self.outcome = outcome_text(result.status.value, result.exit_code, size, result.duration_ms)
        self.set_class(result.is_error, "-failed")
        self._retitle()


SPINNER = "⠋⠙⠹⠸⠼⠴⠦⠧⠇⠏"
OUTCOME_MARKS = {"ok": ("✓", "green"), "error": ("✗ error", "red"), "denied": ("✗ denied", "yellow"),
                 "stopped": ("■ stopped", "yellow"), "interrupted": ("■ interrupted", "yellow")}


def size_text(size: int) -> str:
    if size < 1024:
        return f"{size} B"
    return f"{size / 1024:.1f} KB" if size < 1024 * 1024 else f"{size / 1024 / 1024:.1f} MB"


def outcome_text(status: str, exit_code: int | None, size: int, duration_ms: float | None) -> Content:
    """``✓ exit 0  1.2 KB · 35 ms``: how a call went, for its row."""
    if status == "ok" and exit_code not in (None, 0):
        mark = Content.assemble((f"✗ exit {exit_code}", "red"))
    else:
        mark = Content.assemble(OUTCOME_MARKS.get(status, shown(status)), f" exit {exit_code}" if exit_code is not None else "")
    facts = [size_text(size)] if size or status == "ok" else []
    if duration_ms is not None:
        facts.append(f"{duration_ms / 1000:.1f} s" if duration_ms >= 1000 else f"{duration_ms:.0f} ms")
    return mark + Content.assemble("  ", (" · ".join(facts), "dim")) if facts else mark



class AssistantMessage(MessageView):
    """A reply (streamed while it arrives) and the tool calls it made, each collapsed.

    A reply the user stopped (meta ``stopped``) keeps what arrived, with a small note."""

    DEFAULT_CLASSES = "message assistant"
    STOPPED_NOTE = "stopped"

    def __init__(self, message: Message | None = None):
        super().__init__(message)
        self._stream: ThrottledMarkdownStream | None = None
        self._streaming_calls: dict[int, ToolCallView] = {}  # by the call's index in the reply
        if message is not None and message.tool_calls:
            self.add_class("-calls")
        if message is not None and message.meta.get("stopped"):
            self.add_class("-stopped")

    def compose(self) -> ComposeResult:
        content = visible_controls(body_text(self.message)) if self.message is not None else ""
        if self.message is None:  # a reply about to stream in
            yield streaming_markdown_widget()(content, classes="body")
        elif content:
            yield markdown_widget()(content, classes="body")
        yield from attachment_rows(self.message)
        for call in (self.message.tool_calls if self.message is not None else None) or []:
            yield ToolCallView(call)
        if self.has_class("-stopped"):
            yield Label(self.STOPPED_NOTE, classes="note stopped-note", markup=False)

    # --- streaming ----------------------------------------------------------------------
    async def write(self, text: str) -> None:
        if self._stream is None:
            self._stream = ThrottledMarkdownStream(self.query_one(markdown_widget()))
        self._stream.write(visible_controls(text))

    async def finish(self, message: Message | None) -> None:
        """The reply is complete (``message``) or abandoned (None: not kept)."""
        if self._stream is not None:
            await self._stream.stop()
            self._stream = None
        for streaming in self.query(streaming_markdown_widget()):
            streaming.finish()
        if message is not None:
            self.message = message
            markdown = self.query_one(markdown_widget())
            content = visible_controls(message.content)
            if markdown.source != content:
                await markdown.update(content)
            await self._settle_calls(message.tool_calls or [])
            if message.meta.get("stopped") and not self.has_class("-stopped"):
                self.add_class("-stopped")
                await self.mount(Label(self.STOPPED_NOTE, classes="note stopped-note", markup=False))
        else:
            self.add_class("-discarded")

    async def stream_call(self, index: int, name: str | None, piece: str) -> None:
        """A piece of the reply's call number ``index`` as it forms: its row shows at once."""
        view = self._streaming_calls.get(index)
        if view is None:
            view = self._streaming_calls[index] = ToolCallView()
            self.add_class("-calls")
            await self.mount(view)
        view.stream(name, piece)

    async def _settle_calls(self, calls: list[dict[str, Any]]) -> None:
        """The stored calls replace what streamed: one row each, in order (a provider that
        streams no pieces gets its rows here; a piece no call came of loses its row)."""
        for index, call in enumerate(calls):
            view = self._streaming_calls.pop(index, None)
            if view is None:
                view = ToolCallView(call)
                self.add_class("-calls")
                await self.mount(view)
            view.settle(call)
        for view in self._streaming_calls.values():
            await view.remove()
        self._streaming_calls.clear()

    def call_view(self, call_id: str) -> ToolCallView | None:
        return next((v for v in self.query_children(ToolCallView) if v.call_id == call_id), None)

    def on_unmount(self) -> None:
        if self._stream is not None:  # removed mid-reply (the screen closed): nothing more to show
            self._stream.cancel()
            self._stream = None



class ThrottledMarkdownStream:
    """Streamed text into a ``Markdown`` widget, appended at most once per ``interval``.

    Textual's ``MarkdownStream`` appends whenever a piece arrives; each append mounts or
    updates a block, which is a layout pass of the whole screen. A fast model sends far
    more pieces than anyone can read, so the pieces that arrive within ``interval`` of
    the last append go in together with the next one. Appends never overlap (one task
    makes them in turn), and ``stop`` appends whatever is still waiting.
    """

    def __init__(self, markdown: Markdown, interval: float = STREAM_INTERVAL):
        self.markdown = markdown
        self.interval = interval
        self._pending: list[str] = []
        self._wake = asyncio.Event()
        self._stopping = asyncio.Event()
        self._task = asyncio.create_task(self._run())

    def write(self, text: str) -> None:
        if self._stopping.is_set():
            raise RuntimeError("the stream has stopped")
        if text:
            self._pending.append(text)
            self._wake.set()

    async def stop(self) -> None:
        """Append what is still waiting and end the stream."""
        self._stopping.set()
        self._wake.set()
        await self._task

    def cancel(self) -> None:
        self._stopping.set()
        self._task.cancel()

    async def _run(self) -> None:
        while True:
            if not self._pending:
                if self._stopping.is_set():
                    return
                self._wake.clear()
                await self._wake.wait()
                continue
            text = "".join(self._pending)
            self._pending.clear()
            await self.markdown.append(text)
            if not self._stopping.is_set():
                with contextlib.suppress(asyncio.TimeoutError):
                    await asyncio.wait_for(self._stopping.wait(), self.interval)



class ToolResultMessage(MessageView):
    """A tool result: its first line (and a failure of the call the app ran: an error, a deny,
    a stop, an exit code other than 0); the whole output when opened."""

    DEFAULT_CLASSES = "message tool"

    def compose(self) -> ComposeResult:
        assert self.message is not None
        tool = self.message.meta.get("tool")
        tool = tool if isinstance(tool, dict) else {}
        name = self.message.name or str(tool.get("name") or "result")
        head = one_line(first_line(self.message.content)) or "(empty)"
        lines = self.message.content.count("\n") + 1 if self.message.content else 0
        more = Content.assemble("  ", (f"({lines} lines)", "dim")) if lines > 1 else Content("")
        # How the call went, when it did not go well (its call's row says so too while live).
        if tool.get("status") not in (None, "ok") or tool.get("exit_code") not in (None, 0):
            more += Content("  ") + outcome_text(str(tool["status"]), tool.get("exit_code"), int(tool.get("bytes") or 0),
                                        tool.get("duration_ms"))
        yield Folded(
            Static(shown(self.message.content), classes="detail"),
            title=Content.assemble("↳ ", shown(name), ": ", shown(head)) + more,  # parts, never markup: the tool's text
            classes="tool-result",
        )



class SystemMessage(MessageView):
    DEFAULT_CLASSES = "message system"

    def compose(self) -> ComposeResult:
        assert self.message is not None
        message = self.message
        if message.is_system_prompt:  # ours: what it says is the same every turn; its size is news
            tokens = f" · {message.token_count:,} tokens" if message.token_count is not None else ""
            title = Content(f"system prompt{tokens}")
        else:  # a transcript's own (an import): its first line tells which
            title = Content.assemble("system prompt: ", shown(one_line(first_line(message.content))))
        yield Folded(Static(shown(message.content), classes="detail"), title=title)



class MarkerMessage(MessageView):
    """The compaction marker: one collapsed row; opened, the rolling summary and, on
    request, the archived originals it stands for."""

    DEFAULT_CLASSES = "message marker"

    class ShowArchived(UIMessage):
        def __init__(self, view: MarkerMessage):
            super().__init__()
            self.view = view

    def compose(self) -> ComposeResult:
        assert self.message is not None
        meta = self.message.meta
        kind = "batch" if meta.get("compaction") == BATCH else "rolling"  # the words shown
        facts = []
        if meta.get("summary_tokens"):
            facts.append(f"{kind} summary {meta['summary_tokens']:,} tokens")
        if meta.get("tokens_saved_total"):
            facts.append(f"{meta['tokens_saved_total']:,} tokens saved")
        title = "context compacted" + (f" · {' · '.join(facts)}" if facts else "")
        with Folded(title=title, classes="marker-row"):
            yield markdown_widget()(visible_controls(str(meta.get("summary", ""))) or "_(empty summary)_", classes="summary")
            yield Button("Show archived originals", id="show-archived", compact=True)
            yield Vertical(classes="archived")

    def on_button_pressed(self, event: Button.Pressed) -> None:
        if event.button.id == "show-archived":
            event.stop()
            event.button.disabled = True
            self.post_message(self.ShowArchived(self))

    async def show_archived(self, messages: list[Message]) -> None:
        self.query_one("#show-archived", Button).display = False
        box = self.query_one(".archived", Vertical)
        await box.remove_children()
        if not messages:
            await box.mount(Label("no archived messages", classes="note"))
        else:
            await box.mount(Label(f"the {len(messages)} archived messages it condenses:", classes="note"))
            await box.mount_all(view_for(m) for m in messages)



class InfoNote(MessageView):
    """Something the app says (``/usage``, ``/help``, an error and its fix); not in the transcript."""

    DEFAULT_CLASSES = "message note"

    def __init__(self, text: str, *, title: str = "", severity: str = "information", markdown: bool = True):
        super().__init__(None)
        self.text = text
        self.note_title = title
        self.markdown = markdown
        self.add_class(f"-{severity}")

    def compose(self) -> ComposeResult:
        # A note is the app's text, but it may quote outside text (an error, the summary).
        if self.note_title:
            yield Label(shown(self.note_title), classes="note-title")
        if self.markdown:
            yield markdown_widget()(visible_controls(self.text), classes="body")
        else:
            yield Static(shown(self.text), classes="body")


def view_for(message: Message) -> MessageView:
    if message.is_marker:
        return MarkerMessage(message)
    if message.role == "user":
        return UserMessage(body_text(message), message)
    if message.role == "tool":
        return ToolResultMessage(message)
    if message.role == "system":
        return SystemMessage(message)
    return AssistantMessage(message)
