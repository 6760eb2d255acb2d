"""``hermes-tui run`` given what a model really sends: malformed calls the model must be able to
correct, a stream that is not a reply, and no ``--workspace`` (the folder it was started in).
The real binary in a subprocess, the scripted OpenAI-compatible server in another
(tests/support/scripted_openai_server.py), the real openai SDK, real files and the real store.
Also a stop while the model streams, in-process against a real HTTP endpoint that holds its
reply open (tests/support/openai_endpoint.py)."""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
import threading
from pathlib import Path

import pytest
from support.openai_endpoint import FakeEndpoint, chunk, event, start_stream

from hermes_tui.config import Config
from hermes_tui.providers.extractive.summarizer import ExtractiveSummarizer
from hermes_tui.providers.openai.chat import OpenAIChatClient
from hermes_tui.session.agent import COMPLETED, STOPPED, AgentListener, AgentTurn, Tools
from hermes_tui.session.wiring import open_session
from hermes_tui.store import Store
from hermes_tui.tools.builtin import builtin_registry
from hermes_tui.tools.workspace import Workspace

ROOT = Path(__file__).resolve().parents[2]
CLI_TIMEOUT_S = 120
WAIT_S = 60


def run_cli(home: Path, base_url: str, config_dir: Path, *args: str, cwd: Path = ROOT,
            extra: str = "") -> subprocess.CompletedProcess:
    config = config_dir / "config.yaml"
    config.write_text(
        "model:\n  provider: openai-api\n  model: scripted\n"
        f"  base_url: {base_url}\n  context_length: 32768\n"
        "auxiliary:\n  compression:\n    provider: extractive\n" + extra)
    env = {**os.environ, "HERMES_TUI_HOME": str(home), "PYTHONUNBUFFERED": "1"}
    env.pop("OPENAI_API_KEY", None)
    return subprocess.run([sys.executable, "-m", "hermes_tui.cli", "--config", str(config), "run", *args],
                          env=env, cwd=cwd, stdin=subprocess.DEVNULL, capture_output=True, text=True,
                          timeout=CLI_TIMEOUT_S)


def explain(proc) -> str:
    return f"exit {proc.returncode}\n--- stdout ---\n{proc.stdout[-3000:]}\n--- stderr ---\n{proc.stderr[-3000:]}"


def tool_rows(home: Path) -> dict[str, tuple[str, str]]:
    conn = sqlite3.connect(home / "state.db")
    try:
        rows = conn.execute("SELECT tool_call_id, meta, content FROM messages WHERE role = 'tool'").fetchall()
    finally:
        conn.close()
    return {call_id: (json.loads(meta)["tool"]["status"], content) for call_id, meta, content in rows}


