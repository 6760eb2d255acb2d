"""The session loop with real parts: the tiny model in-process, a real SQLite store."""

from __future__ import annotations

import threading

import pytest
from helpers import agent_session

from hermes_tui.chat.client import ChatError
from hermes_tui.config import Config
from hermes_tui.providers.extractive.summarizer import ExtractiveSummarizer
from hermes_tui.providers.mlx.chat import MlxChatClient
from hermes_tui.providers.openai.chat import OpenAIChatClient
from hermes_tui.session.wiring import open_session
from hermes_tui.store import Store

REPLY = 6


def send(session, text: str, **reply):
    """A turn as the app runs it: the user's message first, then the streamed reply."""
    session.add_user_message(text)
    return session.reply(**reply)


@pytest.fixture
def config(tiny_model):
    return Config().with_overrides({
        "model.provider": "mlx", "model.model": str(tiny_model.fp32), "model.context_length": 4096,
        "auxiliary.compression.provider": "extractive",
        "compression.policy": "per_exchange",  # these tests watch single passes
    })


@pytest.fixture
def store(tmp_path):
    with Store(tmp_path / "state.db") as store:
        yield store


def test_a_turn_streams_the_reply_and_stores_both_messages(config, store):
    session = open_session(config, store, title="t")
    deltas: list[str] = []
    turn = send(session, "Hello there", on_delta=deltas.append, max_tokens=REPLY)
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
    send(session, "Keep going", max_tokens=REPLY)
    reports = session.finalize_turn()
    assert reports and reports[0].outcome in ("absorbed", "defrag")
    cursor, summary = session.compactor.cursor(session.conv.messages), session.compactor.rolling_summary

    resumed = open_session(config, store, session_id=session.info.id)
    assert [m.id for m in resumed.conv.messages] == [m.id for m in session.conv.messages]
    assert resumed.compactor.cursor(resumed.conv.messages) == cursor
    send(resumed, "And more", max_tokens=REPLY)
    report = resumed.finalize_turn()[0]
    assert report.outcome in ("absorbed", "defrag", "nothing_to_absorb")
    assert resumed.compactor.rolling_summary.startswith(summary.splitlines()[0])


def test_a_reply_that_lands_while_a_pass_runs_does_not_invalidate_it(config, store):
    session = open_session(config, store, title="busy")
    session.conv.extend(agent_session(exchanges=10, size=50)[:-1])
    store.flush(session.info.id, session.conv.messages)
    session.resolve_context_window()
    planned = session.plan_pass()  # the worker's snapshot
    send(session, "sent while the pass ran", max_tokens=REPLY)
    report = session.publish_pass(planned)
    assert report.outcome in ("absorbed", "defrag")
    assert session.conv.messages[-2].content == "sent while the pass ran"
    assert [m.id for m in store.load_active(session.info.id)] == [m.id for m in session.conv.messages]


def test_a_failing_chat_keeps_what_the_user_typed(tiny_model, store):
    config = Config().with_overrides({"auxiliary.compression.provider": "extractive"})
    chat = OpenAIChatClient("http://127.0.0.1:9/v1", "m", timeout=2)
    session = open_session(config, store, title="down", chat=chat)
    with pytest.raises(ChatError) as info:
        send(session, "my important question", max_tokens=REPLY)
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
    report = session.publish_pass(session.plan_compress("the bug"))
    assert report.outcome == "compressed"
    assert [m.content for m in session.conv.messages if m.role == "user"] == users
    assert [m.id for m in store.load_active(session.info.id)] == [m.id for m in session.conv.messages]


# --- a reply the user stops ----------------------------------------------------------------


def _stop_after(cancel: threading.Event, pieces: int):
    """An on_delta that sets ``cancel`` once ``pieces`` pieces with visible text arrived."""
    seen: list[str] = []

    def on_delta(piece: str) -> None:
        seen.append(piece)
        if len(seen) >= pieces and "".join(seen).strip():
            cancel.set()

    return seen, on_delta


@pytest.mark.parametrize("provider", ["mlx", "openai-api"])
def test_a_stopped_reply_is_kept_marked_stopped_and_is_not_a_completed_turn(provider, config, store, request):
    from hermes_tui.providers.mlx.runtime import MlxRuntime

    if provider == "openai-api":
        server = request.getfixturevalue("mlx_server")
        chat = OpenAIChatClient(server.base_url, server.model, timeout=30)
    else:
        chat = MlxChatClient(config.model.model)
    session = open_session(config, store, title="stop", chat=chat)
    cancel = threading.Event()
    seen, on_delta = _stop_after(cancel, 3)
    turn = send(session, "Tell me a long story", on_delta=on_delta, cancel=cancel, max_tokens=4000)

    assert turn.stopped and turn.reply.meta["stopped"] is True
    assert turn.reply.content == "".join(seen) and turn.reply.content.strip()
    assert len(seen) < 4000 and turn.done.usage.completion_tokens is None  # no guessed usage
    assert session.conv.messages[-1] is turn.reply  # the live transcript keeps it
    assert session.turns_completed == 0  # not a turn that finished normally: no pass is due for it
    assert not MlxRuntime.shared().busy  # the in-process model is free again
    stored = store.load_active(session.info.id)
    assert [(m.role, m.content, m.meta.get("stopped")) for m in stored] == [
        ("user", "Tell me a long story", None), ("assistant", turn.reply.content, True)]

    from hermes_tui.store.export import session_messages, to_markdown

    exported = to_markdown(store.get_session(session.info.id), session_messages(store, session.info.id,
                                                                                  include_archived=False))
    assert "## Assistant (stopped)" in exported and "## User\n" in exported

    resumed = open_session(config, store, session_id=session.info.id, chat=chat)
    assert resumed.conv.messages[-1].meta["stopped"] is True
    assert resumed.conv.messages[-1].content == turn.reply.content
    nxt = send(resumed, "Go on", max_tokens=REPLY)  # the next turn carries on after the partial reply
    assert not nxt.stopped and "stopped" not in nxt.reply.meta and resumed.turns_completed == 1


def test_a_reply_stopped_before_any_text_keeps_nothing(config, store):
    session = open_session(config, store, title="stop early")
    cancel = threading.Event()
    cancel.set()
    with pytest.raises(ChatError) as info:
        send(session, "never mind", cancel=cancel, max_tokens=REPLY)
    assert info.value.kind == "cancelled"
    assert [m.content for m in store.load_active(session.info.id)] == ["never mind"]
    assert [m.role for m in session.conv.messages] == ["user"]


def test_the_reply_cap_defaults_to_model_max_tokens(config, store):
    capped = config.with_overrides({"model.max_tokens": 5})
    session = open_session(capped, store, title="cap")  # the chat client is built from the config
    turn = send(session, "Hello")
    assert turn.done.usage.completion_tokens == 5 and turn.reply.meta["usage"]["finish_reason"] == "length"
