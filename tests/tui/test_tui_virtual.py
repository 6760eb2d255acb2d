"""A long session in the chat: the message list mounts only the newest views.

``App.run_test`` with the real app (a 300-message session stored and resumed) and, for
the list's own bookkeeping (going back to waiting, following a splice), ``MessageList``
alone in a small app with a small window.
"""

from __future__ import annotations

import json
import threading
import time

import pytest
from support.chat_app import app_for, app_test, make_config, notes, shown_ids, until, views
from textual.app import App, ComposeResult
from textual.widgets import Markdown
from textual.widgets._footer import FooterKey

from hermes_tui.chat.client import ChatDelta, ChatDone, Usage
from hermes_tui.core.transcript import Message, make_marker
from hermes_tui.providers.extractive.summarizer import ExtractiveSummarizer
from hermes_tui.session.wiring import open_session
from hermes_tui.store import Store
from hermes_tui.tui.screens.chat import ChatScreen
from hermes_tui.tui.widgets.message_views import (
    STREAM_INTERVAL,
    AssistantMessage,
    InfoNote,
    MarkerMessage,
    ToolCallView,
    UserMessage,
)
from hermes_tui.tui.widgets.messages import (
    BUDGET,
    MIN_VIEWS,
    WINDOW,
    EarlierMessages,
    MessageList,
    WaitingNote,
    weight,
)

SIZE = (100, 30)
LONG = 300


def long_session(n: int = LONG) -> list[Message]:
    """``n`` messages: a system prompt, then turns of a question, a tool call, its result and a reply."""
    messages = [Message("system", "You are a coding agent.")]
    i = 0
    while len(messages) < n:
        call = {"id": f"c{i}", "type": "function",
                "function": {"name": "bash", "arguments": json.dumps({"command": f"ls src/m{i}"})}}
        turn = [
            Message("user", f"Question {i}: what is in src/m{i}?"),
            Message("assistant", f"Listing m{i}.", tool_calls=[call]),
            Message("tool", f"a_{i}.py\nb_{i}.py", tool_call_id=f"c{i}", name="bash"),
            Message("assistant", f"**m{i}** holds `a_{i}.py` and `b_{i}.py`."),
        ]
        messages.extend(turn[: n - len(messages)])
        i += 1
    return messages


class ScriptedChat:
    """A fast chat model (a double for the chat only): ``pieces`` words, ``gap`` seconds apart.
    The tiny MLX model cannot take a 300-message prompt (its window is 2,048 tokens)."""

    model_name = "scripted"
    max_tokens = 64

    def __init__(self, pieces: int = 40, gap: float = 0.002):
        self.pieces, self.gap = pieces, gap
        self.gate = threading.Event()  # the reply starts when the test opens it
        self.gate.set()

    def stream(self, messages, *, max_tokens=None, stop=None, cancel=None):
        self.gate.wait(60)
        for i in range(self.pieces):
            time.sleep(self.gap)
            yield ChatDelta(f"word{i} ")
        text = "".join(f"word{i} " for i in range(self.pieces))
        yield ChatDone(text, Usage(prompt_tokens=100, completion_tokens=self.pieces, finish_reason="stop"))

    def complete(self, messages, **kwargs):  # pragma: no cover - the chat streams
        raise NotImplementedError


@pytest.fixture
def config(tiny_model, hf_offline_env, hermes_home):
    # A window the long session fits in well under the threshold: resuming it starts nothing.
    return make_config(tiny_model).with_overrides({"model.context_length": 1_000_000})


@pytest.fixture
def store(tmp_path):
    with Store(tmp_path / "state.db") as store:
        yield store


def store_long_session(config, store) -> tuple[str, list[str]]:
    session = open_session(config, store, title="long", summarizer=ExtractiveSummarizer())
    session.conv.extend(long_session())
    store.flush(session.info.id, session.conv.messages)
    return session.info.id, [m.id for m in session.conv.messages]


def footer_keys(screen: ChatScreen) -> list[str]:
    """The actions of the keys the footer shows, in order (the command palette's aside)."""
    return [key.action for key in screen.query(FooterKey) if key.display and not key.has_class("-command-palette")]


