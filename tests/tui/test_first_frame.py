"""The app's first frame: what a resumed session mounts for it.

A resumed session's first frame gets views for the newest messages that surely fill the
screen (``lines_at_least``), the rest of the window right after it. The real app under
``App.run_test`` and its own stylesheet; the figures this buys are
``benchmarks/bench_startup.py``'s.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from support.chat_app import app_test, make_config, until, views
from textual.app import App, ComposeResult
from textual.containers import VerticalScroll

from hermes_tui.core.transcript import Message, make_marker, parse_transcript
from hermes_tui.providers.extractive.summarizer import ExtractiveSummarizer
from hermes_tui.session.wiring import open_session
from hermes_tui.store import Store
from hermes_tui.tui import app as app_module
from hermes_tui.tui.app import HermesApp
from hermes_tui.tui.screens.chat import ChatScreen
from hermes_tui.tui.widgets.message_views import view_for
from hermes_tui.tui.widgets.messages import lines_at_least

SIZE = (100, 30)
APP_CSS = Path(app_module.__file__).parent / "app.tcss"  # a subclass would look beside itself
DEMO = Path(app_module.__file__).resolve().parents[1] / "assets" / "demo_session.json"


def _call(cid: str, command: str) -> dict:
    return {"id": cid, "type": "function", "function": {"name": "bash", "arguments": json.dumps({"command": command})}}


def shapes() -> list[Message]:
    """Messages of every shape a view has: the demo session's, and edge cases of text."""
    demo = parse_transcript(DEMO.read_text(encoding="utf-8"))
    return [*demo, *[
        Message("user", "one\n\n\nfour after two blank lines\n" + "x" * 400),
        Message("user", ""),
        Message("assistant", "- a\n- b\n  continued\n\n1. one\n2. two\n\n> quoted\n> still quoted"),
        Message("assistant", "```python\nline 1\n\nline 3\n```\nafter the fence\n\n# Heading\ntext"),
        Message("assistant", "", tool_calls=[_call("a", "ls"), _call("b", "pwd")]),
        Message("assistant", "| a | b |\n|---|---|\n| 1 | 2 |"),
        Message("tool", "out\n" * 50, tool_call_id="a", name="bash"),
        make_marker("micro", "the rolling summary\n\nwith two paragraphs", covers=["m1", "m2"]),
    ]]


class Views(App):
    """One view per message in a scrolling column, styled as the app styles them."""

    CSS_PATH = APP_CSS

    def __init__(self, messages: list[Message]):
        super().__init__()
        self.messages = messages

    def compose(self) -> ComposeResult:
        with VerticalScroll():
            yield from (view_for(m) for m in self.messages)


@pytest.mark.parametrize("width", [100, 40])
@app_test
async def test_no_view_is_shorter_than_lines_at_least_says(width):
    """The first frame stops mounting once ``lines_at_least`` adds up to the screen: that only
    fills it if no view takes fewer lines than it says."""
    messages = shapes()
    app = Views(messages)
    async with app.run_test(size=(width, 40)) as pilot:
        await pilot.pause()
        column = app.query_one(VerticalScroll)
        shown = list(column.children)
        assert len(shown) == len(messages)
        short = [(i, messages[i].role, view.outer_size.height, lines_at_least(messages[i]))
                 for i, view in enumerate(shown) if view.outer_size.height < lines_at_least(messages[i])]
        assert not short, short


# Lines of the kinds a reply or a user's message has; a text is some of them, blank lines between.
LINE = st.sampled_from([
    "a plain line of words", "x" * 150, "- a list item", "1. a numbered item", "> a quoted line",
    "# a heading", "| a | table |", "|---|---|", "```", "```python", "    indented code", "", "",
    "**bold** and `code`", "<b>html?</b>", "***", "[a link](http://example.com)",
])
MESSAGE = st.builds(lambda role, lines: Message(role, "\n".join(lines)),
                    st.sampled_from(["user", "assistant"]), st.lists(LINE, max_size=14))


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(messages=st.lists(MESSAGE, min_size=1, max_size=12), width=st.sampled_from([30, 80]))
def test_no_view_of_any_text_is_shorter_than_lines_at_least_says(messages, width):
    """The same, over texts made of every kind of line (fences left open, stray table rows)."""

    async def heights() -> list[int]:
        app = Views(messages)
        async with app.run_test(size=(width, 40)) as pilot:
            await pilot.pause()
            return [view.outer_size.height for view in app.query_one(VerticalScroll).children]

    shown = asyncio.run(heights())
    short = [(m.role, m.content, h, lines_at_least(m)) for m, h in zip(messages, shown, strict=True)
             if h < lines_at_least(m)]
    assert not short, short


class FirstFrame(HermesApp):
    """The app, noting the chat screen's views in the first frame that shows it."""

    CSS_PATH = APP_CSS
    first: list | None = None
    list_height = 0

    def _display(self, screen, renderable) -> None:
        super()._display(screen, renderable)
        if self.first is None and isinstance(screen, ChatScreen):
            self.first = [(type(v).__name__, v.outer_size.height) for v in screen.messages.children]
            self.list_height = screen.messages.size.height


def store_session(config, store: Store, messages: list[Message]) -> str:
    session = open_session(config, store, title="resumed", summarizer=ExtractiveSummarizer())
    session.conv.extend(messages)
    store.flush(session.info.id, session.conv.messages)
    return session.info.id


def turns(n: int) -> list[Message]:
    """``n`` turns of a question, a call, its result and a short answer: one-line views."""
    out = [Message("system", "You are a coding agent.")]
    for i in range(n):
        out += [Message("user", f"question {i}"), Message("assistant", "", tool_calls=[_call(f"c{i}", f"ls m{i}")]),
                Message("tool", f"a_{i}.py", tool_call_id=f"c{i}", name="bash"), Message("assistant", f"m{i}: a_{i}.py")]
    return out


@pytest.fixture
def config(tiny_model, hf_offline_env, hermes_home):
    return make_config(tiny_model).with_overrides({"model.context_length": 1_000_000})


@app_test
async def test_a_message_taller_than_the_screen_is_all_the_first_frame_mounts(config, tmp_path):
    long_question = "\n".join(f"line {i} of a pasted log" for i in range(120))
    with Store(tmp_path / "state.db") as store:
        session_id = store_session(config, store, [*turns(40), Message("user", long_question)])
        app = FirstFrame(config, store, session_id=session_id, reply_tokens=6)
        async with app.run_test(size=SIZE) as pilot:
            await until(pilot, lambda: app.first is not None, "the first frame")
            assert [name for name, _ in app.first] == ["EarlierMessages", "UserMessage"]
            screen = app.screen
            # Right after it, the rest of the window, above: the list still ends with that message.
            await until(pilot, lambda: len(views(screen)) > 8, "the rest of the window")
            assert views(screen)[-1].message_id == store.load_active(session_id)[-1].id


@app_test
async def test_short_views_fill_the_first_frame_to_the_top(config, tmp_path):
    with Store(tmp_path / "state.db") as store:
        session_id = store_session(config, store, turns(60))
        app = FirstFrame(config, store, session_id=session_id, reply_tokens=6)
        async with app.run_test(size=SIZE) as pilot:
            await until(pilot, lambda: app.first is not None, "the first frame")
            names = [name for name, _ in app.first]
            assert names[0] == "EarlierMessages" and len(names) < 60  # not the whole session
            assert sum(height for _, height in app.first) >= app.list_height  # no blank lines above
