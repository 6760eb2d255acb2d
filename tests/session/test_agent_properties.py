"""Property test: agent turns of random shapes, with passes after each exchange.

Hypothesis draws a conversation: turns of 1..6 model steps, each step with 0..3 tool
calls of every kind (a real read, an allowlisted real command, an edit the headless
loop must deny, malformed arguments, an unknown tool), a stop at some call, a step
limit. The turns run through the real loop (``session.agent.AgentTurn``), the real tools
on a temp workspace, the real SQLite store, the extractive summarizer, and a window
small enough that passes absorb exchanges in the background between steps. The chat
model is a scripted test double (``helpers.ScriptedModel``) that plays the drawn calls
and checks every request it is sent. After every turn:

 1. every request the model got was valid: each call answered, right after its message;
 2. every call made has exactly one result, in memory and in the store, on the same
    side (active or archived) as its call (a result the trim stage cut stands in for
    its original, which stays stored, archived, at an earlier row);
 3. user messages are verbatim, in order, never archived;
 4. nothing lost: every message the turn produced is in the store (active or archived);
 5. the store's active rows are the in-memory transcript; reopening adds nothing.
"""

from __future__ import annotations

import json
import os
import tempfile
import threading
from pathlib import Path

from helpers import ScriptedModel, check_request
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from hermes_tui.compaction.trim import META_KEY as TRIM_META
from hermes_tui.compaction.trim import is_trimmed
from hermes_tui.config import Config
from hermes_tui.providers.extractive.summarizer import ExtractiveSummarizer
from hermes_tui.session.agent import AgentListener, AgentTurn, Tools
from hermes_tui.session.fit import ContextTooLarge
from hermes_tui.session.wiring import open_session
from hermes_tui.store import Store
from hermes_tui.tools.approval import Mode
from hermes_tui.tools.builtin import builtin_registry
from hermes_tui.tools.workspace import Workspace

KINDS = ("read", "shell", "edit", "malformed", "unknown")
FILE_TEXT = "".join(f"line {n}: the quick brown fox jumps over the lazy dog {n}\n" for n in range(40))


def arguments_for(kind: str, n: int) -> tuple[str, str]:
    if kind == "read":
        return "read_file", json.dumps({"path": f"f{n % 3}.txt"})
    if kind == "shell":
        return "run_shell", json.dumps({"command": f"echo step {n}"})
    if kind == "edit":  # asks in ask mode; with no one to ask, denied
        return "write_file", json.dumps({"path": "out.txt", "content": "x"})
    if kind == "malformed":
        return "read_file", '{"path": "f0.txt"'
    return "no_such_tool", "{}"


class Watcher(AgentListener):
    def __init__(self, cancel: threading.Event, stop_at: int | None) -> None:
        self.cancel, self.stop_at = cancel, stop_at
        self.messages: list[str] = []  # ids of every message the turn produced
        self.finished = 0

    def reply(self, message) -> None:
        self.messages.append(message.id)

    def call_finished(self, call_id, name, arguments, result, message) -> None:
        self.messages.append(message.id)
        self.finished += 1
        if self.stop_at is not None and self.finished == self.stop_at:
            self.cancel.set()


steps = st.lists(st.lists(st.sampled_from(KINDS), max_size=3), min_size=1, max_size=6)
turns = st.lists(
    st.tuples(steps, st.one_of(st.none(), st.integers(1, 8)), st.integers(1, 6)), min_size=1, max_size=4,
)


# Small enough that passes absorb exchanges between steps; large enough for the tools'
# definitions (~1,100 tokens) and a few steps, so the guard rarely has to refuse a request.
WINDOW = 4096


def config_for(limit: int) -> Config:
    return Config().with_overrides({
        "model.context_length": limit, "auxiliary.compression.provider": "extractive",
        "compression.protect_first_n": 1,
    })


