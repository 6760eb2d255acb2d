"""The chat's message list, following the transcript: each view (``message_views``) carries
the id of the message it shows, so the list can follow the transcript when a pass splices it (absorbed messages go, the marker comes) without
re-rendering the rest. Views with no id are not in the transcript (yet): a reply
still streaming, a note such as ``/usage``.

The list is virtualized: only the newest messages have views (widgets), at most
``WINDOW`` of them and about ``BUDGET`` widgets in all (a long Markdown reply is dozens
of widgets, a collapsed tool row three); the older ones wait, as plain messages, behind
a "show earlier messages" row at the top and get views on request (the row, scrolling
to the top, a key). Every layout pass of the screen walks every widget in it, so a long
resumed session would otherwise make each one (while a reply streams, a keypress waits
for it) cost in proportion to its length. For the same reason a streaming reply is
laid out at most ``1 / STREAM_INTERVAL`` times a second, however fast its pieces arrive.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from textual import events, on
from textual.binding import Binding
from textual.containers import VerticalScroll
from textual.message import Message as UIMessage
from textual.widget import Widget
from textual.widgets import Static

from hermes_tui.compaction.trim import original_of
from hermes_tui.core.content_parts import attachments
from hermes_tui.core.transcript import Message
from hermes_tui.tui.widgets.message_views import InfoNote, MessageView, view_for
from hermes_tui.tui.widgets.text import body_text

WINDOW = 60            # message views mounted at most: the newest; older ones on request
BUDGET = 200           # ... and about this many widgets in them (``weight``), but
MIN_VIEWS = 8          # ... never fewer views than this (if there are as many messages)

_LIST_ITEM = re.compile(r"([-*+]|\d+[.)])\s")



def markdown_blocks(text: str) -> int:
    """About how many widgets Textual's ``Markdown`` makes of ``text``: a block (paragraph,
    heading, fence, table row) is one, a list one more and each item four (the item, its
    bullet, a column, the paragraph)."""
    blocks, fence, blank, listing = 0, False, True, False
    for line in text.splitlines():
        stripped = line.strip()
        if stripped.startswith(("```", "~~~")):
            blocks += not fence
            fence, blank, listing = not fence, False, False
        elif fence:
            continue
        elif not stripped:
            blank = True
        else:
            stripped = stripped.lstrip("> ")
            if _LIST_ITEM.match(stripped):
                blocks += 4 + (not listing)
                listing = True
            elif blank or stripped.startswith(("#", "|")):
                blocks += 1
                listing = listing and not blank
            blank = False
    return blocks



def weight(message: Message) -> int:
    """About how many widgets the view of ``message`` lays out (a collapsed row: its view,
    the collapsible and its title): what it adds to every layout pass of the screen."""
    if message.is_marker or message.role in ("tool", "system"):
        return 3
    rows = len(attachments(message.parts)) if message.parts is not None else 0
    if message.role == "user":
        return 2 + rows
    calls = len(message.tool_calls or [])
    body = body_text(message)
    return 1 + rows + 2 * calls + (1 + markdown_blocks(body) if body else 0)



def lines_at_least(message: Message) -> int:
    """The fewest screen lines the view of ``message`` can take at any width: a collapsed row
    one, a user's message a line per line it has, a reply a line per block (a paragraph, a
    list item, a line of code) and per call. Never more than it takes, so views whose sum
    reaches the screen's height do fill it."""
    if message.is_marker or message.role in ("tool", "system"):
        return 1
    rows = len(attachments(message.parts)) if message.parts is not None else 0
    body = body_text(message)
    if message.role == "user":
        return rows + max(1, len(body.splitlines()))
    return rows + len(message.tool_calls or []) + (_blocks_at_least(body) if body else 0)



def _blocks_at_least(text: str) -> int:
    blocks, fence, previous_blank = 0, False, True
    for line in text.splitlines():
        stripped = line.strip()
        if stripped.startswith(("```", "~~~")):
            fence = not fence
        elif fence:
            blocks += 1  # a line of code is a line on screen
        elif stripped:
            blocks += previous_blank or bool(_LIST_ITEM.match(stripped.lstrip("> ")))
        previous_blank = not stripped
    return max(1, blocks)



