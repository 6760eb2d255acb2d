"""Malformed input, as users meet it: the real CLI in a subprocess and the real app.

Every bad transcript, config.yaml or telemetry line must end in one line naming the
file and the problem (exit 2 from the CLI, a message on screen in the app), with no
traceback and nothing written: the SQLite file is opened and its sessions counted.
A hang fails the test through the subprocess timeout instead of hanging the run.
"""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest
from textual.widgets import Static

from hermes_tui.config import Config
from hermes_tui.store import Store
from hermes_tui.tui.app import HermesApp
from hermes_tui.tui.screens.chat import ChatScreen
from hermes_tui.tui.screens.first_run import FirstRunScreen
from hermes_tui.tui.screens.settings import SettingsScreen

# Generous: a Python start-up on a loaded machine; the bugs these catch took minutes or forever.
CLI_TIMEOUT_S = 60
DIGITS = "1" * 5000
GOOD = [
    {"role": "user", "content": "list the files"},
    {"role": "assistant", "content": "", "tool_calls": [
        {"id": "call_1", "type": "function", "function": {"name": "ls", "arguments": "{}"}}]},
    {"role": "tool", "tool_call_id": "call_1", "name": "ls", "content": "a.py"},
    {"role": "assistant", "content": "One file: a.py."},
]


def _with(index: int, **fields) -> str:
    messages = json.loads(json.dumps(GOOD))
    messages[index].update(fields)
    return json.dumps(messages)


def _tool_name(name) -> str:
    messages = json.loads(json.dumps(GOOD))
    messages[1]["tool_calls"][0]["function"]["name"] = name
    return json.dumps(messages)


# name -> (file name, file text, what the one line must say besides the file)
BAD_TRANSCRIPTS = {
    # json.dumps writes the lone surrogate as the escape \ud800, as any JSON writer would.
    "lone surrogate": ("surrogate.json", _with(3, content="bad \ud800 half"), ["message 3", "content", "lone surrogate"]),
    "tool name a number": ("tool-name.json", _tool_name(5), ["message 1", "function.name", "a number"]),
    "message name a number": ("name.json", _with(2, name=5), ["message 2", "name must be text"]),
    "5,000-digit number": ("digits.json", '[{"role": "user", "content": "hi", "meta": {"n": ' + DIGITS + "}}]",
                           ["line 1", "5,000 digits"]),
    "100,000 nested brackets": ("nested.json", "[" * 100_000 + "]" * 100_000, ["line 1", "too deeply nested"]),
    "nested brackets in JSONL": ("nested.jsonl", '{"role": "user", "content": "hi"}\n' + "[" * 100_000,
                                 ["line 2", "too deeply nested"]),
}

ALIAS_BOMB = "a: &a [" + ", ".join(['"lol"'] * 9) + "]\n" + "".join(
    f"{name}: &{name} [{', '.join([f'*{prev}'] * 9)}]\n" for prev, name in zip("abcdefgh", "bcdefghi")
)
# The same bomb as the value of a real key, so the error is about the value.
ALIAS_BOMB_IN_A_KEY = "model:\n  model:\n" + "".join(
    f"    - {line.split(': ', 1)[1]}\n" for line in ALIAS_BOMB.splitlines()
)

# name -> (config.yaml text, what the one line must say besides the file)
BAD_CONFIGS = {
    "alias bomb": (ALIAS_BOMB, ["line 1", "unknown key"]),
    "alias bomb under a key": (ALIAS_BOMB_IN_A_KEY, ["line 3", "model.model", "expected text, got a list"]),
    "5,000-digit number": ("compression:\n  threshold: " + DIGITS + "\n", ["line 2", "number too long"]),
    "5,000-deep flow nesting": ("compression: " + "[" * 5000 + "]" * 5000 + "\n", ["line 1", "too deeply nested"]),
    "5,000-deep block nesting": ("".join(" " * i + f"k{i}:\n" for i in range(5000)), ["too deeply nested"]),
    "NUL byte": ("compression:\n  threshold: 0.5\x00\n", ["line 2", "#x0000"]),
    "lone surrogate": ('model:\n  model: "qwen\\ud800"\n', ["line 2", "lone surrogate"]),
}


