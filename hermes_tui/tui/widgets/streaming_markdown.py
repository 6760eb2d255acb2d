"""The Markdown of a reply being streamed: text grows in place, laid out only when it must.

Textual's ``Markdown.append`` updates the last block with ``Static.update``, which asks for
a layout pass: the screen's whole widget tree is arranged again on every streamed piece,
while a keypress waits behind it. Most pieces only lengthen the last line of the last
paragraph (or code fence): the block keeps its size, so a repaint of that block is all the
screen needs. Here a block is updated without a layout (``refresh(layout=False)`` is what
``update(layout=False)`` does) and asks for one only when its content no longer fits the
size it was given: a new line (height) or, in a fence, which scrolls sideways, a longer
line (width). New blocks are still mounted, and laid out, as Textual does.
"""

from __future__ import annotations

from textual.content import Content
from textual.css.query import NoMatches
from textual.widget import Widget
from textual.widgets import Label, Markdown
from textual.widgets._markdown import MarkdownBlock, MarkdownFence, MarkdownParagraph


def update_in_place(widget: Label, content: Content, *, check_width: bool = False) -> None:
    """``widget.update(content)``, with a layout pass only if its content size changes."""
    width, height = widget.content_size
    if not widget.is_mounted or not width:
        widget.update(content)  # not laid out yet: its first layout sizes it
        return
    widget.update(content, layout=False)  # also clears its cached dimensions
    container = widget.parent.size if isinstance(widget.parent, Widget) else widget.app.size
    viewport = widget.app.size
    grown = widget.get_content_height(container, viewport, width) != height
    if check_width and not grown:
        grown = widget.get_content_width(container, viewport) > width
    if grown:
        widget.refresh(layout=True)


class StreamedParagraph(MarkdownParagraph):
    """A paragraph that grows in place while its reply streams."""

    def set_content(self, content: Content) -> None:
        self._content = content
        update_in_place(self, content)


class StreamedFence(MarkdownFence):
    """A code fence that grows in place while its reply streams."""

    def set_content(self, content: Content) -> None:
        self._content = content
        try:
            label = self.query_one("#code-content", Label)
        except NoMatches:
            return
        update_in_place(label, content, check_width=True)


class StreamingMarkdown(Markdown):
    """``Markdown`` for a reply being written (``AssistantMessage`` of no message yet)."""

    BLOCKS: dict[str, type[MarkdownBlock]] = {
        **Markdown.BLOCKS,
        "paragraph_open": StreamedParagraph,
        "fence": StreamedFence,
        "code_block": StreamedFence,
    }