def test_malformed_calls_become_error_results_the_model_corrects(scripted, hermes_home, tmp_path):
    workspace = tmp_path / "ws"
    workspace.mkdir()
    (workspace / "a.txt").write_text("the content\n")
    server = scripted([
        {"tool_calls": [
            {"id": "bad_json", "name": "read_file", "arguments": ['{"path": ', '"a.txt"']},
            {"id": "bad_type", "name": "read_file", "arguments": ['{"path": 5}']},
            {"id": "missing", "name": "read_file", "arguments": ['{"limit": 3}']},
            {"id": "extra", "name": "read_file", "arguments": ['{"path": "a.txt", "colour": "red"}']},
            {"id": "unknown", "name": "cat_file", "arguments": ['{"path": "a.txt"}']},
            {"id": "list", "name": "read_file", "arguments": ['["a.txt"]']},
            # Nested deeper than any decoder recurses: it crashed run with RecursionError.
            {"id": "deep", "name": "read_file", "arguments": ['{"path": ' + "[" * 5000 + "]" * 5000 + "}"]},
        ], "finish_reason": "tool_calls"},
        {"tool_calls": [{"id": "good", "name": "read_file", "arguments": ['{"path": "a.txt"}']}],
         "finish_reason": "tool_calls"},
        {"text": ["Read it."], "finish_reason": "stop"},
    ])
    proc = run_cli(hermes_home, server.base_url, tmp_path, "read a.txt", "--workspace", str(workspace))
    assert proc.returncode == 0, explain(proc)
    assert proc.stdout == "Read it.\n"
    assert "Traceback" not in proc.stderr
    results = tool_rows(hermes_home)
    bad = ("bad_json", "bad_type", "missing", "extra", "unknown", "list", "deep")
    assert {k: results[k][0] for k in bad} == dict.fromkeys(bad, "error")
    assert results["good"][0] == "ok" and "the content" in results["good"][1]
    # Each error says what to fix, in one line.
    assert "JSON" in results["bad_json"][1]
    assert "'path'" in results["bad_type"][1] or "path" in results["bad_type"][1]
    assert "path" in results["missing"][1] and "colour" in results["extra"][1]
    assert "cat_file" in results["unknown"][1] and "read_file" in results["unknown"][1]
    assert "not usable JSON (more than 100 levels" in results["deep"][1]
    assert all("\n" not in results[k][1].strip() for k in bad)
    # The model was sent every error (and its malformed call as it came), so it could correct it.
    second = server.requests()[1]["messages"]
    assert [m["tool_call_id"] for m in second if m["role"] == "tool"] == list(bad)
    sent_calls = next(m for m in second if m.get("tool_calls"))["tool_calls"]
    # (as a JSON string: mlx_lm.server rejects a request whose history holds arguments that are not JSON)
    assert json.loads(sent_calls[0]["function"]["arguments"]) == '{"path": "a.txt"'
    lines = [line for line in proc.stderr.splitlines() if line.startswith("tool ")]
    assert len(lines) == 8 and sum("-> error" in line for line in lines) == 7, proc.stderr


def test_a_stream_that_is_not_a_reply_is_one_line_and_the_session_stays_valid(scripted, hermes_home, tmp_path):
    workspace = tmp_path / "ws"
    workspace.mkdir()
    bad = {"id": "x", "object": "chat.completion.chunk",
           "choices": [{"index": 0, "delta": {"tool_calls": "read_file"}, "finish_reason": None}]}
    server = scripted([{"raw": [bad]}])
    proc = run_cli(hermes_home, server.base_url, tmp_path, "hi", "--workspace", str(workspace))
    assert proc.returncode != 0, explain(proc)
    assert proc.stdout == "" and "Traceback" not in proc.stderr
    problem = [line for line in proc.stderr.splitlines() if line.startswith("hermes-tui:")]
    assert len(problem) == 1 and "tool_calls" in problem[0], proc.stderr
    conn = sqlite3.connect(hermes_home / "state.db")
    try:
        roles = [r for (r,) in conn.execute("SELECT role FROM messages ORDER BY position")]
    finally:
        conn.close()
    assert roles[-1] == "user" and "assistant" not in roles  # the prompt kept, nothing half-made


def test_without_workspace_the_tools_act_in_the_folder_it_was_started_in(scripted, hermes_home, tmp_path):
    here = tmp_path / "started-here"
    here.mkdir()
    (here / "notes.txt").write_text("from the start folder\n")
    elsewhere = tmp_path / "configured"
    elsewhere.mkdir()
    (elsewhere / "notes.txt").write_text("from agent.workspace\n")
    script = [
        {"tool_calls": [{"id": "r1", "name": "read_file", "arguments": ['{"path": "notes.txt"}']},
                        {"id": "w1", "name": "write_file",
                         "arguments": ['{"path": "made.txt", "content": "made"}']}],
         "finish_reason": "tool_calls"},
        {"text": ["ok"], "finish_reason": "stop"},
    ]
    first = scripted(script)
    proc = run_cli(hermes_home, first.base_url, tmp_path, "read it", "--approve", "auto-edit", cwd=here)
    assert proc.returncode == 0, explain(proc)
    assert (here / "made.txt").read_text() == "made"
    sent = {m["tool_call_id"]: m["content"] for m in first.requests()[1]["messages"] if m["role"] == "tool"}
    assert "from the start folder" in sent["r1"]

    # agent.workspace in the config takes the place of the start folder; --workspace beats both.
    second = scripted(script)
    proc = run_cli(hermes_home, second.base_url, tmp_path, "read it", "--approve", "auto-edit", cwd=here,
                   extra=f"agent:\n  workspace: {elsewhere}\n")
    assert proc.returncode == 0, explain(proc)
    sent = {m["tool_call_id"]: m["content"] for m in second.requests()[1]["messages"] if m["role"] == "tool"}
    assert "from agent.workspace" in sent["r1"] and (elsewhere / "made.txt").exists()


