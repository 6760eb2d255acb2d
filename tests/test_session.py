"""The session loop with real parts: the tiny model in-process, a real SQLite store."""

from __future__ import annotations

import threading

import pytest

from helpers import agent_session
from hermes_tui.chat.client import ChatError
from hermes_tui.chat.mlx_chat import MlxChatClient
from hermes_tui.chat.openai_chat import OpenAIChatClient
from hermes_tui.config import Config
from hermes_tui.store import Store
from hermes_tui.summarizers.extractive import ExtractiveSummarizer
from hermes_tui.wiring import open_session

REPLY = 6


@pytest.fixture
def config(tiny_model):
    return Config().with_overrides({
        "model.provider": "mlx", "model.model": str(tiny_model.fp32), "model.context_length": 4096,
        "auxiliary.compression.provider": "extractive",
    })


@pytest.fixture
def store(tmp_path):
    with Store(tmp_path / "state.db") as store:
        yield store


def test_a_turn_streams_the_reply_and_stores_both_messages(config, store):
    session = open_session(config, store, title="t")
    deltas: list[str] = []
    turn = session.send("Hello there", on_delta=deltas.append, max_tokens=REPLY)
    assert "".join(deltas) == turn.reply.content and turn.done.usage.completion_tokens == REPLY
    stored = store.load_active(session.info.id)
    assert [(m.role, m.content) for m in stored] == [("user", "Hello there"), ("assistant", turn.reply.content)]
    assert turn.reply.meta["usage"]["completion_tokens"] == REPLY


def test_compaction_after_turns_and_resume_continues_where_it_left_off(config, store):
    session = open_session(config, store, title="long")
    session.conv.extend(agent_session(exchanges=10, size=50)[:-1])
    store.flush(session.info.id, session.conv.messages)
    session.resolve_context_window()
    assert session.compactor.ctx.window.limit == 4096  # from config: no background work needed
    session.send("Keep going", max_tokens=REPLY)
    reports = session.finalize_turn()
    assert reports and reports[0].outcome in ("absorbed", "defrag")
    cursor, summary = session.compactor.cursor(session.conv.messages), session.compactor.rolling_summary

    resumed = open_session(config, store, session_id=session.info.id)
    assert [m.id for m in resumed.conv.messages] == [m.id for m in session.conv.messages]
    assert resumed.compactor.cursor(resumed.conv.messages) == cursor
    resumed.send("And more", max_tokens=REPLY)
    report = resumed.finalize_turn()[0]
    assert report.outcome in ("absorbed", "defrag", "nothing_to_absorb")
    assert resumed.compactor.rolling_summary.startswith(summary.splitlines()[0])


def test_a_reply_that_lands_while_a_pass_runs_does_not_invalidate_it(config, store):
    session = open_session(config, store, title="busy")
    session.conv.extend(agent_session(exchanges=10, size=50)[:-1])
    store.flush(session.info.id, session.conv.messages)
    session.resolve_context_window()
    planned = session.plan_pass()  # the worker's snapshot
    session.send("sent while the pass ran", max_tokens=REPLY)
    report = session.publish_pass(planned)
    assert report.outcome in ("absorbed", "defrag")
    assert session.conv.messages[-2].content == "sent while the pass ran"
    assert [m.id for m in store.load_active(session.info.id)] == [m.id for m in session.conv.messages]


def test_a_failing_chat_keeps_what_the_user_typed(tiny_model, store):
    config = Config().with_overrides({"auxiliary.compression.provider": "extractive"})
    chat = OpenAIChatClient("http://127.0.0.1:9/v1", "m", timeout=2)
    session = open_session(config, store, title="down", chat=chat)
    with pytest.raises(ChatError) as info:
        session.send("my important question", max_tokens=REPLY)
    assert info.value.kind == "refused"
    assert [m.content for m in store.load_active(session.info.id)] == ["my important question"]


def test_the_window_resolves_in_the_background(tiny_model, store, hermes_home):
    config = Config().with_overrides({
        "model.provider": "mlx", "model.model": str(tiny_model.fp32), "auxiliary.compression.provider": "extractive",
    })
    session = open_session(config, store, title="w")
    done = threading.Event()
    session.resolve_context_window(lambda limit: done.set())
    assert done.wait(10)
    assert session.compactor.ctx.window.limit == 2048 and session.context_source == "model-config"
    assert session.usage()["occupancy_pct"] is not None


def test_batch_now_keeps_user_messages(config, store):
    session = open_session(config, store, title="c", chat=MlxChatClient(config.model.model), summarizer=ExtractiveSummarizer())
    session.conv.extend(agent_session(exchanges=30, size=120))
    store.flush(session.info.id, session.conv.messages)
    users = [m.content for m in session.conv.messages if m.role == "user"]
    report = session.compress_now("the bug")
    assert report.outcome == "compressed"
    assert [m.content for m in session.conv.messages if m.role == "user"] == users
    assert [m.id for m in store.load_active(session.info.id)] == [m.id for m in session.conv.messages]
