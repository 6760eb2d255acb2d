"""The Markdown of a reply being streamed: text grows in place, laid out only when it must.

Textual's ``Markdown.append`` updates the last block with ``Static.update``, which asks for
a layout pass: the screen's whole widget tree is arranged again on every streamed piece,
while a keypress waits behind it. Most pieces only lengthen the last line of the last
paragraph (or code fence): the block keeps its size, so a repaint of that block is all the
screen needs. Here a block is updated without a layout (``refresh(layout=False)`` is what
``update(layout=False)`` does) and asks for one only when its content no longer fits the
size it was given: a new line (height) or, in a fence, which scrolls sideways, a longer
line (width). New blocks are still mounted, and laid out, as Textual does.

A layout pass walks every widget on the screen, so on a loaded machine one costs tens of
milliseconds and a reply that adds a line every few pieces would still run one each time.
So the block being written grows ``RESERVE_LINES`` lines at a time: a fixed height with room
below the text, filled without a layout; once a block is done (another one follows it, or
the reply ends) its height is its text's again.
"""

from __future__ import annotations

from textual.await_complete import AwaitComplete
from textual.content import Content
from textual.css.query import NoMatches
from textual.widget import Widget
from textual.widgets import Label, Markdown, Static
from textual.widgets._markdown import MarkdownBlock, MarkdownFence, MarkdownParagraph

RESERVE_LINES = 4  # the block being written grows this many lines at a time


def update_in_place(widget: Static, content: Content, *, check_width: bool = False) -> None:
    """``widget.update(content)``, with a layout pass only if the content outgrows its size;
    then the widget is given ``RESERVE_LINES`` more lines than it needs."""
    width, height = widget.content_size
    if not widget.is_mounted or not width:
        widget.update(content)  # not laid out yet: its first layout sizes it
        return
    widget.update(content, layout=False)  # also clears its cached dimensions
    container = widget.parent.size if isinstance(widget.parent, Widget) else widget.app.size
    viewport = widget.app.size
    needed = widget.get_content_height(container, viewport, width)
    if needed > height:
        widget.styles.height = needed + RESERVE_LINES + widget.styles.gutter.height  # a layout pass
    elif check_width and widget.get_content_width(container, viewport) > width:
        widget.refresh(layout=True)


def release(block: MarkdownBlock) -> None:
    """A block done growing: its height is its text's again (what the style sheet says)."""
    target: Static = block
    if isinstance(block, MarkdownFence):
        try:
            target = block.query_one("#code-content", Label)
        except NoMatches:
            return
    if target.styles.inline.has_rule("height"):
        target.styles.height = None


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

    def append(self, markdown: str) -> AwaitComplete:
        appended = super().append(markdown)

        async def then() -> None:
            await appended
            for block in list(self.query_children(MarkdownBlock))[:-1]:
                release(block)  # only the last block is still being written

        return AwaitComplete(then())

    def finish(self) -> None:
        """The reply is complete: every block is as high as its text."""
        for block in self.query_children(MarkdownBlock):
            release(block)
