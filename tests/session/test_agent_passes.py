"""Passes while the agent works: planned in the background after each exchange, published
between model calls, waited for only when the next request would not fit the window.

The agent loop runs for real (real tools on real files, the real store, the extractive
summarizer behind a gate the test controls); the chat model is the scripted double
``helpers.ScriptedModel``, which checks every request it is sent."""

from __future__ import annotations

import json
import threading
import time

from helpers import ScriptedModel

from hermes_tui.config import Config
from hermes_tui.core.transcript import MARKER_HEADER
from hermes_tui.providers.extractive.summarizer import ExtractiveSummarizer
from hermes_tui.session.agent import COMPLETED, AgentTurn, Tools
from hermes_tui.session.wiring import open_session
from hermes_tui.store import Store
from hermes_tui.tools.builtin import builtin_registry
from hermes_tui.tools.workspace import Workspace

GATE_S = 60  # bounds a hang only


class GatedSummarizer(ExtractiveSummarizer):
    """The extractive summarizer, held at a gate until the test opens it (or after ``delay``)."""

    def __init__(self, delay: float | None = None) -> None:
        super().__init__()
        self.delay = delay
        self.gate = threading.Event()
        self.waiting = threading.Event()  # a pass is at the gate now
        self.calls = 0

    def summarize(self, request, *, max_tokens):
        self.calls += 1
        self.waiting.set()
        if self.delay is not None:
            time.sleep(self.delay)
        else:
            assert self.gate.wait(GATE_S), "the gate was never opened"
        self.waiting.clear()
        return super().summarize(request, max_tokens=max_tokens)


def read_steps(n: int) -> list:
    return [(f"reading, step {s}", [{"id": f"r{s}", "type": "function",
                                     "function": {"name": "read_file", "arguments": json.dumps({"path": "big.txt", "offset": s + 1})}}])
            for s in range(n)] + [("All read.", None)]


def start(tmp_path, *, limit: int, lines: int, summarizer, model: ScriptedModel):
    workspace = tmp_path / "ws"
    workspace.mkdir()
    (workspace / "big.txt").write_text("".join(f"row {n}: alpha beta gamma delta epsilon zeta eta theta\n"
                                               for n in range(lines)))
    config = Config().with_overrides({"model.context_length": limit, "compression.protect_first_n": 1,
                                      "auxiliary.compression.provider": "extractive",
                                      "compression.policy": "per_exchange"})  # a pass after each step
    store = Store(tmp_path / "state.db")
    session = open_session(config, store, title="passes", chat=model, summarizer=summarizer)
    session.add_user_message("Read big.txt again and again")
    return store, session, Tools(registry=builtin_registry(), workspace=Workspace(workspace))


def has_marker(request: list[dict]) -> bool:
    return any(m["role"] == "assistant" and str(m["content"]).startswith(MARKER_HEADER) for m in request)


def test_the_agent_goes_on_while_a_pass_runs_and_the_pass_lands_between_model_calls(tmp_path):
    summarizer = GatedSummarizer()
    while_held: list[int] = []

    def on_request(request: list[dict]) -> None:
        # A pass in flight reaches the gate before this call counts (on a loaded machine the
        # agent could otherwise run all its calls before the pass thread gets to the summarizer).
        deadline = time.monotonic() + GATE_S
        while (turn.passes.busy and not turn.passes.ready and not summarizer.waiting.is_set()
               and time.monotonic() < deadline):
            time.sleep(0.01)
        if summarizer.waiting.is_set():
            while_held.append(len(model.requests))
            if len(while_held) == 3:
                summarizer.gate.set()  # let the pass finish, during this model call
                deadline = time.monotonic() + GATE_S
                while not turn.passes.ready and time.monotonic() < deadline:
                    time.sleep(0.01)

    model = ScriptedModel(read_steps(10), on_request=on_request)
    store, session, tools = start(tmp_path, limit=8192, lines=30, summarizer=summarizer, model=model)
    turn = AgentTurn(session, tools, max_steps=25)
    try:
        result = turn.run()
        summarizer.gate.set()  # if the run ended before three held calls: fail below, not hang
        turn.passes.settle()
    finally:
        session.close()
        store.close()
    assert result.outcome == COMPLETED and result.steps == 11
    # Three model calls went out while a pass was held at the summarizer: the agent did not wait.
    assert len(while_held) >= 3, while_held
    # Planned during model call n (1-based), published before the next one: that is the
    # first request to carry the marker, and the transcript it was planned on grew meanwhile.
    first_with_marker = next(n for n, r in enumerate(model.requests, start=1) if has_marker(r))
    assert first_with_marker == while_held[2] + 1, (first_with_marker, while_held)
    assert turn.passes.published and summarizer.calls >= 1


def test_the_agent_waits_for_compaction_only_when_the_request_would_not_fit(tmp_path):
    summarizer = GatedSummarizer(delay=0.3)
    # 2,048 held the tool definitions (~1,100 tokens), the reply budget and a compacted
    # conversation; the system prompt (~200 more, in the protected head) needs the room too.
    limit = 2304
    fits: list[tuple[int, bool]] = []

    def on_request(request: list[dict]) -> None:
        fits.append((session.conv.total_tokens, session.conv.total_tokens + model.max_tokens <= limit))

    model = ScriptedModel(read_steps(8), on_request=on_request)
    store, session, tools = start(tmp_path, limit=limit, lines=40, summarizer=summarizer, model=model)
    try:
        turn = AgentTurn(session, tools, max_steps=25)
        result = turn.run()
        turn.passes.settle()
        stored = [m.id for m in store.load_active(session.info.id)]
        live = [m.id for m in session.conv.messages]
    finally:
        session.close()
        store.close()
    assert result.outcome == COMPLETED
    # Eight reads of ~600 tokens each would be ~5,000 tokens: far over the window without passes.
    assert all(ok for _, ok in fits), fits
    assert any(has_marker(r) for r in model.requests)
    assert stored == live
