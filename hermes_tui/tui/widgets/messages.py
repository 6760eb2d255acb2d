"""How transcript messages look in the chat: one view per message, compact by default.

Each view carries the id of the message it shows, so the list can follow the
transcript when a pass splices it (absorbed messages go, the marker comes) without
re-rendering the rest. Views with no id are not in the transcript (yet): a reply
still streaming, a note such as ``/usage``.
"""

from __future__ import annotations

import json
from typing import Any, Iterable

from textual.app import ComposeResult
from textual.containers import Vertical, VerticalScroll
from textual.markup import escape
from textual.message import Message as UIMessage
from textual.widget import Widget
from textual.widgets import Button, Collapsible, Label, Markdown, Static

from hermes_tui.transcript import Message

SHORT = 68  # a one-line summary of a call or result, in cells


def one_line(text: str, limit: int = SHORT) -> str:
    line = " ".join(text.split())
    return line if len(line) <= limit else line[: limit - 1] + "…"


def first_line(text: str) -> str:
    for line in text.splitlines():
        if line.strip():
            return line.strip()
    return ""


def short_args(arguments: Any) -> str:
    """``{"command": "ls -la"}`` -> ``ls -la``; several keys -> ``path=a.py, line=3``."""
    if isinstance(arguments, str):
        try:
            arguments = json.loads(arguments)
        except (ValueError, TypeError):
            return one_line(arguments)
    if isinstance(arguments, dict):
        if len(arguments) == 1:
            value = next(iter(arguments.values()))
            return one_line(value if isinstance(value, str) else json.dumps(value, ensure_ascii=False))
        parts = [f"{key}={value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)}"
                 for key, value in arguments.items()]
        return one_line(", ".join(parts))
    return one_line(json.dumps(arguments, ensure_ascii=False))


def pretty_args(arguments: Any) -> str:
    if isinstance(arguments, str):
        try:
            return json.dumps(json.loads(arguments), indent=2, ensure_ascii=False)
        except (ValueError, TypeError):
            return arguments
    return json.dumps(arguments, indent=2, ensure_ascii=False)


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
        yield Static(self.text, markup=False, classes="body")


class ToolCallView(Collapsible):
    """One tool call: name and short arguments; the full arguments when opened."""

    DEFAULT_CLASSES = "tool-call"

    def __init__(self, call: dict[str, Any]):
        function = call.get("function") or {}
        self.tool_name = str(function.get("name") or "tool")
        arguments = function.get("arguments", "")
        title = f"⚙ {escape(self.tool_name)}  {escape(short_args(arguments))}"
        super().__init__(Static(pretty_args(arguments), markup=False, classes="detail"), title=title)


class AssistantMessage(MessageView):
    """A reply (streamed while it arrives) and the tool calls it made, each collapsed."""

    DEFAULT_CLASSES = "message assistant"

    def __init__(self, message: Message | None = None):
        super().__init__(message)
        self._stream = None
        if message is not None and message.tool_calls:
            self.add_class("-calls")

    def compose(self) -> ComposeResult:
        content = self.message.content if self.message is not None else ""
        if content or self.message is None:
            yield Markdown(content, classes="body")
        for call in (self.message.tool_calls if self.message is not None else None) or []:
            yield ToolCallView(call)

    # --- streaming ----------------------------------------------------------------------
    async def write(self, text: str) -> None:
        if self._stream is None:
            self._stream = Markdown.get_stream(self.query_one(Markdown))
        await self._stream.write(text)

    async def finish(self, message: Message | None) -> None:
        """The reply is complete (``message``) or abandoned (None: not kept)."""
        if self._stream is not None:
            await self._stream.stop()
            self._stream = None
        if message is not None:
            self.message = message
            markdown = self.query_one(Markdown)
            if markdown.source != message.content:
                await markdown.update(message.content)
        else:
            self.add_class("-discarded")