# --- a stop while the model streams ------------------------------------------------------------


@pytest.fixture
def endpoint():
    made = FakeEndpoint()
    yield made
    made.close()


def tool_piece(**piece) -> dict:
    return {"id": "chatcmpl-1", "object": "chat.completion.chunk", "model": "m",
            "choices": [{"index": 0, "delta": {"tool_calls": [piece]}, "finish_reason": None}]}


def held_reply(endpoint: FakeEndpoint, *pieces: dict):
    """A reply that sends ``pieces`` and then holds the stream open (until teardown)."""
    def reply(handler) -> None:
        start_stream(handler)
        for piece in pieces:
            event(handler, piece)
        endpoint.release.wait(WAIT_S)

    return reply


class StopOnText(AgentListener):
    def __init__(self, cancel: threading.Event) -> None:
        self.cancel = cancel

    def text(self, piece: str) -> None:
        self.cancel.set()


def in_process_session(store: Store, base_url: str):
    config = Config().with_overrides({
        "model.provider": "openai-api", "model.model": "m", "model.base_url": base_url,
        "model.context_length": 32768, "auxiliary.compression.provider": "extractive",
    })
    chat = OpenAIChatClient(base_url, "m", api_key=None)
    return open_session(config, store, title="stop", chat=chat, summarizer=ExtractiveSummarizer())


def test_a_stop_mid_stream_keeps_the_text_drops_the_half_made_call_and_the_next_turn_goes_on(
        endpoint, hermes_home, tmp_path):
    endpoint.reply = held_reply(
        endpoint, chunk(), chunk("Let me look at "),
        tool_piece(index=0, id="half", type="function", function={"name": "read_file", "arguments": '{"pa'}))
    cancel = threading.Event()
    with Store(hermes_home / "state.db") as store:
        session = in_process_session(store, endpoint.base_url)
        tools = Tools(registry=builtin_registry(), workspace=Workspace(tmp_path))
        session.add_user_message("look")
        stopped = AgentTurn(session, tools, listener=StopOnText(cancel)).run(cancel)
        assert stopped.outcome == STOPPED and stopped.text == "Let me look at "
        kept = store.load_active(session.info.id)
        assert [m.role for m in kept] == ["system", "user", "assistant"]
        assert kept[0].is_system_prompt
        assert kept[-1].tool_calls is None and kept[-1].meta.get("stopped") is True

        # A stop before any text keeps nothing.
        endpoint.reply = held_reply(endpoint, chunk())
        session.add_user_message("again")
        cancel = threading.Event()
        threading.Timer(1.0, cancel.set).start()
        quiet = AgentTurn(session, tools).run(cancel)
        assert quiet.outcome == STOPPED and quiet.steps == 1
        assert [m.role for m in store.load_active(session.info.id)] == ["system", "user", "assistant", "user"]

        endpoint.reply = lambda handler: (start_stream(handler), event(handler, chunk()),
                                          event(handler, chunk("carried on")),
                                          event(handler, chunk("", "stop")))
        session.add_user_message("go on")
        result = AgentTurn(session, tools).run(threading.Event())
        session.close()
    assert result.outcome == COMPLETED and result.text == "carried on"
    sent = endpoint.requests[-1]["body"]["messages"]
    # The prompt of the turn stopped before any text and the next one go out as one user message.
    assert [(m["role"], m["content"]) for m in sent if m["role"] != "system"] == [
        ("user", "look"), ("assistant", "Let me look at "), ("user", "again\n\ngo on")]
    assert not any(m.get("tool_calls") for m in sent)  # the half-made call never went out


