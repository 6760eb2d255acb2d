"""The chat app under test: a prepared agent session, summarizer doubles, and driving the app."""

from __future__ import annotations

import asyncio
import functools
import json
import threading
import time

from textual.app import App

from hermes_tui.compaction.summarizer import Completion, SummarizerError
from hermes_tui.config import Config
from hermes_tui.core.transcript import Message
from hermes_tui.providers.extractive.summarizer import ExtractiveSummarizer
from hermes_tui.session.wiring import open_session
from hermes_tui.store import Store
from hermes_tui.tui.app import HermesApp
from hermes_tui.tui.screens.chat import ChatScreen
from hermes_tui.tui.widgets.composer import Composer
from hermes_tui.tui.widgets.message_views import InfoNote
from hermes_tui.tui.widgets.status_bar import StatusBar

REPLY = 6          # tokens per reply: the tiny model never stops by itself
SIZE = (100, 30)
WAIT = 60.0        # seconds: generous for a slow 2-core CI machine


def _call(cid: str, name: str, **args) -> dict:
    return {"id": cid, "type": "function", "function": {"name": name, "arguments": json.dumps(args)}}


def coding_session() -> list[Message]:
    """A short agent session with tool calls and a Markdown reply; same text every time."""
    return [
        Message("system", "You are a coding agent. Work in small steps and run the tests."),
        Message("user", "The parser test fails on empty input. Please fix it."),
        Message("assistant", "Let me read the parser first.",
                tool_calls=[_call("c1", "read_file", path="src/parser.py")]),
        Message("tool", "def parse(text):\n    tokens = text.split()\n    return tokens[0]\n",
                tool_call_id="c1", name="read_file"),
        Message("assistant", "Running the failing test.",
                tool_calls=[_call("c2", "bash", command="pytest -q tests/test_parser.py")]),
        Message("tool", "F.\nFAILED tests/test_parser.py::test_empty - IndexError: list index out of range\n"
                        "1 failed, 1 passed in 0.02s", tool_call_id="c2", name="bash"),
        Message("assistant", "", tool_calls=[_call("c3", "edit_file", path="src/parser.py",
                                                    old="return tokens[0]", new="return tokens[0] if tokens else None")]),
        Message("tool", "edited src/parser.py (1 line)", tool_call_id="c3", name="edit_file"),
        Message("assistant", "Fixed: `parse` returns `None` for empty input.\n\n"
                             "| test | before | after |\n|---|---|---|\n| test_empty | failed | passed |\n\n"
                             "```python\nreturn tokens[0] if tokens else None\n```"),
        Message("user", "Thanks! Add a test for whitespace-only input too."),
    ]


def make_config(tiny_model) -> Config:
    return Config().with_overrides({
        "model.provider": "mlx", "model.model": str(tiny_model.fp32), "model.context_length": 1024,
        "auxiliary.compression.provider": "extractive",
        "compression.policy": "per_exchange",  # a pass after every reply: these tests watch passes land
    })


def store_session(config: Config, store: Store, *, compacted: bool) -> str:
    """Store ``coding_session``; with ``compacted``, after one micro pass (a marker, archived rows)."""
    session = open_session(config, store, title="parser fix", summarizer=ExtractiveSummarizer())
    session.conv.extend(coding_session())
    store.flush(session.info.id, session.conv.messages)
    if compacted:
        session.resolve_context_window()
        reports = session.finalize_turn()
        assert [r.outcome for r in reports] == ["absorbed"]
    return session.info.id


class GatedSummarizer:
    """The extractive summarizer behind a gate the test opens: a pass provably in flight."""

    model_name = "gated-extractive"

    def __init__(self) -> None:
        self.inner = ExtractiveSummarizer()
        self.started = threading.Event()
        self.gate = threading.Event()
        self.calls = 0

    def summarize(self, request, *, max_tokens: int):
        self.calls += 1
        self.started.set()
        if not self.gate.wait(WAIT):
            raise SummarizerError("timeout", "the test never opened the gate")
        return self.inner.summarize(request, max_tokens=max_tokens)

    def complete(self, messages, *, max_tokens: int):  # pragma: no cover - summarize is used
        raise NotImplementedError


class GatedMlxSummarizer:
    """A real MLX generation on the chat's own device (the shared runtime) that holds the
    device, mid-generation, until the test opens the gate."""

    def __init__(self, model: str) -> None:
        from hermes_tui.providers.mlx.runtime import MlxRuntime

        self.model_name = model
        self.runtime = MlxRuntime.shared()
        self.holding = threading.Event()
        self.gate = threading.Event()

    def complete(self, messages, *, max_tokens: int):
        def hold(text: str) -> None:
            self.holding.set()
            self.gate.wait(WAIT)

        loaded = self.runtime.load(self.model_name)
        stats = self.runtime.generate(loaded, messages, max_tokens=4, cache_key="compression", on_text=hold)
        return Completion(stats.text, stats.finish_reason, stats.prompt_tokens, stats.completion_tokens,
                          stats.duration_s)


class FailingSummarizer:
    model_name = "failing"

    def summarize(self, request, *, max_tokens: int):
        raise SummarizerError("timeout", "the compression model did not answer")

    def complete(self, messages, *, max_tokens: int):  # pragma: no cover
        raise NotImplementedError


class RecordingSummarizer(ExtractiveSummarizer):
    def __init__(self) -> None:
        super().__init__()
        self.requests = []

    def summarize(self, request, *, max_tokens: int):
        self.requests.append(request)
        return super().summarize(request, max_tokens=max_tokens)


def app_test(test):
    """Run an async test on its own event loop (no async pytest plugin needed)."""

    @functools.wraps(test)
    def run(*args, **kwargs):
        return asyncio.run(test(*args, **kwargs))

    return run


class ScreenApp(App):
    """Pushes one screen on mount and records what it dismisses with (``store``: for a
    screen that asks its app for one)."""

    def __init__(self, make_screen, store: Store | None = None) -> None:
        super().__init__()
        self.make_screen = make_screen
        self.store = store
        self.results: list[object] = []

    def on_mount(self) -> None:
        self.push_screen(self.make_screen(), self.results.append)


def app_for(config, store, **kwargs) -> HermesApp:
    return HermesApp(config, store, reply_tokens=REPLY, **kwargs)


async def until(pilot, condition, what: str, timeout: float = WAIT) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        await pilot.pause(0.05)


async def settle(pilot, screen: ChatScreen) -> None:
    """Wait until no reply or pass is in flight or queued."""
    await until(pilot, lambda: not screen.busy, "the chat to settle")
    await pilot.pause()


async def type_and_send(pilot, text: str) -> None:
    composer = pilot.app.screen.query_one(Composer)
    composer.focus()
    composer.insert(text)
    await pilot.press("enter")


def views(screen: ChatScreen):
    return screen.messages.views()


def shown_ids(screen: ChatScreen) -> list[str]:
    return [v.message_id for v in views(screen) if v.message_id is not None]


def label(screen: ChatScreen, name: str) -> str:
    return screen.query_one(StatusBar).text(name)


def notes(screen: ChatScreen) -> list[InfoNote]:
    return [v for v in views(screen) if isinstance(v, InfoNote)]