class ToolResultMessage(MessageView):
    """A tool result: its first line; the whole output when opened."""

    DEFAULT_CLASSES = "message tool"

    def compose(self) -> ComposeResult:
        assert self.message is not None
        name = self.message.name or "result"
        head = one_line(first_line(self.message.content)) or "(empty)"
        lines = self.message.content.count("\n") + 1 if self.message.content else 0
        more = f"  [dim]({lines} lines)[/]" if lines > 1 else ""
        yield Collapsible(
            Static(self.message.content, markup=False, classes="detail"),
            title=f"↳ {escape(name)}: {escape(head)}{more}",
            classes="tool-result",
        )


class SystemMessage(MessageView):
    DEFAULT_CLASSES = "message system"

    def compose(self) -> ComposeResult:
        assert self.message is not None
        yield Collapsible(
            Static(self.message.content, markup=False, classes="detail"),
            title=f"system prompt: {escape(one_line(first_line(self.message.content)))}",
        )


class MarkerMessage(MessageView):
    """The compaction marker: one collapsed row; opened, the rolling summary and, on
    request, the archived originals it stands for."""

    DEFAULT_CLASSES = "message marker"

    class ShowArchived(UIMessage):
        def __init__(self, view: "MarkerMessage"):
            super().__init__()
            self.view = view

    def compose(self) -> ComposeResult:
        assert self.message is not None
        meta = self.message.meta
        kind = "batch" if meta.get("compaction") == "batch" else "rolling"
        facts = []
        if meta.get("summary_tokens"):
            facts.append(f"{kind} summary {meta['summary_tokens']:,} tokens")
        if meta.get("tokens_saved_total"):
            facts.append(f"{meta['tokens_saved_total']:,} tokens saved")
        title = "context compacted" + (f" · {' · '.join(facts)}" if facts else "")
        with Collapsible(title=title, classes="marker-row"):
            yield Markdown(str(meta.get("summary", "")) or "_(empty summary)_", classes="summary")
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
        if self.note_title:
            yield Label(self.note_title, classes="note-title", markup=False)
        if self.markdown:
            yield Markdown(self.text, classes="body")
        else:
            yield Static(self.text, classes="body", markup=False)


def columns(rows: Iterable[tuple[str, str]], gap: int = 2) -> str:
    """Two aligned columns of plain text (lighter than a Markdown table in a small terminal)."""
    rows = list(rows)
    width = max((len(name) for name, _ in rows), default=0) + gap
    return "\n".join(f"{name:<{width}}{value}" for name, value in rows)


def view_for(message: Message) -> MessageView:
    if message.is_marker:
        return MarkerMessage(message)
    if message.role == "user":
        return UserMessage(message.content, message)
    if message.role == "tool":
        return ToolResultMessage(message)
    if message.role == "system":
        return SystemMessage(message)
    return AssistantMessage(message)


class MessageList(VerticalScroll):
    """The conversation, kept in step with the transcript."""

    def on_mount(self) -> None:
        self.anchor()

    def views(self) -> list[MessageView]:
        return list(self.query_children(MessageView))

    async def show(self, messages: Iterable[Message]) -> None:
        await self.remove_children()
        await self.mount_all(view_for(m) for m in messages)
        self.anchor()

    async def add(self, view: Widget) -> None:
        await self.mount(view)
        self.anchor()

    async def sync(self, messages: list[Message]) -> None:
        """Follow a splice: drop the views of messages no longer in the transcript and add
        the marker where it belongs. Other new messages are the chat's to show (a reply
        being streamed, a message being sent); views without an id stay as they are."""
        ids = {m.id for m in messages}
        gone = [v for v in self.views() if v.message_id is not None and v.message_id not in ids]
        if gone:
            await self.remove_children(gone)
        shown = {v.message_id: v for v in self.views() if v.message_id is not None}
        for index, message in enumerate(messages):
            if not message.is_marker or message.id in shown:
                continue
            following = next((shown[m.id] for m in messages[index + 1:] if m.id in shown), None)
            if following is None:
                # Nothing after it is shown yet: before the first view still waiting for its message.
                following = next((v for v in self.views() if v.message_id is None and not v.has_class("note")), None)
            view = view_for(message)
            if following is not None:
                await self.mount(view, before=following)
            else:
                await self.mount(view)
            shown[message.id] = view
