"""Approval answers in the loop: the real ``AgentTurn`` with the real openai SDK client against
the scripted OpenAI-compatible server in a subprocess (tests/support/scripted_openai_server.py),
real files in a temp workspace, real ``bash`` and the real store. The ``ask`` callback stands
where the app's approval modal answers."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest
from support.scripted_endpoint import ScriptedServer, answer, call, calls

from hermes_tui.config import Config
from hermes_tui.providers.extractive.summarizer import ExtractiveSummarizer
from hermes_tui.providers.openai.chat import OpenAIChatClient
from hermes_tui.session.agent import COMPLETED, AgentTurn, Answer, Tools
from hermes_tui.session.wiring import open_session
from hermes_tui.store import Store
from hermes_tui.store.rules import StoredRules
from hermes_tui.tools import Tool, ToolKind
from hermes_tui.tools.approval import Mode
from hermes_tui.tools.builtin import builtin_registry
from hermes_tui.tools.workspace import Workspace


@pytest.fixture
def layout(tmp_path) -> tuple[Path, Path]:
    workspace, outside = tmp_path / "ws", tmp_path / "outside"
    workspace.mkdir()
    outside.mkdir()
    (outside / "secret.txt").write_text("outside text\n")
    (workspace / "link").symlink_to(outside)
    (workspace / "notes.txt").write_text("hello world\n")
    return workspace, outside


class Asked:
    """The ask callback: records each prompt and answers from ``answers`` (by call order)."""

    def __init__(self, *answers: Answer) -> None:
        self.answers = list(answers)
        self.prompts: list[tuple[str, dict, str | None, str]] = []

    def __call__(self, request, preview, reason) -> Answer:
        self.prompts.append((request.tool, dict(request.arguments), preview, reason))
        return self.answers.pop(0)


def run_turn(store: Store, server: ScriptedServer, tools: Tools, ask, prompt: str = "go"):
    config = Config().with_overrides({
        "model.provider": "openai-api", "model.model": "scripted", "model.base_url": server.base_url,
        "model.context_length": 32768, "auxiliary.compression.provider": "extractive",
    })
    chat = OpenAIChatClient(server.base_url, "scripted", api_key=None)
    session = open_session(config, store, title="approval", chat=chat, summarizer=ExtractiveSummarizer())
    try:
        session.add_user_message(prompt)
        result = AgentTurn(session, tools, ask=ask).run(threading.Event())
        with session.lock:
            results = {m.tool_call_id: (m.meta["tool"]["status"], m.content)
                       for m in session.conv.messages if m.role == "tool"}
    finally:
        session.close()
    return result, results


def test_allow_for_this_session_holds_for_the_command_and_is_never_stored(scripted, hermes_home, layout):
    workspace, _ = layout
    server = scripted([
        calls(call("run_shell", "a1", command="touch one two")),
        calls(call("run_shell", "a2", command="touch one two")),
        answer("done"),
    ])
    asked = Asked(Answer.ALLOW_SESSION)
    with Store(hermes_home / "state.db") as store:
        tools = Tools(registry=builtin_registry(), workspace=Workspace(workspace), rules=StoredRules(store))
        result, results = run_turn(store, server, tools, asked)
        assert StoredRules(store).rules(tools.key) == []  # for this session only: not in the database
        # A new session (fresh Tools, same database) asks again.
        again = scripted([calls(call("run_shell", "b1", command="touch three")), answer("ok")])
        fresh = Tools(registry=builtin_registry(), workspace=Workspace(workspace), rules=StoredRules(store))
        _, later = run_turn(store, again, fresh, Asked(Answer.DENY))
    assert result.outcome == COMPLETED
    assert [p[1]["command"] for p in asked.prompts] == ["touch one two"]  # the second ran unasked
    assert results["a1"][0] == results["a2"][0] == "ok"
    assert later["b1"][0] == "denied" and not (workspace / "three").exists()
    assert (workspace / "one").exists() and (workspace / "two").exists()


def test_always_for_a_compound_command_allows_that_call_only(scripted, hermes_home, layout):
    workspace, _ = layout
    server = scripted([
        calls(call("run_shell", "c1", command="touch a && touch b")),
        calls(call("run_shell", "c2", command="touch a && touch c")),
        answer("done"),
    ])
    asked = Asked(Answer.ALWAYS, Answer.DENY)
    with Store(hermes_home / "state.db") as store:
        tools = Tools(registry=builtin_registry(), workspace=Workspace(workspace), rules=StoredRules(store))
        result, results = run_turn(store, server, tools, asked)
        stored = StoredRules(store).rules(tools.key)
    assert result.outcome == COMPLETED
    assert [p[1]["command"] for p in asked.prompts] == ["touch a && touch b", "touch a && touch c"]
    assert "compound" in asked.prompts[0][3]
    assert stored == [] and tools.session_rules.rules(tools.key) == []  # no rule can allow a compound command
    assert results["c1"][0] == "ok" and results["c2"][0] == "denied"
    assert sorted(p.name for p in workspace.iterdir()) == ["a", "b", "link", "notes.txt"]


def test_a_path_outside_asks_even_in_full_mode_and_is_used_only_when_approved(scripted, hermes_home, layout):
    workspace, outside = layout
    server = scripted([
        calls(call("read_file", "o1", path="../outside/secret.txt"),
              call("read_file", "o2", path=str(outside / "secret.txt")),
              call("read_file", "o3", path="link/secret.txt"),
              call("write_file", "o4", path="link/new.txt", content="x")),
        # an edit applies to a file read before its reply (tools/read_record.py)
        calls(call("edit_file", "o5", path="../outside/secret.txt", old_string="outside", new_string="inside")),
        answer("done"),
    ])
    asked = Asked(Answer.ALLOW_ONCE, Answer.DENY, Answer.DENY, Answer.ALLOW_ONCE, Answer.DENY)
    with Store(hermes_home / "state.db") as store:
        tools = Tools(registry=builtin_registry(), workspace=Workspace(workspace), mode=Mode.FULL)
        result, results = run_turn(store, server, tools, asked)
    assert result.outcome == COMPLETED
    assert [p[0] for p in asked.prompts] == ["read_file", "read_file", "read_file", "write_file", "edit_file"]
    assert all("outside the workspace" in p[3] for p in asked.prompts)  # even in full mode
    assert results["o1"][0] == "ok" and "outside text" in results["o1"][1]
    assert results["o2"][0] == results["o3"][0] == "denied"
    assert "outside text" not in results["o2"][1] + results["o3"][1]
    assert results["o4"][0] == "ok" and (outside / "new.txt").read_text() == "x"  # approved: it went ahead
    # An edit outside is asked on its diff like any other, and a denial leaves the file alone.
    assert "-outside text" in asked.prompts[4][2] and "+inside text" in asked.prompts[4][2]
    assert results["o5"][0] == "denied" and (outside / "secret.txt").read_text() == "outside text\n"


def test_an_edit_is_asked_on_its_diff_and_one_that_cannot_apply_is_not_asked(scripted, hermes_home, layout):
    workspace, _ = layout
    server = scripted([
        calls(call("read_file", "r1", path="notes.txt")),  # edits apply only to a file read first
        calls(call("edit_file", "e1", path="notes.txt", old_string="hello", new_string="goodbye"),
              call("edit_file", "e2", path="notes.txt", old_string="not there", new_string="x"),
              call("edit_file", "e3", path="notes.txt", old_string="world", new_string="there")),
        answer("done"),
    ])
    asked = Asked(Answer.DENY, Answer.ALLOW_ONCE)
    with Store(hermes_home / "state.db") as store:
        tools = Tools(registry=builtin_registry(), workspace=Workspace(workspace))
        result, results = run_turn(store, server, tools, asked)
    assert result.outcome == COMPLETED
    assert [p[1]["old_string"] for p in asked.prompts] == ["hello", "world"]  # e2 never asked
    first_diff, second_diff = asked.prompts[0][2], asked.prompts[1][2]
    assert "-hello world" in first_diff and "+goodbye world" in first_diff
    assert "-hello world" in second_diff and "+hello there" in second_diff
    assert results["e1"][0] == "denied" and results["e2"][0] == "error" and "old_string not found" in results["e2"][1]
    assert results["e3"][0] == "ok"
    assert (workspace / "notes.txt").read_text() == "hello there\n"


def test_after_an_allowed_repeat_the_count_starts_again(scripted, hermes_home, layout):
    workspace, _ = layout
    server = scripted([calls(call("read_file", f"r{n}", path="notes.txt")) for n in range(1, 7)]
                      + [answer("done")])
    asked = Asked(Answer.ALLOW_ONCE, Answer.DENY)
    with Store(hermes_home / "state.db") as store:
        tools = Tools(registry=builtin_registry(), workspace=Workspace(workspace))
        result, results = run_turn(store, server, tools, asked)
    assert result.outcome == COMPLETED
    assert len(asked.prompts) == 2  # the 3rd and the 6th
    assert all("the same call 3 times in a row" in p[3] for p in asked.prompts)
    assert [results[f"r{n}"][0] for n in range(1, 7)] == ["ok", "ok", "ok", "ok", "ok", "denied"]


class Boom(Tool):
    name = "boom"
    description = "Raises."
    kind = ToolKind.READ
    parameters = {"type": "object", "properties": {}, "additionalProperties": False}

    def run(self, arguments, context):
        raise RuntimeError("the tool broke")


def test_a_tool_that_raises_and_an_ask_that_raises_are_error_results_and_the_turn_goes_on(
        scripted, hermes_home, layout):
    workspace, _ = layout
    server = scripted([
        calls(call("boom", "x1"), call("run_shell", "x2", command="touch never"),
              call("read_file", "x3", path="notes.txt")),
        answer("carried on"),
    ])

    def ask(request, preview, reason):
        raise RuntimeError("the prompt broke")

    registry = builtin_registry()
    registry.register(Boom())
    with Store(hermes_home / "state.db") as store:
        tools = Tools(registry=registry, workspace=Workspace(workspace))
        result, results = run_turn(store, server, tools, ask)
        requests = server.requests()
    assert result.outcome == COMPLETED and result.text == "carried on"
    assert results["x1"] == ("error", "boom failed: RuntimeError: the tool broke")
    assert results["x2"][0] == "error" and "RuntimeError" in results["x2"][1]
    assert not (workspace / "never").exists()
    assert results["x3"][0] == "ok"
    sent = {m["tool_call_id"]: m["content"] for m in requests[1]["messages"] if m["role"] == "tool"}
    assert list(sent) == ["x1", "x2", "x3"]  # the model was told about each