def run_cli(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    env.pop("OPENAI_API_KEY", None)
    return subprocess.run(
        [sys.executable, "-m", "hermes_tui.cli", *args], env=env, cwd=cwd, stdin=subprocess.DEVNULL,
        capture_output=True, text=True, timeout=CLI_TIMEOUT_S,
    )


def assert_one_line_error(proc: subprocess.CompletedProcess, *needles: str) -> str:
    explain = f"exit {proc.returncode}\n--- stderr ---\n{proc.stderr[-3000:]}"
    assert proc.returncode == 2, explain
    assert "Traceback" not in proc.stderr, explain
    lines = proc.stderr.splitlines()
    assert len(lines) == 1, explain
    for needle in needles:
        assert needle in lines[0], f"{needle!r} not in {lines[0]!r}"
    assert proc.stdout == ""
    return lines[0]


def session_rows(db: Path) -> int:
    """Sessions in the real SQLite file (0 when no command created it)."""
    if not db.exists():
        return 0
    with sqlite3.connect(db) as conn:
        return conn.execute("SELECT count(*) FROM sessions").fetchone()[0]


@pytest.fixture
def good_transcript(tmp_path) -> Path:
    path = tmp_path / "good.json"
    path.write_text(json.dumps(GOOD), encoding="utf-8")
    return path


# --- transcripts: compact and open ------------------------------------------------------


@pytest.mark.parametrize("command", ["compact", "open"])
@pytest.mark.parametrize("case", list(BAD_TRANSCRIPTS))
def test_a_bad_transcript_is_one_line_and_exit_2(case, command, hermes_home, tmp_path):
    name, text, needles = BAD_TRANSCRIPTS[case]
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    extra = ["--provider", "extractive"] if command == "compact" else []
    proc = run_cli(command, str(path), *extra, cwd=tmp_path)
    assert_one_line_error(proc, str(path), *needles)
    assert session_rows(hermes_home / "state.db") == 0


def test_the_good_transcript_still_compacts(hermes_home, good_transcript, tmp_path):
    proc = run_cli("compact", str(good_transcript), "--provider", "extractive", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert [m["role"] for m in json.loads(proc.stdout)] == [m["role"] for m in GOOD]


# --- config.yaml: every command that reads it --------------------------------------------


@pytest.mark.parametrize("case", list(BAD_CONFIGS))
def test_a_bad_config_is_one_line_and_exit_2(case, hermes_home, good_transcript, tmp_path):
    text, needles = BAD_CONFIGS[case]
    config = hermes_home / "config.yaml"
    config.write_text(text, encoding="utf-8")
    proc = run_cli("compact", str(good_transcript), "--provider", "extractive", cwd=tmp_path)
    assert_one_line_error(proc, str(config), *needles)
    assert session_rows(hermes_home / "state.db") == 0
    assert config.read_text(encoding="utf-8") == text


@pytest.mark.parametrize(
    "command", [[], ["open", "TRANSCRIPT"], ["demo"], ["--config", "CONFIG", "compact", "TRANSCRIPT"]]
)
def test_every_command_reading_config_stops_at_the_alias_bomb(command, hermes_home, good_transcript, tmp_path):
    config = hermes_home / "config.yaml"
    config.write_text(ALIAS_BOMB_IN_A_KEY, encoding="utf-8")
    args = [{"TRANSCRIPT": str(good_transcript), "CONFIG": str(config)}.get(a, a) for a in command]
    proc = run_cli(*args, cwd=tmp_path)
    assert_one_line_error(proc, str(config), "model.model", "expected text, got a list")
    assert session_rows(hermes_home / "state.db") == 0


# --- telemetry lines read by report ------------------------------------------------------


def test_report_skips_and_counts_malformed_telemetry_lines(hermes_home, tmp_path):
    def micro(**fields) -> str:
        record = {"event": "micro_compaction", "session_id": "s1", "outcome": "absorbed", **fields}
        return "2026-01-01 INFO hermes_tui.compaction: micro compaction telemetry: " + json.dumps(record)

    prefix = "2026-01-01 INFO hermes_tui.compaction: micro compaction telemetry: "
    log = tmp_path / "agent.log"
    log.write_text("\n".join([
        micro(tokens_before=1000, tokens_after=600, tokens_delta=-400, duration_ms=120),
        prefix + '{"event": "micro_compaction", "tokens_delta": ' + DIGITS + "}",
        prefix + "[" * 100_000 + "]" * 100_000,
        prefix + '{"event": "micro_compaction", "session_id": "s\\ud800", "outcome": "absorbed"}',
        # JSON Python reads as infinity: a figure nobody logged, not a crash
        prefix + '{"event": "micro_compaction", "session_id": "s1", "outcome": "absorbed", '
                 '"tokens_delta": -1e999, "duration_ms": 1e999}',
        micro(tokens_before=900, tokens_after=700, tokens_delta=-200, duration_ms=80),
    ]) + "\n", encoding="utf-8")
    for flags in ([], ["--per-session"], ["--json"]):
        proc = run_cli("report", str(log), *flags, cwd=tmp_path)
        assert proc.returncode == 0 and "Traceback" not in proc.stderr, proc.stderr
        if flags == ["--json"]:
            document = json.loads(proc.stdout)
            assert document["malformed_lines"] == 3
            assert document["overall"]["passes"] == 3
            assert document["overall"]["net_tokens_saved"] == 600
        else:
            assert "(3 malformed telemetry lines skipped)" in proc.stdout
            assert "+600" in proc.stdout


# --- the app: an import that fails, a config that does not load --------------------------


def shown(app) -> str:
    return " ".join(str(w.content) for w in app.screen.query(Static))


@pytest.mark.anyio
@pytest.mark.parametrize("case", ["lone surrogate", "tool name a number", "100,000 nested brackets"])
async def test_the_app_says_why_a_transcript_does_not_open_and_writes_nothing(case, hermes_home, tmp_path):
    name, text, needles = BAD_TRANSCRIPTS[case]
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    db = tmp_path / "state.db"
    with Store(db) as store:
        app = HermesApp(Config(), store, import_path=path)
        async with app.run_test(size=(100, 30)) as pilot:
            await pilot.pause()
            assert isinstance(app.screen, FirstRunScreen)
            on_screen = shown(app)
            assert f"Cannot open the transcript: {path}" in on_screen
            for needle in needles:
                assert needle in on_screen
            assert session_rows(db) == 0
            await pilot.press("escape")  # Quit
            await pilot.pause()
        assert app.return_code == 2
    assert session_rows(db) == 0


@pytest.mark.anyio
async def test_after_a_failed_import_a_new_chat_starts_only_when_asked(hermes_home, tmp_path):
    name, text, _ = BAD_TRANSCRIPTS["message name a number"]
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    db = tmp_path / "state.db"
    with Store(db) as store:
        app = HermesApp(Config(), store, import_path=path)
        async with app.run_test(size=(100, 30)) as pilot:
            await pilot.pause()
            assert session_rows(db) == 0
            await pilot.click("#action-0")  # Start a new chat
            await pilot.pause()
            assert app.chat_screen is not None and isinstance(app.chat_screen, ChatScreen)
            assert session_rows(db) == 1


@pytest.mark.anyio
@pytest.mark.parametrize("case", ["alias bomb", "5,000-digit number", "5,000-deep flow nesting", "NUL byte"])
async def test_the_app_shows_a_config_that_does_not_load(case, hermes_home, tmp_path):
    text, needles = BAD_CONFIGS[case]
    config_path = tmp_path / "config.yaml"
    config_path.write_text(text, encoding="utf-8")
    with Store(tmp_path / "state.db") as store:
        app = HermesApp(Config(), store, config_path=config_path)
        async with app.run_test(size=(100, 30)) as pilot:
            await pilot.pause()
            app.open_tool_screen("settings")
            await pilot.pause()
            assert isinstance(app.screen, SettingsScreen)
            error = str(app.screen.query_one("#load-error", Static).content)
            assert error.startswith(str(config_path))
            for needle in needles:
                assert needle in error
    assert config_path.read_text(encoding="utf-8") == text


def test_an_import_the_database_refuses_leaves_no_session_row(tmp_path):
    from hermes_tui.core.transcript import Message

    db = tmp_path / "state.db"
    with Store(db) as store:
        # Built in code, past the file checks: SQLite cannot encode the lone surrogate.
        messages = [Message("user", "fine"), Message("assistant", "bad \ud800")]
        with pytest.raises(UnicodeEncodeError):
            store.create_session("import", messages=messages)
        assert not any(m.stored for m in messages)
    assert session_rows(db) == 0
    with Store(db) as store:
        info = store.create_session("import", messages=[Message("user", "fine"), Message("assistant", "ok")])
        assert (info.message_count, info.active_count) == (2, 2)
        assert [m.content for m in store.load_active(info.id)] == ["fine", "ok"]


# --- tool-call arguments: outside JSON too, read by passes and by the screen --------------


@pytest.fixture
def deep_arguments(tmp_path) -> Path:
    """A real agent session where one call's arguments nest 3,000 brackets deep."""
    from support.cli_sessions import agent_session

    session = agent_session()
    calls = [m for m in session if m.get("tool_calls")]
    # Past the protected head, so passes condense this exchange.
    calls[3]["tool_calls"][0]["function"]["arguments"] = '{"command": ' + "[" * 3000 + "]" * 3000 + "}"
    path = tmp_path / "deep-arguments.json"
    path.write_text(json.dumps(session), encoding="utf-8")
    return path


def test_deep_tool_arguments_do_not_fail_a_pass(hermes_home, deep_arguments, tmp_path):
    # A window the session fits in once passes run: at 4,096 tokens the 3,000-token call, kept
    # in the tail with its result, leaves nothing for the batch backstop to absorb for a turn,
    # and that attempt is (rightly) listed as a failure. A pass after every exchange, as here
    # before the watermark policy became the default.
    proc = run_cli(
        "compact", str(deep_arguments), "--provider", "extractive", "--context-limit", "6144",
        "--policy", "per_exchange", cwd=tmp_path,
    )
    assert proc.returncode == 0, proc.stderr
    assert "RecursionError" not in proc.stderr and "failures:" not in proc.stderr, proc.stderr
    out = json.loads(proc.stdout)
    assert any((m.get("meta") or {}).get("compaction") for m in out)
    # The deep call itself was absorbed by a pass, not left verbatim.
    deep = "[" * 3000
    assert not any(deep in json.dumps(m.get("tool_calls") or []) for m in out), "the deep call was never absorbed"


@pytest.mark.anyio
async def test_the_app_shows_a_transcript_with_deep_tool_arguments(hermes_home, deep_arguments, tmp_path):
    with Store(tmp_path / "state.db") as store:
        app = HermesApp(Config(), store, import_path=deep_arguments)
        async with app.run_test(size=(100, 30)) as pilot:
            await pilot.pause()
            screen = app.chat_screen
            assert screen is not None
            assert len(screen.session.conv.messages) == len(json.loads(deep_arguments.read_text()))