def test_a_reply_asking_too_much_runs_within_the_limits_and_says_so(scripted, hermes_home, tmp_path):
    """2,000 calls in one reply all ran, and a 20 MB write_file argument was written and
    stored twice: now at most MAX_CALLS_PER_REPLY run (the last result says how many were not)
    and arguments over MAX_ARGUMENT_BYTES are neither run nor kept."""
    from hermes_tui.session.agent import MAX_ARGUMENT_BYTES, MAX_CALLS_PER_REPLY

    workspace = tmp_path / "ws"
    workspace.mkdir()
    (workspace / "a.txt").write_text("the content\n")
    # (each call different: the same call many times in a row is denied as a loop)
    many = [{"id": f"c{n}", "name": "read_file", "arguments": [json.dumps({"path": "a.txt", "limit": n + 1})]}
            for n in range(200)]
    huge = json.dumps({"path": "big.txt", "content": "x" * (MAX_ARGUMENT_BYTES + 10)})
    server = scripted([
        {"tool_calls": many, "finish_reason": "tool_calls"},
        {"tool_calls": [{"id": "huge", "name": "write_file", "arguments": [huge]}], "finish_reason": "tool_calls"},
        {"text": ["Done."], "finish_reason": "stop"},
    ])
    proc = run_cli(hermes_home, server.base_url, tmp_path, "read it a lot", "--workspace", str(workspace),
                   "--approve", "full")
    assert proc.returncode == 0, explain(proc)
    results = tool_rows(hermes_home)
    ran = [f"c{n}" for n in range(MAX_CALLS_PER_REPLY)]
    assert set(results) == {*ran, "huge"}
    assert {c: results[c][0] for c in ran} == dict.fromkeys(ran, "ok"), results[ran[-1]]
    last = results[ran[-1]][1]
    assert "the content" in last and f"{200 - MAX_CALLS_PER_REPLY:,} more tool calls" in last
    assert results["huge"][0] == "error" and "over the limit" in results["huge"][1]
    assert not (workspace / "big.txt").exists()
    assert (hermes_home / "state.db").stat().st_size < MAX_ARGUMENT_BYTES  # the argument was not kept
    # The model was sent what the transcript keeps: 64 calls, and arguments it can read.
    second = server.requests()[1]["messages"]
    assert len(next(m for m in second if m.get("tool_calls"))["tool_calls"]) == MAX_CALLS_PER_REPLY
    third = server.requests()[2]["messages"]
    assert len(json.dumps(third)) < MAX_ARGUMENT_BYTES


def test_a_result_dense_in_tokens_is_capped_in_the_chat_models_tokens(scripted, hermes_home, tmp_path):
    """``yes`` under the 32 KB byte cap was still ~38K tokens: more than a small window holds.
    A result is also cut to a share of the window in the chat model's tokens (head and tail)."""
    from hermes_tui.config import Config
    from hermes_tui.session.session import RESULT_TOKEN_SHARE
    from hermes_tui.session.wiring import make_counter

    workspace = tmp_path / "ws"
    workspace.mkdir()
    command = "python3 -c \"print('first line'); print('y ' * 15000); print('last line')\""
    server = scripted([
        {"tool_calls": [{"id": "yes", "name": "run_shell", "arguments": [json.dumps({"command": command})]}],
         "finish_reason": "tool_calls"},
        {"text": ["Done."], "finish_reason": "stop"},
    ])
    proc = run_cli(hermes_home, server.base_url, tmp_path, "print a lot", "--workspace", str(workspace),
                   "--approve", "full")
    assert proc.returncode == 0, explain(proc)
    status, content = tool_rows(hermes_home)["yes"]
    counter = make_counter(Config.model_validate({"model": {"provider": "openai-api", "model": "scripted"}}))
    threshold = int(32768 * Config().compression.threshold)
    cap = int(threshold * RESULT_TOKEN_SHARE)
    assert counter.count_text(content) <= cap + 50  # the marker line on top
    assert "tokens omitted" in content and content.startswith("first line") and "last line" in content
