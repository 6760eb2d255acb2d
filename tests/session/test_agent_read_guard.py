"""Read before edit through the real loop (``AgentTurn``, the real tools on a temp workspace,
the real store): the model that edits first is told to read, reads, and then its edit
applies; a read in one turn still counts in the next (one record for the conversation).
The chat model is the scripted double (``helpers.ScriptedModel``)."""

from __future__ import annotations

import json
import threading
from pathlib import Path

from helpers import ScriptedModel

from hermes_tui.config import Config
from hermes_tui.providers.extractive.summarizer import ExtractiveSummarizer
from hermes_tui.session.agent import COMPLETED, AgentTurn, Tools
from hermes_tui.session.wiring import open_session
from hermes_tui.store import Store
from hermes_tui.tools.approval import Mode
from hermes_tui.tools.builtin import builtin_registry
from hermes_tui.tools.workspace import Workspace

PRICING = "def price(n):\n    return n * 2\n"
EDIT = {"path": "shopkit/pricing.py", "old_string": "n * 2", "new_string": "n * 3"}


def reply(*calls: tuple[str, str, dict]) -> tuple[str, list[dict]]:
    return "", [{"id": call_id, "type": "function", "function": {"name": name, "arguments": json.dumps(args)}}
                for call_id, name, args in calls]


def results(session) -> dict[str, tuple[str, str]]:
    with session.lock:
        return {m.tool_call_id: (m.meta["tool"]["status"], m.content)
                for m in session.conv.messages if m.role == "tool"}


def workspace_at(tmp_path: Path) -> Path:
    workspace = tmp_path / "ws"
    (workspace / "shopkit").mkdir(parents=True)
    (workspace / "shopkit" / "pricing.py").write_text(PRICING)
    return workspace


def open_chat(store: Store, model: ScriptedModel):
    config = Config().with_overrides({"model.context_length": 32768,
                                      "auxiliary.compression.provider": "extractive"})
    return open_session(config, store, title="read guard", chat=model, summarizer=ExtractiveSummarizer())


def test_an_edit_before_a_read_is_refused_then_the_model_reads_and_it_applies(tmp_path):
    workspace = workspace_at(tmp_path)
    model = ScriptedModel([
        reply(("e1", "edit_file", EDIT)),
        reply(("r1", "read_file", {"path": "shopkit/pricing.py"})),
        reply(("e2", "edit_file", EDIT)),
        ("Done: the price is n * 3.", None),
    ])
    with Store(tmp_path / "state.db") as store:
        session = open_chat(store, model)
        tools = Tools(registry=builtin_registry(), workspace=Workspace(workspace), mode=Mode.FULL)
        session.add_user_message("make the price three times n")
        result = AgentTurn(session, tools, ask=None).run(threading.Event())
        answered = results(session)
        session.close()
    assert result.outcome == COMPLETED
    assert answered["e1"][0] == "error"
    assert answered["e1"][1].startswith("shopkit/pricing.py was not read in this session")
    assert "     2\t    return n * 2" in answered["e1"][1]  # the file, as the read would show it
    assert answered["r1"][0] == "ok" and answered["e2"][0] == "ok"
    # The refusal is what the model was sent next.
    assert model.requests[1][-1]["content"].startswith("shopkit/pricing.py was not read in this session")
    assert (workspace / "shopkit" / "pricing.py").read_text() == "def price(n):\n    return n * 3\n"


def test_a_read_counts_in_the_turns_after_it(tmp_path):
    workspace = workspace_at(tmp_path)
    model = ScriptedModel([
        reply(("r1", "read_file", {"path": "shopkit/pricing.py"})),
        ("It doubles n.", None),
        reply(("e1", "edit_file", EDIT)),
        ("Changed.", None),
    ])
    with Store(tmp_path / "state.db") as store:
        session = open_chat(store, model)
        tools = Tools(registry=builtin_registry(), workspace=Workspace(workspace), mode=Mode.FULL)
        for prompt in ("what does price do?", "make it three times n"):
            session.add_user_message(prompt)
            assert AgentTurn(session, tools, ask=None).run(threading.Event()).outcome == COMPLETED
        answered = results(session)
        session.close()
    assert answered["e1"][0] == "ok", answered["e1"]
    assert (workspace / "shopkit" / "pricing.py").read_text() == "def price(n):\n    return n * 3\n"