def visible(screen: ChatScreen, view) -> bool:
    """On screen: inside the message list's visible region."""
    region = screen.messages.content_region
    return view.region.height > 0 and region.overlaps(view.region)


@app_test
async def test_a_long_resumed_session_mounts_only_the_newest_views_in_order(config, store):
    session_id, ids = store_long_session(config, store)
    app = app_for(config, store, session_id=session_id)
    async with app.run_test(size=SIZE) as pilot:
        screen = app.screen
        assert isinstance(screen, ChatScreen)
        await until(pilot, lambda: not screen.messages.filling, "the window")  # after the first frame's views
        shown = views(screen)
        n = len(shown)
        assert MIN_VIEWS <= n <= WINDOW                                   # a window, not the session
        assert sum(weight(v.message) for v in shown) <= BUDGET
        assert n == screen.messages.fit(screen.session.conv.messages)
        assert shown_ids(screen) == ids[-n:]                               # the newest, in order
        assert screen.messages.earlier_count == LONG - n
        row = screen.messages.children[0]
        assert isinstance(row, EarlierMessages) and f"{LONG - n} earlier messages" in str(row.render())
        newest = shown[-1]
        assert newest.message_id == ids[-1] and visible(screen, newest)  # scrolled to the bottom
        assert not visible(screen, row)
        assert screen.check_action("earlier", ()) is True               # Ctrl+T offered (the footer shows it)
        assert len(screen.query(ToolCallView)) <= n                       # nothing beyond the window was built


@app_test
async def test_older_messages_load_on_request_in_order_and_keep_their_rows(config, store):
    session_id, ids = store_long_session(config, store)
    app = app_for(config, store, session_id=session_id)
    async with app.run_test(size=SIZE) as pilot:
        screen = app.screen
        await until(pilot, lambda: not screen.messages.filling, "the window")
        listing = screen.messages

        def next_count() -> int:
            return len(views(screen)) + listing.fit(listing.waiting)

        # The key: the next window above, and the list at its new top (no cascade of loads).
        expected = next_count()
        await pilot.press("ctrl+t")
        await until(pilot, lambda: len(views(screen)) == expected, "the first earlier window")
        await pilot.pause()
        assert shown_ids(screen) == ids[-expected:]
        assert listing.scroll_y == 0 and visible(screen, listing.children[0])
        assert len(views(screen)) == expected

        # The row: click it; what was on screen stays there.
        first = views(screen)[0]
        before = first.region.y
        expected = next_count()
        await pilot.click(EarlierMessages)
        await until(pilot, lambda: len(views(screen)) == expected, "the second earlier window")
        # The scroll that keeps it in place lands with the next refresh: slow on a loaded machine.
        await until(pilot, lambda: first.region.y == before, "the view kept in place")
        assert shown_ids(screen) == ids[-expected:]
        assert listing.scroll_y > 0

        # Scrolling up to the top: the next window, the position kept.
        expected = next_count()
        listing.scroll_home(animate=False, immediate=True)
        await until(pilot, lambda: len(views(screen)) == expected, "a window on scrolling to the top")
        await pilot.pause()
        assert shown_ids(screen) == ids[-expected:]
        assert listing.scroll_y > 0

        # The rest: everything, in order, and the row (and the key) gone.
        for _ in range(20):
            if not listing.earlier_count:
                break
            await pilot.press("ctrl+t")
            await pilot.pause()
        await pilot.pause()
        assert shown_ids(screen) == ids
        assert not listing.query(EarlierMessages) and screen.check_action("earlier", ()) is False

        # Tool calls and results loaded on request: collapsed rows that open.
        call = views(screen)[2].query_one(ToolCallView)
        assert call.collapsed
        call.scroll_visible(animate=False, immediate=True)
        await pilot.pause()
        await pilot.click(call._title)
        await pilot.pause()
        assert not call.collapsed


