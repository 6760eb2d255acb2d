"""The guard before every request, in the app: an imported session larger than the endpoint's
window, a model switch to a smaller window, and a server that refuses a request as too large.

The endpoint is the scripted OpenAI-compatible server in a subprocess, running its model with
a context window (``/v1/models`` reports it, or it does not and only the 400 says so); the app
is the real one (``App.run_test``), with the real openai client and a real store.
"""

from __future__ import annotations

import json

from support.chat_app import (
    REPLY,
    SIZE,
    GatedSummarizer,
    app_for,
    app_test,
    label,
    notes,
    settle,
    type_and_send,
    until,
    views,
)
from support.scripted import answer, long_agent_session

from hermes_tui.compaction.trim import is_trimmed
from hermes_tui.config import Config
from hermes_tui.core.tokens import EstimateCounter
from hermes_tui.core.transcript import Message
from hermes_tui.providers.extractive.summarizer import ExtractiveSummarizer
from hermes_tui.providers.openai.chat import OpenAIChatClient
from hermes_tui.session.wiring import import_transcript
from hermes_tui.tui.widgets.composer import Composer
from hermes_tui.tui.widgets.message_views import AssistantMessage

WINDOW = 16_384


def endpoint_config(base_url: str, **overrides) -> Config:
    return Config().with_overrides({
        "model.provider": "openai-api", "model.model": "scripted", "model.base_url": base_url,
        "auxiliary.compression.provider": "extractive", **overrides,
    })


def imported(store, config, tmp_path, messages: list[Message]) -> str:
    """Store ``messages`` the way ``hermes-tui --import FILE`` does."""
    path = tmp_path / "imported.json"
    path.write_text(json.dumps([m.to_openai() for m in messages]), encoding="utf-8")
    return import_transcript(store, config, path).id


def request_tokens(body: dict) -> int:
    """A request as our estimate counts it (the counter the session uses without a tokenizer)."""
    counter = EstimateCounter()
    return sum(4 + counter.count_text(m.get("content") or "") + counter.count_text(json.dumps(m.get("tool_calls")))
               for m in body["messages"])


def note_texts(screen) -> list[str]:
    return [n.text for n in notes(screen)]


def gated_app(servers, store, tmp_path, messages):
    """An app on ``messages`` imported as a session, the window from the scripted server's
    /v1/models (16,384; no context_length in the config), its passes behind a gate."""
    server = servers.start({"window": WINDOW, "replies": [answer("Module 20 is next.")]})
    config = endpoint_config(server.base_url)
    session_id = imported(store, config, tmp_path, messages)
    gated = GatedSummarizer()
    app = app_for(config, store, session_id=session_id, chat=OpenAIChatClient(server.base_url, "scripted"),
                  summarizer=gated)
    return server, app, gated


@app_test
async def test_an_imported_session_over_the_window_is_compacted_before_it_is_sent(servers, store, hermes_home, tmp_path):
    # ~100K tokens: the trim stage (no model) cuts the tool outputs to ~17K, still over the
    # window, so the batch behind the gate runs too.
    server, app, gated = gated_app(servers, store, tmp_path, long_agent_session(40, 1060))
    async with app.run_test(size=SIZE) as pilot:
        screen = app.screen
        await until(pilot, lambda: screen.session.compactor.ctx.window.limit == WINDOW, "the window from /v1/models")
        before = screen.session.conv.total_tokens
        assert before > 3 * WINDOW  # ~100K tokens against a 16K window
        await type_and_send(pilot, "What is next?")
        await until(pilot, gated.started.is_set, "the compaction before the request")
        assert "compacting…" in label(screen, "activity")  # shown while it runs
        assert server.served() == []  # nothing went out meanwhile
        told = notes(screen)[-1]
        assert told.note_title == "Compacting before sending"
        assert f"{WINDOW:,}" in told.text and f"{REPLY:,}" in told.text
        gated.gate.set()
        await settle(pilot, screen)

        served = server.served()
        assert [line["status"] for line in served] == [200]
        assert request_tokens(served[0]["body"]) + REPLY <= WINDOW
        assert served[0]["body"]["messages"][-1] == {"role": "user", "content": "What is next?"}
        after = screen.session.conv.total_tokens
        compacted = [t for t in note_texts(screen) if t.startswith("Compacted: ")]
        assert len(compacted) == 1 and compacted[0].endswith("tokens; sending now.")
        assert any(m.is_marker for m in screen.session.conv.messages)
        assert isinstance(views(screen)[-1], AssistantMessage)
        assert screen.session.conv.messages[-1].content == "Module 20 is next."
        assert after < WINDOW and any(m.is_marker and m.marker_kind == "batch" for m in screen.session.conv.messages)
        assert not [n for n in notes(screen) if n.has_class("-error")]
        # The trim stage ran first: its originals are archived, each stood in for by its cut version.
        archived = [m for m, state in store.load_all(screen.session.info.id) if state == "archived"]
        assert any(is_trimmed(m) for m in archived) or any(is_trimmed(m) for m in screen.session.conv.messages)


