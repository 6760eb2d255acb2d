"""The system prompt in a running session: built where a turn begins (``AgentTurn.run``), first
in every request, kept in the protected head through compaction, replaced (the old row archived)
when what it says changes, put in front of a session that began without one, counted in /usage.

Real store files, real tools on real folders, the extractive summarizer; the chat model is the
scripted double ``helpers.ScriptedModel``, which records every request."""

from __future__ import annotations

import json
from pathlib import Path

from helpers import ScriptedModel

from hermes_tui.compaction.state import STALE
from hermes_tui.config import Config
from hermes_tui.core.tokens import count_message
from hermes_tui.core.transcript import MARKER_HEADER, Message, wire_view
from hermes_tui.providers.extractive.summarizer import ExtractiveSummarizer
from hermes_tui.session.agent import COMPLETED, AgentTurn, Tools
from hermes_tui.session.wiring import open_session
from hermes_tui.store import Store
from hermes_tui.tools.approval import Mode
from hermes_tui.tools.builtin import builtin_registry
from hermes_tui.tools.workspace import Workspace


def workspace(tmp_path: Path, *, agents: str | None = "Run the tests with make check.") -> Path:
    ws = tmp_path / "repo"
    (ws / ".git").mkdir(parents=True)
    (ws / "calc.py").write_text("def add(a, b):\n    return a + b\n")
    if agents is not None:
        (ws / "AGENTS.md").write_text(agents)
    return ws


def config(**overrides) -> Config:
    return Config().with_overrides({"auxiliary.compression.provider": "extractive", **overrides})


def tools_for(ws: Path, mode: Mode = Mode.ASK) -> Tools:
    return Tools(registry=builtin_registry(), workspace=Workspace(ws), mode=mode)


def one_turn(session, tools: Tools, text: str, model: ScriptedModel) -> None:
    session.chat = model
    session.add_user_message(text)
    turn = AgentTurn(session, tools, max_steps=25)
    assert turn.run().outcome == COMPLETED
    turn.passes.settle()


def test_the_prompt_goes_first_in_every_request_and_says_where_and_how(tmp_path, hermes_home):
    ws = workspace(tmp_path)
    store = Store(tmp_path / "state.db")
    session = open_session(config(), store, title="t", chat=ScriptedModel())
    read = [{"id": "c1", "type": "function", "function": {"name": "read_file", "arguments": '{"path": "calc.py"}'}}]
    model = ScriptedModel([("looking", read), ("calc.py defines add.", None)])
    try:
        one_turn(session, tools_for(ws), "Which file defines add?", model)
    finally:
        session.close()
        store.close()
    assert len(model.requests) == 2
    for request in model.requests:
        assert [m["role"] for m in request][:2] == ["system", "user"]
        assert sum(m["role"] == "system" for m in request) == 1
        system = request[0]["content"]
        assert f"the folder {ws.resolve()} (the workspace). It is a git repository." in system
        assert "Approval mode ask: reads run" in system
        assert system.endswith("--- AGENTS.md ---\nRun the tests with make check.")
    assert model.requests[0][0]["content"] == model.requests[1][0]["content"]  # the same all turn long


def test_the_prompt_is_never_absorbed_by_compaction(tmp_path, hermes_home):
    ws = workspace(tmp_path)
    (ws / "big.txt").write_text("".join(f"row {n}: alpha beta gamma delta epsilon zeta eta theta\n"
                                        for n in range(40)))
    steps = [(f"reading, step {s}", [{"id": f"r{s}", "type": "function", "function": {
        "name": "read_file", "arguments": json.dumps({"path": "big.txt", "offset": s + 1})}}]) for s in range(10)]
    model = ScriptedModel([*steps, ("All read.", None)])
    # No other message protected: the prompt's own place in the head is all that keeps it.
    cfg = config(**{"model.context_length": 4096, "compression.protect_first_n": 0,
                    "compression.policy": "per_exchange"})
    store = Store(tmp_path / "state.db")
    session = open_session(cfg, store, title="t", chat=model, summarizer=ExtractiveSummarizer())
    try:
        one_turn(session, tools_for(ws), "Read big.txt again and again", model)
        prompt = session.conv.messages[0]
        batch = session.publish_pass(session.plan_compress())  # /compact: batch over all it may take
        stored = store.load_active(session.info.id)
    finally:
        session.close()
        store.close()
    # It went past the threshold: passes absorbed the reads into a marker.
    assert any(m.is_marker for m in stored)
    assert session.compactor.state.passes_total >= 1
    assert any(any(str(m["content"]).startswith(MARKER_HEADER) for m in r) for r in model.requests)
    # The prompt stayed first, whole, in memory, in the store and in the last request.
    assert prompt.is_system_prompt and stored[0].id == prompt.id
    assert batch is not None and batch.outcome in ("compressed", "nothing_to_absorb")
    assert session.conv.messages[0] is prompt and any(m.is_marker for m in stored)
    assert model.requests[-1][0] == {"role": "system", "content": prompt.content}
    assert all(r[0]["content"] == prompt.content for r in model.requests)