@app_test
async def test_a_turn_in_a_long_session_streams_at_the_bottom_in_few_layouts(config, store, monkeypatch):
    appends: list[str] = []
    original = Markdown.append

    def recording_append(self, markdown):
        if isinstance(self.parent, AssistantMessage) and self.parent.message is None:
            appends.append(markdown)  # the reply being streamed
        return original(self, markdown)

    monkeypatch.setattr(Markdown, "append", recording_append)
    session_id, ids = store_long_session(config, store)
    chat = ScriptedChat(pieces=40, gap=0.002)
    chat.gate.clear()
    app = app_for(config, store, session_id=session_id, chat=chat)
    async with app.run_test(size=SIZE) as pilot:
        screen = app.screen
        await pilot.pause()
        keys = footer_keys(screen)
        assert "earlier" in keys and "cancel_reply" not in keys  # Ctrl+T shows while messages wait
        composer = screen.query_one("#composer")
        composer.insert("One more question")
        await pilot.press("enter")
        await until(pilot, lambda: screen.turns.replying, "the reply to start")
        await pilot.pause()
        assert footer_keys(screen)[0] == "cancel_reply"  # Escape shows while the reply is written
        started = time.monotonic()
        chat.gate.set()
        await until(pilot, lambda: not screen.turns.replying, "the reply")
        took = time.monotonic() - started
        await until(pilot, lambda: not screen.busy, "the turn's pass")
        await pilot.pause()
        assert footer_keys(screen) == keys  # and Escape went again, the others as they were

        messages = screen.session.conv.messages
        assert [m.role for m in messages[-2:]] == ["user", "assistant"]
        # The rows of the session (not the app's note that this chat model takes no tools).
        rows = [v for v in views(screen) if not isinstance(v, InfoNote)]
        assert [n.note_title for n in notes(screen)] == ["No tools"]
        assert shown_ids(screen) == [m.id for m in messages][-len(rows):]  # the newest, in order
        assert len(rows) <= WINDOW + 2
        assert screen.messages.earlier_count + len(rows) == len(messages)
        reply = rows[-1]
        assert isinstance(reply, AssistantMessage) and visible(screen, reply)
        assert reply.query_one(Markdown).source == messages[-1].content
        # 40 pieces, but the reply was laid out at most once per STREAM_INTERVAL (and once more at the end).
        assert "".join(appends) == messages[-1].content
        assert len(appends) <= took / STREAM_INTERVAL + 2 and len(appends) < chat.pieces


# --- the list alone, with a small window ---------------------------------------------------------


class ListApp(App):
    def __init__(self, window: int):
        super().__init__()
        self.window = window

    def compose(self) -> ComposeResult:
        yield MessageList(window=self.window)


def turns(n: int) -> list[Message]:
    return [Message("user" if i % 2 == 0 else "assistant", f"message {i}") for i in range(n)]


def listed(listing: MessageList) -> list[str]:
    """What the list holds, oldest first: waiting then shown (a note as ``note:TEXT``)."""
    out = []
    for item in [*listing.waiting, *listing.views()]:
        message = getattr(item, "message", item) if not isinstance(item, Message) else item
        out.append(message.content if isinstance(message, Message) else f"note:{item.text}")
    return out


@app_test
async def test_views_go_back_to_waiting_while_following_and_come_back_in_order():
    app = ListApp(window=4)
    async with app.run_test(size=(60, 20)) as pilot:
        listing = app.query_one(MessageList)
        messages = turns(10)
        await listing.show(messages)
        assert [v.message_id for v in listing.views()] == [m.id for m in messages[-4:]]
        await listing.add(InfoNote("a note", markdown=False))
        more = turns(6)
        for message in more:
            await listing.add(UserMessage(message.content, message))
        await pilot.pause()
        # Beyond 1.5 windows the oldest views go back to waiting, down to a window; the note
        # waits with the messages, in its place.
        assert listing.window <= len(listing.views()) <= listing.window * 3 // 2
        assert any(isinstance(w, WaitingNote) for w in listing.waiting)
        expected = [m.content for m in messages] + ["note:a note"] + [m.content for m in more]
        assert listed(listing) == expected
        assert "earlier messages" in str(listing.children[0].render())
        while listing.waiting:
            await listing.show_earlier()
        await pilot.pause()
        assert [getattr(v, "text", None) or v.message.content for v in listing.views()] == [
            e.removeprefix("note:") for e in expected]
        assert isinstance(listing.views()[10], InfoNote)
        assert not listing.query(EarlierMessages)


