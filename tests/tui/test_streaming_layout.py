"""A streaming reply grows in place: a layout pass of the screen only when it outgrows its room.

The real ``MessageList`` with a few views and a reply being written (``AssistantMessage`` of
no message), in a small app under ``App.run_test``. Layout passes are counted where Textual
makes them (``Compositor.reflow``, the arrangement of every widget on the screen). Each
piece is written after the stream's interval has passed, so each is its own update of the
Markdown: before, every one of them was a layout pass.
"""

from __future__ import annotations

import asyncio

from support.chat_app import app_test
from textual._compositor import Compositor
from textual.app import App, ComposeResult
from textual.widgets import Markdown

from hermes_tui.core.transcript import Message
from hermes_tui.tui.widgets.message_views import STREAM_INTERVAL, AssistantMessage, UserMessage
from hermes_tui.tui.widgets.messages import MessageList
from hermes_tui.tui.widgets.streaming_markdown import RESERVE_LINES

SIZE = (80, 30)
PIECES = 240


class StreamApp(App):
    def compose(self) -> ComposeResult:
        yield MessageList()


class Reflows:
    def __init__(self, monkeypatch):
        self.count = 0
        original = Compositor.reflow

        def counting(compositor, parent, size):
            self.count += 1
            return original(compositor, parent, size)

        monkeypatch.setattr(Compositor, "reflow", counting)


async def stream(pilot, view: AssistantMessage, pieces: list[str]) -> None:
    for piece in pieces:
        await view.write(piece)
        await asyncio.sleep(STREAM_INTERVAL * 1.5)  # past the interval: each piece an update
        await pilot.pause()


@app_test
async def test_text_that_keeps_to_its_lines_is_not_laid_out_again_per_piece(monkeypatch):
    # 240 words of 4 characters: thirteen lines of the 80-column screen.
    words = [f"w{i:02d} " for i in range(PIECES)]
    app = StreamApp()
    async with app.run_test(size=SIZE) as pilot:
        messages = app.query_one(MessageList)
        for i in range(6):
            await messages.add(UserMessage(f"question {i}"))
            await messages.add(AssistantMessage(Message("assistant", f"answer {i}: " + "text " * 30)))
        view = AssistantMessage(None)
        await messages.add(view)
        await pilot.pause()
        await stream(pilot, view, words[:1])  # the paragraph's block is mounted: a layout
        reflows = Reflows(monkeypatch)
        await stream(pilot, view, words[1:])
        await pilot.pause()
        while_streaming = view.query_one(Markdown).children[0].size.height
        await view.finish(Message("assistant", "".join(words)))
        await pilot.pause()
        streamed_height = view.size.height
        lines = view.query_one(Markdown).children[0].size.height

        # Laid out when a line was added (and about once more per line as the list follows),
        # not once per piece.
        assert lines >= 2
        print("REFLOWS", reflows.count, lines)
        assert reflows.count <= 2 * lines + 2 < PIECES - 1, (reflows.count, lines)

        # What it shows is what the same reply shows when it is not streamed.
        done = AssistantMessage(Message("assistant", "".join(words)))
        await messages.add(done)
        await pilot.pause()
        assert view.query_one(Markdown).source == "".join(words)
        assert streamed_height == done.size.height
        # While it streamed, every line of it had room (and at most RESERVE_LINES more).
        assert lines <= while_streaming <= lines + RESERVE_LINES, (while_streaming, lines)


@app_test
async def test_a_code_fence_grows_sideways_and_down_with_a_layout_each_time(monkeypatch):
    """A fence scrolls sideways: a line longer than the fence is as wide must be laid out too."""
    app = StreamApp()
    async with app.run_test(size=SIZE) as pilot:
        messages = app.query_one(MessageList)
        view = AssistantMessage(None)
        await messages.add(view)
        await stream(pilot, view, ["```python\n", "x = 1\n"])
        pieces = ["y = " + "1 + " * 30 + "1\n", "z = 3\n", "```\n", "Done."]
        await stream(pilot, view, pieces)
        text = "```python\nx = 1\n" + "".join(pieces)
        await view.finish(Message("assistant", text))
        await pilot.pause()
        done = AssistantMessage(Message("assistant", text))
        await messages.add(done)
        await pilot.pause()
        fences = [v.query_one("MarkdownFence") for v in (view, done)]
        assert fences[0].virtual_size == fences[1].virtual_size  # the long line is all there
        assert view.size == done.size