def weight_of(item: Message | WaitingNote | Widget) -> int:
    """``weight`` of a message, a waiting note or a view with no message (an ``InfoNote``, a
    reply being written)."""
    if isinstance(item, Message):
        return weight(item)
    if isinstance(item, (WaitingNote, InfoNote)):
        return 2 + (bool(item.title if isinstance(item, WaitingNote) else item.note_title)) + (
            1 + markdown_blocks(item.text) if item.markdown else 1)
    return 5




@dataclass(frozen=True)
class WaitingNote:
    """An ``InfoNote`` whose view went back to waiting (see ``MessageList``): what it said."""

    text: str
    title: str
    severity: str
    markdown: bool

    @classmethod
    def of(cls, note: InfoNote) -> WaitingNote:
        severity = next((c[1:] for c in ("-information", "-warning", "-error") if note.has_class(c)), "information")
        return cls(note.text, note.note_title, severity, note.markdown)

    def view(self) -> InfoNote:
        return InfoNote(self.text, title=self.title, severity=self.severity, markdown=self.markdown)



Waiting = Message | WaitingNote



class EarlierMessages(Static, can_focus=True):
    """The first row while older messages wait: how many, and how to show them."""

    DEFAULT_CLASSES = "earlier"
    BINDINGS = [Binding("enter,space", "show", "Show earlier", show=False)]

    class Pressed(UIMessage):
        pass

    def __init__(self, count: int):
        super().__init__(self.text(count), markup=False)

    @staticmethod
    def text(count: int) -> str:
        noun = "message" if count == 1 else "messages"
        return f"▲ {count:,} earlier {noun} · click, Ctrl+T or scroll up to show them"

    def count(self, count: int) -> None:
        # A text of the same width needs no layout pass (it comes when a pass lands).
        old, text = str(self.content), self.text(count)
        self.update(text, layout=len(old) != len(text))

    def on_click(self, event: events.Click) -> None:
        event.stop()
        self.post_message(self.Pressed())

    def action_show(self) -> None:
        self.post_message(self.Pressed())