def test_a_changed_approval_mode_archives_the_old_prompt_and_a_reopened_session_loads_the_new(tmp_path, hermes_home):
    ws = workspace(tmp_path)
    path = tmp_path / "state.db"
    store = Store(path)
    session = open_session(config(), store, title="t", chat=ScriptedModel())
    try:
        one_turn(session, tools_for(ws, Mode.ASK), "first", ScriptedModel([("one", None)]))
        first = session.conv.messages[0]
        one_turn(session, tools_for(ws, Mode.ASK), "second", ScriptedModel([("two", None)]))
        assert session.conv.messages[0] is first  # nothing changed: the same row, no churn
        later = ScriptedModel([("three", None)])
        one_turn(session, tools_for(ws, Mode.FULL), "third", later)
        second = session.conv.messages[0]
    finally:
        session.close()
        store.close()
    assert second.id != first.id and "Approval mode full:" in second.content
    assert later.requests[0][0]["content"] == second.content
    assert sum(m.role == "system" for m in session.conv.messages) == 1
    with Store(path) as reopened:
        rows = [(m.id, state) for m, state in reopened.load_all(session.info.id) if m.role == "system"]
        assert rows == [(first.id, "archived"), (second.id, "active")]
        resumed = open_session(config(), reopened, session_id=session.info.id, chat=ScriptedModel())
        try:
            messages = resumed.conv.messages
            assert messages[0].id == second.id and "Approval mode full:" in messages[0].content
            assert [m.content for m in messages if m.role == "user"] == ["first", "second", "third"]
        finally:
            resumed.close()


def test_an_edited_agents_md_is_taken_at_the_next_turn(tmp_path, hermes_home):
    ws = workspace(tmp_path)
    store = Store(tmp_path / "state.db")
    session = open_session(config(), store, title="t", chat=ScriptedModel())
    try:
        one_turn(session, tools_for(ws), "first", ScriptedModel([("one", None)]))
        (ws / "AGENTS.md").write_text("Use tabs.")
        model = ScriptedModel([("two", None)])
        one_turn(session, tools_for(ws), "second", model)
    finally:
        session.close()
        store.close()
    assert model.requests[0][0]["content"].endswith("--- AGENTS.md ---\nUse tabs.")


def test_a_session_stored_without_one_gets_it_in_front(tmp_path, hermes_home):
    ws = workspace(tmp_path, agents=None)
    path = tmp_path / "state.db"
    with Store(path) as store:
        old = store.create_session("older", messages=[Message(role="user", content="hi"),
                                                     Message(role="assistant", content="hello")])
        store.release_lease(old.id)
        store.acquire_lease(old.id)
        session = open_session(config(), store, session_id=old.id, chat=ScriptedModel())
        model = ScriptedModel([("again", None)])
        try:
            one_turn(session, tools_for(ws), "more", model)
        finally:
            session.close()
    with Store(path) as store:
        active = store.load_active(old.id)
    assert [m.role for m in active] == ["system", "user", "assistant", "user", "assistant"]
    assert active[0].is_system_prompt and "It is a git repository." in active[0].content
    assert [m["role"] for m in model.requests[0]] == ["system", "user", "assistant", "user"]


def test_an_imported_system_message_follows_ours_and_both_go_out_as_one(tmp_path, hermes_home):
    ws = workspace(tmp_path, agents=None)
    with Store(tmp_path / "state.db") as store:
        imported = store.create_session("hermes", messages=[Message(role="system", content="You are Hermes."),
                                                           Message(role="user", content="hi")])
        store.release_lease(imported.id)
        store.acquire_lease(imported.id)
        session = open_session(config(), store, session_id=imported.id, chat=ScriptedModel())
        model = ScriptedModel([("ok", None)])
        try:
            one_turn(session, tools_for(ws), "go on", model)
            active = store.load_active(imported.id)
        finally:
            session.close()
    assert [(m.role, m.is_system_prompt) for m in active[:2]] == [("system", True), ("system", False)]
    request = model.requests[0]
    assert [m["role"] for m in request] == ["system", "user"]  # "hi" and "go on" merged too
    assert request[0]["content"] == f"{active[0].content}\n\nYou are Hermes."


def test_leading_system_messages_go_out_as_one():
    sent = wire_view([Message(role="system", content="ours"), Message(role="system", content="theirs"),
                      Message(role="user", content="hi")])
    assert sent == [{"role": "system", "content": "ours\n\ntheirs"}, {"role": "user", "content": "hi"}]