def run_conversation(root: Path, drawn: list) -> None:
    workspace = root / "ws"
    workspace.mkdir()
    for n in range(3):
        (workspace / f"f{n}.txt").write_text(FILE_TEXT)
    model = ScriptedModel()
    sent: list[str] = []
    produced: list[str] = []
    made_calls: list[str] = []
    with Store(root / "state.db") as store:
        session = open_session(config_for(WINDOW), store, title="prop", chat=model,
                               summarizer=ExtractiveSummarizer())
        tools = Tools(registry=builtin_registry(), workspace=Workspace(workspace), mode=Mode.ASK)
        for t, (shape, stop_at, max_steps) in enumerate(drawn):
            model.replies = []
            for s, kinds in enumerate(shape):
                calls = []
                for c, kind in enumerate(kinds):
                    name, arguments = arguments_for(kind, s + c)
                    calls.append({"id": f"t{t}s{s}c{c}", "type": "function",
                                  "function": {"name": name, "arguments": arguments}})
                model.replies.append((f"step {s} of turn {t}", calls or None))
            prompt = f"turn {t}: do the work  \n(verbatim)"
            sent.append(prompt)
            session.add_user_message(prompt)
            cancel = threading.Event()
            watcher = Watcher(cancel, stop_at)
            turn = AgentTurn(session, tools, ask=None, listener=watcher, max_steps=max_steps)
            try:
                result = turn.run(cancel)
            except ContextTooLarge:  # the guard sent nothing: what is stored must still hold
                result = None
                event("turn ended: the next request could not fit")
            turn.passes.settle()
            produced += watcher.messages
            # The calls the model made (a stop ends the turn before the next model call).
            for message in session.conv.messages:
                for call in message.tool_calls or []:
                    if call["id"] not in made_calls:
                        made_calls.append(call["id"])
            check_turn(store, session, sent, produced, made_calls)
            if result is not None:
                assert result.steps <= max_steps
                event(f"turn outcome: {result.outcome}")
        event(f"passes: {min(session.compactor.state.passes_total, 5)}+")
        session.close()
        store.acquire_lease(session.info.id)
        reopened = open_session(config_for(WINDOW), store, session_id=session.info.id, chat=model,
                                summarizer=ExtractiveSummarizer())
        assert [m.id for m in reopened.conv.messages] == [m.id for m in store.load_active(session.info.id)]
        assert [m.id for m in reopened.conv.messages] == [m.id for m in session.conv.messages]
        reopened.close()


def check_turn(store: Store, session, sent: list[str], produced: list[str], made_calls: list[str]) -> None:
    with session.lock:
        live = list(session.conv.messages)
    check_request([m.to_openai() for m in live])
    active = store.load_active(session.info.id)
    assert [m.id for m in active] == [m.id for m in live]
    rows = store.load_all(session.info.id)
    state_of = {m.id: state for m, state in rows}
    assert all(mid in state_of for mid in produced), "a message the turn produced is not stored"
    assert [m.content for m, _ in rows if m.role == "user"] == sent
    assert all(state_of[m.id] == "active" for m, _ in rows if m.role == "user")
    results: dict[str, list[str]] = {}
    call_state: dict[str, str] = {}
    order = {m.id: n for n, (m, _) in enumerate(rows)}
    # A trimmed result stands in for its original: the original is archived, before it.
    originals = {m.meta[TRIM_META]["original"]: m for m, _ in rows if is_trimmed(m)}
    for mid, trimmed in originals.items():
        assert state_of[mid] == "archived" and order[mid] < order[trimmed.id], mid
        assert rows[order[mid]][0].tool_call_id == trimmed.tool_call_id, mid
    for message, state in rows:
        if message.role == "tool" and message.id not in originals:
            results.setdefault(message.tool_call_id, []).append(state)
        for call in message.tool_calls or []:
            call_state[call["id"]] = state
    for call_id in made_calls:
        assert len(results.get(call_id, [])) == 1, f"call {call_id} has {len(results.get(call_id, []))} results"
        assert results[call_id][0] == call_state[call_id], f"call {call_id} and its result were cut apart"


@settings(max_examples=int(os.environ.get("HERMES_TUI_PROPERTY_EXAMPLES", "60")), deadline=None,
          suppress_health_check=[HealthCheck.too_slow])
@given(drawn=turns)
def test_tool_loops_of_random_shapes_keep_calls_paired_and_lose_nothing(drawn):
    with tempfile.TemporaryDirectory() as tmp:
        run_conversation(Path(tmp), drawn)
