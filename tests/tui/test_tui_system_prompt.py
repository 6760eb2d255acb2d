"""The system prompt in the chat app: ``App.run_test`` against the scripted OpenAI-compatible server,
the real store. It shows first, as one collapsed row with its size, from the first turn of a new
session and when the session is resumed; ``/usage`` gives its tokens a line of their own."""

from __future__ import annotations

from pathlib import Path

import pytest
from support.chat_app import SIZE, app_test, notes, settle, type_and_send, views
from support.scripted_endpoint import answer

from hermes_tui.config import Config
from hermes_tui.tui.app import HermesApp
from hermes_tui.tui.widgets.message_views import Folded, SystemMessage, UserMessage


@pytest.fixture
def workspace(tmp_path) -> Path:
    folder = tmp_path / "ws"
    (folder / ".git").mkdir(parents=True)
    (folder / "AGENTS.md").write_text("Answer in one sentence.\n")
    return folder


def config(base_url: str) -> Config:
    return Config().with_overrides({
        "model.provider": "openai-api", "model.model": "scripted", "model.base_url": base_url,
        "model.context_length": 32768, "auxiliary.compression.provider": "extractive",
    })


def row_title(view: SystemMessage) -> str:
    return str(view.query_one(Folded).title)


@app_test
async def test_the_prompt_shows_first_collapsed_with_its_tokens_and_in_usage(servers, store, workspace, hermes_home):
    server = servers.start([answer("Hello."), answer("Again.")])
    app = HermesApp(config(server.base_url), store, reply_tokens=200, workspace=workspace)
    async with app.run_test(size=SIZE) as pilot:
        screen = app.screen
        await type_and_send(pilot, "hi")
        await settle(pilot, screen)
        prompt = screen.session.conv.messages[0]
        assert prompt.is_system_prompt
        shown = views(screen)
        assert [type(v) for v in shown[:2]] == [SystemMessage, UserMessage]
        assert shown[0].message_id == prompt.id
        tokens = screen.session.usage()["system_prompt_tokens"]
        assert tokens > 50 and row_title(shown[0]) == f"system prompt · {tokens:,} tokens"
        assert shown[0].query_one(Folded).collapsed
        sent = server.requests()[0]["messages"]
        assert sent[0] == {"role": "system", "content": prompt.content}
        assert "Answer in one sentence." in sent[0]["content"]

        await type_and_send(pilot, "/mode full")
        await pilot.pause()
        await type_and_send(pilot, "again")
        await settle(pilot, screen)
        # The mode changed: the next turn's prompt took the old one's place, one row still.
        new = screen.session.conv.messages[0]
        assert new.id != prompt.id and "Approval mode full:" in new.content
        rows = [v for v in views(screen) if isinstance(v, SystemMessage)]
        assert [v.message_id for v in rows] == [new.id]
        assert views(screen)[0] is rows[0]

        await type_and_send(pilot, "/usage")
        await pilot.pause()
        usage = str(notes(screen)[-1].text)
        tokens = screen.session.usage()["system_prompt_tokens"]
        assert "system prompt" in usage and f"{tokens:,} tokens" in usage
        session_id = screen.session.info.id

    resumed = HermesApp(config(server.base_url), store, session_id=session_id, reply_tokens=200, workspace=workspace)
    async with resumed.run_test(size=SIZE) as pilot:
        await pilot.pause()
        first = views(resumed.screen)[0]
        assert isinstance(first, SystemMessage) and first.message_id == new.id
        assert row_title(first).startswith("system prompt · ") and first.query_one(Folded).collapsed