@app_test
async def test_a_splice_among_the_waiting_messages_is_followed():
    app = ListApp(window=4)
    async with app.run_test(size=(60, 20)) as pilot:
        listing = app.query_one(MessageList)
        messages = turns(12)
        await listing.show(messages)
        # A pass absorbs messages 2..5 (all waiting): the marker takes their place.
        marker = make_marker("micro", "- the early messages", covers=[m.id for m in messages[2:6]])
        spliced = messages[:2] + [marker] + messages[6:]
        await listing.sync(spliced)
        await pilot.pause()
        assert [w.id for w in listing.waiting] == [m.id for m in spliced[:-4]]
        assert "5 earlier messages" in str(listing.children[0].render())
        await listing.show_earlier(10)
        await pilot.pause()
        assert [v.message_id for v in listing.views()] == [m.id for m in spliced]
        assert isinstance(listing.views()[2], MarkerMessage)
        assert listing.views()[2].query_one("Collapsible").collapsed

        # A splice that absorbs shown messages too: their views go.
        marker2 = make_marker("micro", "- more", covers=[m.id for m in spliced[2:9]])
        spliced2 = spliced[:2] + [marker2] + spliced[9:]
        await listing.sync(spliced2)
        await pilot.pause()
        assert [v.message_id for v in listing.views()] == [m.id for m in spliced2]


@app_test
async def test_a_result_trimmed_in_place_takes_its_originals_place_shown_or_waiting():
    app = ListApp(window=4)
    async with app.run_test(size=(60, 20)) as pilot:
        listing = app.query_one(MessageList)
        messages = []
        for n in range(6):
            call = {"id": f"c{n}", "type": "function", "function": {"name": "read_file", "arguments": "{}"}}
            messages += [Message("assistant", f"reading {n}", tool_calls=[call]),
                         Message("tool", f"rows of file {n}", tool_call_id=f"c{n}", name="read_file")]
        await listing.show(messages)
        await pilot.pause()
        # The trim stage swaps results in place: one waiting (index 1), one shown (index 11).
        after = list(messages)
        for index in (1, 11):
            old = messages[index]
            after[index] = Message("tool", f"{old.content} [trimmed; full output archived; tokens: 900; lines: 40]",
                                   tool_call_id=old.tool_call_id, name=old.name,
                                   meta={"trimmed": {"original": old.id, "tokens": 900, "lines": 40}})
        await listing.sync(after)
        await pilot.pause()
        assert [w.id for w in listing.waiting] + [v.message_id for v in listing.views()] == [m.id for m in after]
        await listing.show_earlier(20)
        await pilot.pause()
        assert [v.message_id for v in listing.views()] == [m.id for m in after]


@app_test
async def test_long_replies_make_a_shorter_window():
    """The window is also a budget of widgets: a long Markdown reply counts for many."""
    app = ListApp(window=WINDOW)
    async with app.run_test(size=(60, 20)) as pilot:
        listing = app.query_one(MessageList)
        long_reply = "\n".join(f"- point {i}" for i in range(10))  # a list: about 45 widgets
        messages = [Message("assistant" if i % 2 else "user", long_reply if i % 2 else f"q{i}") for i in range(40)]
        await listing.show(messages)
        await until(pilot, lambda: not listing.filling, "the window")
        n = len(listing.views())
        assert MIN_VIEWS <= n < WINDOW and n == listing.fit(messages)
        assert [v.message_id for v in listing.views()] == [m.id for m in messages[-n:]]
        # what the estimate says is about what the views hold
        built = sum(len(list(v.walk_children())) + 1 for v in listing.views())
        assert 0.5 * built <= sum(weight(m) for m in messages[-n:]) <= 2 * built