class MessageList(VerticalScroll):
    """The conversation, kept in step with the transcript.

    Only the newest messages have views: at most ``window`` of them, of about ``budget``
    widgets in all (``weight``; at least ``MIN_VIEWS`` views). The older ones wait
    (``waiting``, oldest first, all before the first view) behind an ``EarlierMessages``
    row and get views a window (the same limits) at a time on request: the row (click,
    Enter), scrolling up at the top, ``show_earlier`` (the chat's Ctrl+T). While the list
    follows the bottom, once its views pass 1.5 windows (in number or weight) the oldest
    go back to waiting, so a long session stays as cheap to lay out as a short one.
    """

    def __init__(self, *children: Widget, window: int = WINDOW, budget: int = BUDGET, **kwargs: Any):
        super().__init__(*children, **kwargs)
        self.window = max(1, window)
        self.budget = max(1, budget)
        self.waiting: list[Waiting] = []
        self._loading = False         # show_earlier running
        self.filling = False          # the rest of the window ``show`` mounts after the first frame is pending
        self._requested = False       # show_earlier asked for by scrolling, not run yet
        self._homing = False          # scrolling to the top after show_earlier: not a request for more

    def on_mount(self) -> None:
        self.anchor()

    def views(self) -> list[MessageView]:
        return list(self.query_children(MessageView))

    @property
    def earlier_count(self) -> int:
        """Messages (and notes) above the first view, waiting to be shown."""
        return len(self.waiting)

    @property
    def following(self) -> bool:
        """Anchored to the bottom (the user has not scrolled away): following what comes in."""
        return self.is_anchored and not self._anchor_released

    async def show(self, messages: Iterable[Message]) -> None:
        """Show ``messages``: views for a window of the newest, the rest waiting.

        What fills the screen is mounted first; the rest of the window follows after that
        first frame (mounting, styling and laying out a window of views takes a while: a
        resumed session would otherwise open to a blank screen for as long)."""
        messages = list(messages)
        before = len(self.waiting)
        window = self.fit(messages)
        rows = self.app.size.height
        first = min(window, self._filling(messages, rows))
        self._loading = True  # emptying the list scrolls it to the top: not a request for more
        try:
            await self.remove_children()
            self.waiting = list(messages[: len(messages) - first])
            shown = messages[len(self.waiting):]
            row = [EarlierMessages(len(self.waiting))] if self.waiting else []
            await self.mount_all([*row, *(view_for(m) for m in shown)])
        finally:
            self._loading = False
        self._count_changed(before)
        self.anchor()
        if first < window:
            self.filling = True
            self.call_after_refresh(self._fill_window, window - first)

    async def _fill_window(self, count: int) -> None:
        """The rest of the window ``show`` left waiting, above the views, while the list still
        follows the bottom (once the user scrolls or asks for more, that takes over)."""
        try:
            await self._mount_rest(count)
        finally:
            self.filling = False

    async def _mount_rest(self, count: int) -> None:
        if self._loading or not self.waiting or not self.following:
            return
        self._loading = True
        try:
            before = len(self.waiting)
            chunk = self.waiting[-count:]
            del self.waiting[-count:]
            views = [w.view() if isinstance(w, WaitingNote) else view_for(w) for w in chunk]
            row = self._row()
            await self.mount_all(views, after=row) if row is not None else await self.mount_all(views, before=0)
            if not self.waiting and row is not None:
                await row.remove()
            self._count_changed(before)
        finally:
            self._loading = False
        self.anchor()

    async def add(self, view: Widget) -> None:
        await self.mount(view)
        if self.following:
            await self._trim()
        self.anchor()

    def fit(self, items: Sequence[Waiting], *, window: int | None = None, budget: int | None = None) -> int:
        """How many of the newest ``items`` make a window: up to ``window`` of them, while
        their weight stays within ``budget`` (at least ``MIN_VIEWS``); the list's own limits
        unless given."""
        window = self.window if window is None else window
        budget = self.budget if budget is None else budget
        total = count = 0
        for item in reversed(items):
            total += weight_of(item)
            if count >= window or (count >= MIN_VIEWS and total > budget):
                break
            count += 1
        return count

    @staticmethod
    def _filling(messages: list[Message], rows: int) -> int:
        """How many of the newest ``messages`` surely fill ``rows`` lines: all the first frame
        needs (views above the screen are mounted after it)."""
        lines = count = 0
        for message in reversed(messages):
            if lines >= rows:
                break
            lines += lines_at_least(message)
            count += 1
        return count

    # --- the messages waiting above the first view -------------------------------------------
    def _row(self) -> EarlierMessages | None:
        first = self.children[0] if self.children else None
        return first if isinstance(first, EarlierMessages) else None

    def _count_changed(self, before: int) -> None:
        """The row shows how many wait; the chat's key for them shows only while any do."""
        row = self._row()
        if row is not None and before != len(self.waiting):
            row.count(len(self.waiting))
        if bool(before) != bool(self.waiting):
            self.screen.refresh_bindings()

    async def show_earlier(self, count: int | None = None, *, keep_position: bool = True) -> int:
        """Give views to the newest ``count`` waiting messages (default: a window of them, see
        the class), above the first view; returns how many. ``keep_position``: what was on
        screen stays where it was (scrolling up goes on into them); otherwise the list
        scrolls to its new top."""
        if not self.waiting or self._loading:
            return 0
        self._loading = True
        try:
            before = len(self.waiting)
            count = self.fit(self.waiting) if count is None else max(1, count)
            chunk = self.waiting[-count:]
            del self.waiting[-count:]
            row = self._row()
            height, scroll_y = self.virtual_size.height, self.scroll_y
            views = [w.view() if isinstance(w, WaitingNote) else view_for(w) for w in chunk]
            if row is not None:
                await self.mount_all(views, after=row)
                if not self.waiting:
                    await row.remove()
            else:  # pragma: no cover - the row is there whenever messages wait
                await self.mount_all(views, before=0)
            self._count_changed(before)
        finally:
            self._loading = False
        # Added above what is on screen: it stays there, or the list goes to its new top.
        self.release_anchor()

        def scroll() -> None:
            if keep_position:
                self.scroll_to(y=scroll_y + self.virtual_size.height - height, animate=False, immediate=True)
                return
            self._homing = True
            try:
                self.scroll_home(animate=False, immediate=True)
            finally:
                self._homing = False

        self.call_after_refresh(scroll)
        return len(chunk)

    def _request_earlier(self) -> None:
        """Scrolled up against the top: show what waits above (once per request)."""
        if self._requested or self._loading or self._homing or not self.waiting:
            return
        self._requested = True

        async def run() -> None:
            self._requested = False
            await self.show_earlier()

        self.call_later(run)

    def watch_scroll_y(self, old_value: float, new_value: float) -> None:
        super().watch_scroll_y(old_value, new_value)
        if new_value <= 0 < old_value and self._anchor_released:  # the user scrolled up to the top
            self._request_earlier()

    def on_mouse_scroll_up(self, event: events.MouseScrollUp) -> None:
        if self.scroll_y <= 0:  # at the top already (or nothing to scroll): the wheel asks for more
            self._request_earlier()

    @on(EarlierMessages.Pressed)
    async def _row_pressed(self, event: EarlierMessages.Pressed) -> None:
        event.stop()
        await self.show_earlier()

    async def _trim(self) -> None:
        """Following the bottom with views past 1.5 windows (in number or weight): the oldest
        go back to waiting (notes keep what they said; a discarded reply goes), down to a
        window."""
        views = self.views()
        weights = [weight_of(v.message) if v.message is not None else weight_of(v) for v in views]
        if len(views) <= self.window * 3 // 2 and sum(weights) <= self.budget * 3 // 2:
            return
        keep, total = 0, 0
        for w in reversed(weights):  # the newest that make a window stay
            total += w
            if keep >= self.window or (keep >= MIN_VIEWS and total > self.budget):
                break
            keep += 1
        before = len(self.waiting)
        gone: list[Widget] = []
        for view in views[: len(views) - keep]:
            if view.message is not None:
                self.waiting.append(view.message)
            elif isinstance(view, InfoNote):
                self.waiting.append(WaitingNote.of(view))
            elif not view.has_class("-discarded"):
                break  # still live (a reply being written, a queued message): it and all after it stay
            gone.append(view)
        if not gone:
            return
        await self.remove_children(gone)
        if before == 0:
            await self.mount(EarlierMessages(len(self.waiting)), before=0)
        self._count_changed(before)

    async def sync(self, messages: list[Message]) -> None:
        """Follow a splice: drop the views (and waiting messages) no longer in the transcript
        and add the marker where it belongs (the system prompt too, new or replaced at a turn's
        start); a result trimmed in place takes its original's place. Other new messages are the chat's to show (a reply being streamed, a message
        being sent); views without an id stay as they are."""
        ids = {m.id for m in messages}
        before = len(self.waiting)
        await self._replace_trimmed(messages)
        self.waiting = [w for w in self.waiting if not isinstance(w, Message) or w.id in ids]
        gone = [v for v in self.views() if v.message_id is not None and v.message_id not in ids]
        if gone:
            await self.remove_children(gone)
        shown = {v.message_id: v for v in self.views() if v.message_id is not None}
        waiting = {w.id for w in self.waiting if isinstance(w, Message)}
        for index, message in enumerate(messages):
            if not (message.is_marker or message.is_system_prompt) or message.id in shown or message.id in waiting:
                continue
            after = next((m.id for m in messages[index + 1:] if m.id in shown or m.id in waiting), None)
            if after in waiting:  # among the older messages: it waits with them
                at = next(i for i, w in enumerate(self.waiting) if isinstance(w, Message) and w.id == after)
                self.waiting.insert(at, message)
                waiting.add(message.id)
                continue
            following = shown.get(after) if after is not None else None
            if following is None:
                # Nothing after it is shown yet: before the first view still waiting for its message.
                following = next((v for v in self.views() if v.message_id is None and not v.has_class("note")), None)
            view = view_for(message)
            if following is not None:
                await self.mount(view, before=following)
            else:
                await self.mount(view)
            shown[message.id] = view
        if before and not self.waiting and (row := self._row()) is not None:
            await row.remove()
        self._count_changed(before)

    async def _replace_trimmed(self, messages: list[Message]) -> None:
        """Each trimmed result (the trim stage: a new id, the same call) where its original
        is shown or waits, in its place."""
        shown = {v.message_id: v for v in self.views() if v.message_id is not None}
        waiting = {w.id: i for i, w in enumerate(self.waiting) if isinstance(w, Message)}
        for message in messages:
            original = original_of(message)
            if original is None or message.id in shown or message.id in waiting:
                continue
            if original in shown:
                await self.mount(view_for(message), before=shown[original])
            elif original in waiting:
                self.waiting[waiting[original]] = message
