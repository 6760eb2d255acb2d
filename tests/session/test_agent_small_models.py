"""What the agent does for small models: the first model call after the user's message must
be a call to a tool that can succeed (``agent.look_first``), and a request that ends with tool results carries the
result note (``agent.result_note``), sent and never stored.

Real store files and real tools on a real folder; the chat model is the scripted double
``helpers.ScriptedModel``, which records every request and whether its reply had to be a call."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

from helpers import ScriptedModel

from hermes_tui.config import Config
from hermes_tui.core.transcript import wire_view
from hermes_tui.session.agent import (
    COMPLETED,
    ERROR_NOTE,
    RESULT_NOTE,
    RESUME_NOTE,
    AgentTurn,
    Tools,
)
from hermes_tui.session.wiring import open_session
from hermes_tui.store import Store
from hermes_tui.tools.approval import Mode
from hermes_tui.tools.builtin import builtin_registry
from hermes_tui.tools.workspace import Workspace


def read(call_id: str, path: str) -> list[dict]:
    return [{"id": call_id, "type": "function", "function": {"name": "read_file", "arguments": json.dumps({"path": path})}}]


def run_turns(tmp_path: Path, turns: list[tuple[str, list]], mode: Mode = Mode.FULL,
              **agent) -> tuple[ScriptedModel, list]:
    ws = tmp_path / "ws"
    ws.mkdir(parents=True)
    (ws / "calc.py").write_text("def add(a, b):\n    return a + b\n")
    (ws / "notes.md").write_text("# Notes\n")
    overrides = {"auxiliary.compression.provider": "extractive", **{f"agent.{k}": v for k, v in agent.items()}}
    store = Store(tmp_path / "state.db")
    session = open_session(Config().with_overrides(overrides), store, title="t", chat=ScriptedModel())
    model = ScriptedModel([reply for _, replies in turns for reply in replies])
    session.chat = model
    tools = Tools(registry=builtin_registry(), workspace=Workspace(ws), mode=mode)
    try:
        for text, _ in turns:
            session.add_user_message(text)
            turn = AgentTurn(session, tools, max_steps=10)
            assert turn.run().outcome == COMPLETED
            turn.passes.settle()
        in_memory = wire_view(session.conv.messages)
    finally:
        session.close()
        store.close()
    with sqlite3.connect(tmp_path / "state.db") as db:  # what the store file holds
        stored = [content for (content,) in db.execute("SELECT content FROM messages")]
    return model, [*in_memory, *stored]


TWO_TURNS = [
    ("Which file defines add?", [("", read("c1", "calc.py")), ("calc.py defines add.", None)]),
    ("And what does it return?", [("", read("c2", "calc.py")), ("", read("c3", "calc.py")), ("a + b.", None)]),
]


ALL = [spec["function"]["name"] for spec in builtin_registry().specs()]


def test_the_first_call_after_each_user_message_must_be_a_call_and_no_other(tmp_path, hermes_home):
    model, _ = run_turns(tmp_path, TWO_TURNS)
    before_any_read = [name for name in ALL if name != "edit_file"]  # an edit could not succeed
    assert model.must_call == [before_any_read, None, ALL, None, None]


def test_requests_ending_with_results_carry_the_note_and_the_transcript_does_not(tmp_path, hermes_home):
    model, stored = run_turns(tmp_path, TWO_TURNS)
    ends = [request[-1] for request in model.requests]
    assert [m["role"] for m in ends] == ["user", "tool", "user", "tool", "tool"]
    for message in ends:
        assert message["content"].endswith(RESULT_NOTE) == (message["role"] == "tool")
    # only the last message of a request carries it: the earlier results go out as stored
    last = model.requests[-1]
    assert [m["content"].endswith(RESULT_NOTE) for m in last if m["role"] == "tool"] == [False, False, True]
    assert not any(RESULT_NOTE.strip() in json.dumps(m) for m in stored)


def test_both_are_settings(tmp_path, hermes_home):
    model, _ = run_turns(tmp_path, TWO_TURNS, look_first=False, result_note=False)
    assert model.must_call == [None] * 5
    assert not any(RESULT_NOTE.strip() in json.dumps(request) for request in model.requests)


def test_after_a_call_that_failed_the_note_says_to_call_again(tmp_path, hermes_home):
    turns = [("What is in notes.py?", [("", read("c1", "notes.py")), ("", read("c2", "calc.py")), ("Only add.", None)])]
    model, _ = run_turns(tmp_path, turns)
    failed, worked = model.requests[1][-1], model.requests[2][-1]
    assert "no such file" in failed["content"] and failed["content"].endswith(ERROR_NOTE)
    assert worked["content"].endswith(RESULT_NOTE)
    before_any_read = [name for name in ALL if name != "edit_file"]
    assert model.must_call == [before_any_read, before_any_read, None]  # held once more after the failure


def test_a_second_failure_in_a_row_leaves_the_model_free(tmp_path, hermes_home):
    turns = [("What is in notes.py?", [("", read("c1", "notes.py")), ("", read("c2", "notes.txt")),
                                       ("", read("c3", "note.py")), ("", read("c4", "calc.py")), ("Only add.", None)])]
    model, _ = run_turns(tmp_path, turns)
    before_any_read = [name for name in ALL if name != "edit_file"]
    assert model.must_call == [before_any_read, before_any_read, None, None, None]


def call(call_id: str, name: str, **arguments) -> list[dict]:
    return [{"id": call_id, "type": "function", "function": {"name": name, "arguments": json.dumps(arguments)}}]


def held_paths(model: ScriptedModel) -> list:
    """Per request: the path each held call is pinned to (None: not pinned, or not held)."""
    def pin(spec: dict) -> str | None:
        return spec["function"]["parameters"]["properties"].get("path", {}).get("const")

    return [None if specs is None else sorted({pin(spec) for spec in specs} - {None}) or None
            for specs in model.must_call_specs]


def test_a_write_refused_for_want_of_a_read_is_resumed_once_the_file_is_read(tmp_path, hermes_home):
    # What the 1.5B model did: write blind, be refused, read, then say it was done.
    turns = [("Make add return a - b.", [
        ("", call("c1", "write_file", path="calc.py", content="def add(a, b):\n    return a - b\n")),
        ("", read("c2", "calc.py")),
        ("", call("c3", "edit_file", path="calc.py", old_string="a + b", new_string="a - b")),
        ("Done.", None)])]
    model, stored = run_turns(tmp_path, turns)
    assert model.must_call[1] == ["read_file"] and held_paths(model)[1] == ["calc.py"]  # what the refusal asks
    # then only an edit (a write would be the same blind content again), and only of calc.py
    assert model.must_call[2] == ["edit_file"]
    assert held_paths(model)[2] == ["calc.py"]
    assert model.must_call[3] is None  # landed: free again
    assert model.requests[2][-1]["content"].endswith(RESUME_NOTE.format(path="calc.py"))
    assert (tmp_path / "ws" / "calc.py").read_text() == "def add(a, b):\n    return a - b\n"
    assert not any("you started" in json.dumps(m) for m in stored)  # the note is never stored


def test_an_edit_refused_is_resumed_at_once_since_its_refusal_reads_the_file(tmp_path, hermes_home):
    turns = [("Make add return a - b.", [
        ("", read("c0", "notes.md")),  # a read of another file: edit_file may be called then
        ("", call("c1", "edit_file", path="calc.py", old_string="a+b", new_string="a-b")),
        ("", call("c2", "edit_file", path="calc.py", old_string="a + b", new_string="a - b")),
        ("Done.", None)])]
    model, _ = run_turns(tmp_path, turns)
    assert model.must_call[2] == ["edit_file"] and held_paths(model)[2] == ["calc.py"]
    assert model.must_call[3] is None
    assert (tmp_path / "ws" / "calc.py").read_text() == "def add(a, b):\n    return a - b\n"


def test_a_change_that_keeps_failing_is_resumed_at_most_twice(tmp_path, hermes_home):
    wrong = [("", call(f"c{i}", "edit_file", path="calc.py", old_string="a+" * i + "b", new_string="a-b"))
             for i in range(1, 5)]  # each different: the same call three times in a row is refused
    turns = [("Make add return a - b.", [("", read("c0", "calc.py")), *wrong, ("I cannot.", None)])]
    model, _ = run_turns(tmp_path, turns)
    assert held_paths(model)[2:6] == [["calc.py"], ["calc.py"], None, None]


def test_a_change_the_user_declined_is_not_resumed(tmp_path, hermes_home):
    turns = [("Make add return a - b.", [("", call("c1", "write_file", path="calc.py", content="x")),
                                         ("", read("c2", "calc.py")), ("Left as it is.", None)])]
    model, _ = run_turns(tmp_path / "full", turns)
    assert held_paths(model)[1:3] == [["calc.py"], ["calc.py"]]  # refused for want of a read: resumed
    # ... and the same turn headless in a mode that asks: declined, so nothing to resume
    model, _ = run_turns(tmp_path / "asks", turns, mode=Mode.ASK)
    assert model.must_call[1:] == [None, None]


def test_a_read_the_model_does_not_make_is_held_once(tmp_path, hermes_home):
    turns = [("Make add return a - b.", [("", call("c1", "write_file", path="calc.py", content="x")),
                                         ("", call("c2", "list_dir", path=".")),
                                         ("", call("c3", "glob", pattern="*.py")), ("I could not.", None)])]
    model, _ = run_turns(tmp_path, turns)
    assert model.must_call[1] == ["read_file"]  # the model listed instead (the script says so)
    assert model.must_call[2:] == [None, None]
    # a file that is not there is no change to resume: the write creates it
    turns = [("Make add return a - b.", [("", call("c1", "edit_file", path="nope.py", old_string="a",
                                                   new_string="b")), ("", read("c2", "calc.py")), ("No.", None)])]
    model, _ = run_turns(tmp_path / "missing", turns)
    assert held_paths(model)[1:] == [None, None]


def test_resuming_is_part_of_look_first(tmp_path, hermes_home):
    turns = [("Make add return a - b.", [("", call("c1", "write_file", path="calc.py", content="x")),
                                         ("", read("c2", "calc.py")), ("Done.", None)])]
    model, _ = run_turns(tmp_path, turns, look_first=False)
    assert model.must_call == [None, None, None]


def test_a_write_in_the_same_reply_as_the_read_of_its_file_is_refused(tmp_path, hermes_home):
    both = read("c1", "calc.py") + call("c2", "write_file", path="calc.py", content="x = 1\n")
    turns = [("Rewrite calc.py.", [("", both), ("", call("c3", "write_file", path="calc.py", content="x = 1\n")),
                                   ("Done.", None)])]
    model, _ = run_turns(tmp_path, turns)
    results = [m for m in model.requests[1] if m["role"] == "tool"]
    assert "was not read in this session" in results[1]["content"]  # written before the file was seen
    assert (tmp_path / "ws" / "calc.py").read_text() == "x = 1\n"  # the next reply's write went through