@app_test
async def test_an_imported_session_the_trim_stage_brings_under_the_window_is_sent_without_a_model(
        servers, store, hermes_home, tmp_path):
    # ~50K tokens, ~10K once the trim stage has cut its tool outputs: no summarizer call.
    server, app, gated = gated_app(servers, store, tmp_path, long_agent_session(20, 1060))
    async with app.run_test(size=SIZE) as pilot:
        screen = app.screen
        await until(pilot, lambda: screen.session.compactor.ctx.window.limit == WINDOW, "the window from /v1/models")
        assert screen.session.conv.total_tokens > 3 * WINDOW
        await type_and_send(pilot, "What is next?")
        await settle(pilot, screen)

        assert gated.calls == 0
        served = server.served()
        assert [line["status"] for line in served] == [200]
        assert request_tokens(served[0]["body"]) + REPLY <= WINDOW
        assert served[0]["body"]["messages"][-1] == {"role": "user", "content": "What is next?"}
        assert [n.note_title for n in notes(screen) if n.note_title == "Compacting before sending"]
        compacted = [t for t in note_texts(screen) if t.startswith("Compacted: ")]
        assert len(compacted) == 1 and compacted[0].endswith("tokens; sending now.")
        assert any(is_trimmed(m) for m in screen.session.conv.messages)
        assert not any(m.is_marker for m in screen.session.conv.messages)
        assert screen.session.conv.messages[-1].content == "Module 20 is next."
        assert not [n for n in notes(screen) if n.has_class("-error")]


@app_test
async def test_a_switch_to_a_smaller_window_compacts_and_a_request_that_cannot_fit_is_not_sent(
        servers, store, hermes_home, tmp_path):
    server = servers.start({"window": 8192, "report_window": False, "replies": [answer("Fine.")]})
    config = endpoint_config(server.base_url, **{"model.context_length": 8192})
    session_id = imported(store, config, tmp_path, long_agent_session(6, 1060))  # ~15K: over 8K already
    app = app_for(config, store, session_id=session_id, chat=OpenAIChatClient(server.base_url, "scripted"),
                  summarizer=ExtractiveSummarizer())
    async with app.run_test(size=SIZE) as pilot:
        await type_and_send(pilot, "First question?")
        await settle(pilot, app.screen)
        assert [line["status"] for line in server.served()] == [200]
        assert request_tokens(server.requests()[0]) + REPLY <= 8192

        # /model writes the new model's settings and reconfigures: the same, with a 2,048-token window.
        app.reconfigure(endpoint_config(server.base_url, **{"model.context_length": 2048}))
        await until(pilot, lambda: app.screen.session.compactor.ctx.window.limit == 2048
                    and bool(app.screen.query(Composer)), "the session reopened with the new window")
        screen = app.screen
        await type_and_send(pilot, "Second question?")
        await settle(pilot, screen)
        assert len(server.served()) == 1  # what is left (the head, the user's messages, the tail) cannot fit
        failed = notes(screen)[-1]
        assert failed.has_class("-error")
        assert "Nothing was sent" in failed.text and "2,048" in failed.text and "new session" in failed.text
        assert "check model.model" not in failed.text and "even after compaction" in failed.text


@app_test
async def test_a_server_that_refuses_the_request_as_too_large_gets_it_compacted_once(servers, store, hermes_home,
                                                                                    tmp_path):
    # The server counts more tokens than our estimate and does not report its window: only its 400 says so.
    server = servers.start({"window": WINDOW, "report_window": False, "chars_per_token": 2,
                            "replies": [answer("Here it is.")]})
    config = endpoint_config(server.base_url, **{"model.context_length": 32_768})
    session_id = imported(store, config, tmp_path, long_agent_session(10, 1060))  # ~25K by our count
    app = app_for(config, store, session_id=session_id, chat=OpenAIChatClient(server.base_url, "scripted"),
                  summarizer=ExtractiveSummarizer())
    async with app.run_test(size=SIZE) as pilot:
        screen = app.screen
        await type_and_send(pilot, "Go on.")
        await settle(pilot, screen)
        served = server.served()
        assert [line["status"] for line in served] == [400, 200]
        assert served[0]["prompt_tokens"] >= WINDOW > served[1]["prompt_tokens"]
        assert screen.session.compactor.ctx.window.limit == WINDOW  # learnt from the refusal
        assert screen.session.conv.messages[-1].content == "Here it is."
        assert any(t.startswith("This message cannot be sent as it is") for t in note_texts(screen))
        assert not [n for n in notes(screen) if n.has_class("-error")]


@app_test
async def test_a_refusal_that_persists_shows_the_servers_own_words(servers, store, hermes_home, tmp_path):
    refusal = ("This model's maximum context length is 4096 tokens. However, you requested 9000 tokens "
               "(8990 in the messages, 10 in the completion). Please reduce the length of the messages or completion.")
    server = servers.start([{"status": 400, "error": refusal}])
    config = endpoint_config(server.base_url, **{"model.context_length": 32_768})
    app = app_for(config, store, chat=OpenAIChatClient(server.base_url, "scripted"), summarizer=ExtractiveSummarizer())
    async with app.run_test(size=SIZE) as pilot:
        screen = app.screen
        await type_and_send(pilot, "Hello?")
        await settle(pilot, screen)
        # Retried once, then told; or, once its figures show the request cannot fit, not resent at all.
        assert [line["status"] for line in server.served()] in ([400, 400], [400])
        failed = notes(screen)[-1]
        assert failed.has_class("-error")
        assert "maximum context length is 4096 tokens" in failed.text and "8990 in the messages" in failed.text
        assert "context window" in failed.text and "check model.model" not in failed.text
        assert [m.role for m in screen.session.conv.messages] == ["system", "user"]

