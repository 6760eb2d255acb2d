"""A splice lands while the chat is idle: ``Session.publish_pass`` waits for a reply being
streamed to end (the real store and the extractive summarizer; the chat model is a double
held mid-stream by the test)."""

from __future__ import annotations

import threading

from helpers import agent_session

from hermes_tui.chat.client import ChatDelta, ChatDone, Usage
from hermes_tui.config import Config
from hermes_tui.providers.extractive.summarizer import ExtractiveSummarizer
from hermes_tui.session.wiring import open_session
from hermes_tui.store import Store

WAIT_S = 60  # bounds a hang only


class HeldChat:
    model_name = "held"
    max_tokens = 16

    def __init__(self) -> None:
        self.streaming = threading.Event()
        self.release = threading.Event()

    def stream(self, messages, *, max_tokens=None, stop=None, cancel=None, tools=None, must_call=None):
        yield ChatDelta("half ")
        self.streaming.set()
        assert self.release.wait(WAIT_S)
        yield ChatDelta("done")
        yield ChatDone("half done", Usage(prompt_tokens=None, completion_tokens=None, finish_reason="stop"))


def test_a_pass_planned_during_a_reply_is_published_after_it(tmp_path):
    config = Config().with_overrides({
        "model.context_length": 4096, "auxiliary.compression.provider": "extractive",
        "compression.policy": "per_exchange", "compression.protect_first_n": 1, "compression.target_ratio": 0.05,
    })
    chat = HeldChat()
    with Store(tmp_path / "state.db") as store:
        session = open_session(config, store, title="idle", chat=chat, summarizer=ExtractiveSummarizer())
        session.resolve_context_window()
        session.conv.extend(agent_session(exchanges=8, size=50))
        store.flush(session.info.id, session.conv.messages)
        planned = session.plan_pass()
        session.add_user_message("go on")
        replying = threading.Thread(target=session.reply, daemon=True)
        replying.start()
        assert chat.streaming.wait(WAIT_S)
        published: list = []
        publisher = threading.Thread(target=lambda: published.append(session.publish_pass(planned)), daemon=True)
        publisher.start()
        publisher.join(0.5)
        assert publisher.is_alive() and not published  # held while the reply streams
        assert not any(m.is_marker for m in session.conv.messages)
        chat.release.set()
        replying.join(WAIT_S)
        publisher.join(WAIT_S)
        assert published and published[0].outcome == "absorbed"
        assert session.conv.messages[-1].content == "half done"  # the reply landed first, then the splice
        assert sum(1 for m in session.conv.messages if m.is_marker) == 1
        session.close()