def test_usage_counts_the_prompt_on_a_line_of_its_own(tmp_path, hermes_home):
    ws = workspace(tmp_path)
    store = Store(tmp_path / "state.db")
    session = open_session(config(), store, title="t", chat=ScriptedModel())
    try:
        assert session.usage()["system_prompt_tokens"] == 0
        one_turn(session, tools_for(ws), "hi", ScriptedModel([("hello", None)]))
        usage = session.usage()
        prompt = session.conv.messages[0]
    finally:
        session.close()
        store.close()
    assert usage["system_prompt_tokens"] == count_message(session.conv.counter, prompt) > 50
    assert usage["tokens"] == session.conv.total_tokens >= usage["system_prompt_tokens"]


def reads_session(tmp_path, protect_first_n: int = 1):
    """A session after a turn of four reads of ~600 tokens under an 8K window: below the
    threshold (no pass ran during the turn), past the tail (a pass planned now has work)."""
    ws = workspace(tmp_path)
    (ws / "big.txt").write_text("".join(f"row {n}: alpha beta gamma delta epsilon zeta eta theta\n"
                                        for n in range(40)))
    cfg = config(**{"compression.protect_first_n": protect_first_n, "model.context_length": 8192})
    store = Store(tmp_path / "state.db")
    session = open_session(cfg, store, title="t", chat=ScriptedModel(), summarizer=ExtractiveSummarizer())
    steps = [(f"step {s}", [{"id": f"c{s}", "type": "function", "function": {
        "name": "read_file", "arguments": json.dumps({"path": "big.txt", "offset": s + 1})}}]) for s in range(4)]
    return ws, store, session, ScriptedModel([*steps, ("done", None)])


def test_a_pass_planned_before_the_prompt_was_replaced_still_lands(tmp_path, hermes_home):
    ws, store, session, model = reads_session(tmp_path)
    try:
        one_turn(session, tools_for(ws), "read it", model)
        before = session.conv.messages[0]
        planned = session.plan_pass()
        assert planned  # a trim and/or a micro splice of the reads
        planned_on = [m.id for m in session.conv.messages]
        # The next turn begins (the mode changed) while the pass is still to publish.
        replaced = session.refresh_system_prompt(AgentTurn(session, tools_for(ws, Mode.FULL)).system_prompt())
        assert replaced is not None and session.conv.messages[0] is replaced
        report = session.publish_pass(planned)
        messages = list(session.conv.messages)
        stored = store.load_active(session.info.id)
    finally:
        session.close()
        store.close()
    assert report is not None and report.outcome != STALE and report.outcome == planned[-1].outcome
    assert set(planned_on[1:]) - {m.id for m in messages}  # it changed what it was planned to
    assert messages[0] is replaced and before.id not in {m.id for m in messages}
    assert [m.id for m in stored] == [m.id for m in messages]


def test_a_pass_planned_before_the_prompt_went_in_front_is_dropped_as_stale_and_planned_again(
        tmp_path, hermes_home, monkeypatch):
    ws, store, session, model = reads_session(tmp_path)
    try:
        # The turn as an older version ran it: no system prompt.
        monkeypatch.setattr(session, "refresh_system_prompt", lambda text: None)
        one_turn(session, tools_for(ws), "read it", model)
        monkeypatch.undo()
        assert not any(m.role == "system" for m in session.conv.messages)
        planned = session.plan_pass()
        assert planned
        ids_before, total_before = [m.id for m in session.conv.messages], session.conv.total_tokens
        prompt = session.refresh_system_prompt(AgentTurn(session, tools_for(ws)).system_prompt())
        assert prompt is not None
        report = session.publish_pass(planned)
        # Dropped whole: every index moved, nothing half-applied, the count still true.
        assert report is not None and report.outcome == STALE
        assert [m.id for m in session.conv.messages] == [prompt.id, *ids_before]
        assert session.conv.total_tokens == total_before + count_message(session.conv.counter, prompt)
        # Planned again on the transcript as it is now, it lands behind the prompt.
        again = session.plan_pass()
        assert again
        report = session.publish_pass(again)
        messages = list(session.conv.messages)
        stored = store.load_active(session.info.id)
    finally:
        session.close()
        store.close()
    assert report is not None and report.outcome == again[-1].outcome != STALE
    assert messages[0] is prompt and set(ids_before) - {m.id for m in messages}
    assert [m.id for m in stored] == [m.id for m in messages]


def test_batch_compaction_keeps_the_prompt_first_and_whole(tmp_path, hermes_home):
    ws, store, session, model = reads_session(tmp_path, protect_first_n=0)
    try:
        one_turn(session, tools_for(ws), "read it", model)
        prompt = session.conv.messages[0]
        report = session.publish_pass(session.plan_compress())  # /compact
        messages = list(session.conv.messages)
        stored = store.load_active(session.info.id)
    finally:
        session.close()
        store.close()
    assert report is not None and report.outcome == "compressed"
    assert messages[0] is prompt and stored[0].id == prompt.id and stored[0].content == prompt.content
    assert prompt.content not in messages[1].content  # not folded into a summary either
    assert any(m.is_marker for m in messages)
