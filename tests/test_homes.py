"""Our home and Hermes Agent's: another program's files are never changed.

Hermes Agent keeps its own ``state.db`` and ``config.yaml`` in ``HERMES_HOME`` (default
``~/.hermes``). Every command runs here as users run it (the real entry point in a
subprocess), and the app starts through ``App.run_test``; after each one, the foreign files
must hash the same, byte for byte (``-wal``/``-shm``/``-journal`` included), and each
refusal is one line naming the file, exit 2 (CLI) or a message on screen (app). The real
binary also starts under tmux, as in ``test_tmux_smoke``.
"""

from __future__ import annotations

import hashlib
import json
import os
import shlex
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest
from support.hermes_home import AGENT_CONFIG
from support.tmux import _app_command, wait_for
from textual.widgets import Input, Static

from hermes_tui.config import Config
from hermes_tui.providers.extractive.summarizer import ExtractiveSummarizer
from hermes_tui.store import Store
from hermes_tui.tui.app import HermesApp
from hermes_tui.tui.screens.settings import SettingsScreen

CLI = [sys.executable, "-m", "hermes_tui.cli"]
TIMEOUT_S = 180


TELEMETRY = {
    "event": "micro_compaction", "session_id": "s1", "outcome": "absorbed", "messages_before": 10,
    "messages_after": 8, "tokens_before": 1000, "tokens_after": 700, "tokens_delta": -300,
    "exchange_tokens": 400, "rolling_summary_tokens": 100, "cursor": 3, "passes_total": 1,
    "tokens_saved_total": 300, "duration_ms": 1200, "threshold_tokens": 8000, "context_limit": 10000,
    "occupancy_pct": 12.5, "main_model": "m", "aux_model": "a",
}


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


# --- foreign files -----------------------------------------------------------------------------


def hermes_agent_state_db(path: Path, *, journal: str = "DELETE") -> None:
    """A state.db shaped like Hermes Agent's: its own sessions and messages tables."""
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute(f"PRAGMA journal_mode = {journal}")
    conn.executescript("""
        CREATE TABLE schema_version (version INTEGER NOT NULL);
        INSERT INTO schema_version VALUES (4);
        CREATE TABLE sessions (id TEXT PRIMARY KEY, source TEXT NOT NULL, model TEXT, started_at REAL NOT NULL);
        CREATE TABLE messages (id INTEGER PRIMARY KEY AUTOINCREMENT, session_id TEXT NOT NULL, role TEXT NOT NULL,
                               content TEXT, tool_name TEXT, timestamp REAL NOT NULL);
        INSERT INTO sessions VALUES ('20250101_abc', 'cli', 'claude', 1.0);
        INSERT INTO messages (session_id, role, content, timestamp) VALUES ('20250101_abc', 'user', 'hi', 1.0);
    """)
    conn.close()


def foreign_v2_db(path: Path) -> None:
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute("PRAGMA journal_mode = DELETE")
    conn.executescript("CREATE TABLE notes (id INTEGER PRIMARY KEY, body TEXT); PRAGMA user_version = 2;")
    conn.close()


def hermes_agent_home(root: Path) -> Path:
    """A Hermes Agent home as it is on disk: state.db (WAL, as Hermes Agent keeps it), config, log."""
    home = root / "dot-hermes"
    (home / "logs").mkdir(parents=True)
    hermes_agent_state_db(home / "state.db", journal="WAL")
    (home / "config.yaml").write_text(AGENT_CONFIG)
    (home / "logs" / "agent.log").write_text(
        f"2026-11-30 03:01:02,123 INFO agent: micro compaction telemetry: {json.dumps(TELEMETRY)}\n"
    )
    (home / "sessions").mkdir()
    (home / "sessions" / "20250101_abc.json").write_text("{}")
    return home


def tree(root: Path) -> dict[str, str]:
    """Every file and folder under ``root``, with each file's sha256."""
    return {
        p.relative_to(root).as_posix(): hashlib.sha256(p.read_bytes()).hexdigest() if p.is_file() else "dir"
        for p in sorted(root.rglob("*"))
    }


def foreign_files(home: Path) -> dict[str, str]:
    """What another program owns in ``home``: state.db and config.yaml, with any side file."""
    return {name: digest for name, digest in tree(home).items() if name.startswith(("state.db", "config.yaml"))}


# --- running commands ----------------------------------------------------------------------------


def transcript(root: Path) -> Path:
    path = root / "talk.json"
    messages = [{"role": "system", "content": "You help."}]
    for n in range(6):
        messages += [{"role": "user", "content": f"question {n} " + "word " * 40},
                     {"role": "assistant", "content": f"answer {n} " + "word " * 60}]
    path.write_text(json.dumps(messages))
    return path


def commands(talk: Path, *, app: bool = True) -> dict[str, list[str]]:
    """Every command, read-only ones included. ``app``: also the ones that start the app (only
    where they stop with a refusal before its screen takes over: there is no terminal here)."""
    found = {
        "sessions list": ["sessions", "list"],
        "sessions list --json": ["sessions", "list", "--json"],
        "sessions show": ["sessions", "show", "20250101"],
        "sessions export": ["sessions", "export", "20250101"],
        "sessions search": ["sessions", "search", "hi"],
        "sessions rm": ["sessions", "rm", "20250101"],
        "compact": ["compact", str(talk), "--provider", "extractive", "--context-limit", "4096"],
        "report": ["report"],
        "models list": ["models", "list"],
        "bench --list": ["bench", "--list"],
        "demo": ["demo"],
        "app": [],
        "app --resume": ["--resume"],
        "open": ["open", str(talk)],
    }
    return found if app else {name: args for name, args in found.items() if name not in STARTS_THE_APP}


OPENS_THE_STORE = {"sessions list", "sessions list --json", "sessions show", "sessions export", "sessions search",
                   "sessions rm", "compact", "bench --list", "app", "app --resume", "open"}
LOADS_THE_CONFIG = {"compact", "demo", "app", "app --resume", "open"}
STARTS_THE_APP = {"app", "app --resume", "open"}


def run(env: dict[str, str], args: list[str], cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run([*CLI, *args], env=env, cwd=cwd, stdin=subprocess.DEVNULL, capture_output=True,
                          text=True, timeout=TIMEOUT_S)


def clean_env(tmp_path: Path, hf_offline_env: dict[str, str], **homes: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("HERMES_TUI_HOME", "HERMES_HOME", "OPENAI_API_KEY")}
    env.update(hf_offline_env)
    env.update({"HOME": str(tmp_path / "user"), "PYTHONUNBUFFERED": "1"})
    for var in ("XDG_CONFIG_HOME", "XDG_DATA_HOME", "XDG_STATE_HOME", "XDG_CACHE_HOME"):
        env.pop(var, None)
    env.update(homes)
    return env


def assert_one_line_refusal(proc: subprocess.CompletedProcess, path: Path, problem: str, name: str) -> None:
    assert proc.returncode == 2, f"{name}: exit {proc.returncode}\n{proc.stdout[-2000:]}\n{proc.stderr[-2000:]}"
    err = proc.stderr
    assert err.count("\n") == 1 and "Traceback" not in err, f"{name}: {err}"
    assert str(path) in err and problem in err, f"{name}: {err}"


# --- our home pointed at another program's files: refused, untouched ------------------------------------


@pytest.mark.parametrize("make", [hermes_agent_state_db, foreign_v2_db], ids=["hermes-agent-db", "user-version-2"])
def test_every_command_leaves_a_foreign_state_db_byte_identical(tmp_path, hf_offline_env, make):
    home = tmp_path / "home"
    home.mkdir()
    make(home / "state.db")
    env = clean_env(tmp_path, hf_offline_env, HERMES_TUI_HOME=str(home), HERMES_HOME=str(tmp_path / "agent"))
    before = foreign_files(home)
    assert list(before) == ["state.db"]
    for name, args in commands(transcript(tmp_path)).items():
        proc = run(env, args, tmp_path)
        if name in OPENS_THE_STORE:
            assert_one_line_refusal(proc, home / "state.db", "not a hermes-tui database", name)
        else:
            assert "Traceback" not in proc.stderr, f"{name}: {proc.stderr}"
        assert foreign_files(home) == before, f"{name} changed the database"


def test_every_command_leaves_a_foreign_config_byte_identical(tmp_path, hf_offline_env):
    home = tmp_path / "home"
    home.mkdir()
    (home / "config.yaml").write_text(AGENT_CONFIG)
    env = clean_env(tmp_path, hf_offline_env, HERMES_TUI_HOME=str(home), HERMES_HOME=str(tmp_path / "agent"))
    before = foreign_files(home)["config.yaml"]
    for name, args in commands(transcript(tmp_path)).items():
        proc = run(env, args, tmp_path)
        if name in LOADS_THE_CONFIG:
            assert_one_line_refusal(proc, home / "config.yaml", "unknown key", name)
        else:
            assert "Traceback" not in proc.stderr, f"{name}: {proc.stderr}"
        files = foreign_files(home)
        assert files.pop("config.yaml") == before, f"{name} changed config.yaml"
        assert not [n for n in files if n.startswith("config.yaml")], f"{name} left {files}"


@pytest.mark.anyio
async def test_the_app_refuses_to_save_over_a_foreign_config_and_says_so_on_screen(tmp_path, hermes_home,
                                                                                    monkeypatch):
    agent = hermes_agent_home(tmp_path)
    monkeypatch.setenv("HERMES_HOME", str(agent))
    agent_before = tree(agent)
    config_path = hermes_home / "config.yaml"
    config_path.write_text(AGENT_CONFIG)
    before = config_path.read_bytes()
    with Store(hermes_home / "state.db") as store:
        app = HermesApp(Config(), store, config_path=config_path, summarizer=ExtractiveSummarizer())
        async with app.run_test(size=(120, 40)) as pilot:
            await pilot.pause()
            app.open_tool_screen("settings")
            await pilot.pause()
            screen = app.screen
            assert isinstance(screen, SettingsScreen)
            assert "Save is refused" in str(screen.query_one("#load-error", Static).content)
            screen.query_one("#compression--threshold", Input).value = "0.6"
            await pilot.press("ctrl+s")
            await pilot.pause()
            assert app.screen is screen  # not dismissed: nothing was saved
            outcome = str(screen.query_one("#outcome", Static).content)
            assert outcome.startswith(f"Not saved: {config_path}: not a hermes-tui config (")
            assert "\n" not in outcome
    assert config_path.read_bytes() == before
    assert sorted(p.name for p in hermes_home.iterdir() if p.name.startswith("config.yaml")) == ["config.yaml"]
    assert tree(agent) == agent_before


# --- Hermes Agent's home beside ours: never written ---------------------------------------------------


def test_no_command_writes_into_hermes_agent_home(tmp_path, hf_offline_env):
    agent, ours = hermes_agent_home(tmp_path), tmp_path / "ours"
    env = clean_env(tmp_path, hf_offline_env, HERMES_TUI_HOME=str(ours), HERMES_HOME=str(agent))
    before = tree(agent)
    for name, args in commands(transcript(tmp_path), app=False).items():
        proc = run(env, args, tmp_path)
        assert "Traceback" not in proc.stderr, f"{name}: {proc.stderr}"
        assert tree(agent) == before, f"{name} wrote into Hermes Agent's home"
    proc = run(env, ["report", "--hermes"], tmp_path)
    assert proc.returncode == 0 and str(agent / "logs" / "agent.log") in proc.stdout, proc.stderr
    assert tree(agent) == before
    # Our files went to our home.
    assert (ours / "state.db").is_file() and (ours / "logs" / "agent.log").is_file()
    with Store(ours / "state.db") as store:
        (replay,) = store.list_sessions()  # from compact
        assert replay.kind == "replay" and replay.title.startswith("talk.json · replay "), replay


@pytest.mark.parametrize("with_db", [True, False], ids=["with-state-db", "before-its-first-session"])
def test_with_only_hermes_home_set_our_files_go_to_the_user_dirs(tmp_path, hf_offline_env, with_db):
    agent = hermes_agent_home(tmp_path)
    if not with_db:
        (agent / "state.db").unlink()
    env = clean_env(tmp_path, hf_offline_env, HERMES_HOME=str(agent))
    before = tree(agent)
    for name, args in commands(transcript(tmp_path), app=False).items():
        proc = run(env, args, tmp_path)
        assert "Traceback" not in proc.stderr, f"{name}: {proc.stderr}"
        assert tree(agent) == before, f"{name} wrote into HERMES_HOME"
    user = tmp_path / "user"
    assert (user / ".local" / "share" / "hermes-tui" / "state.db").is_file()
    assert (user / ".local" / "state" / "hermes-tui" / "log" / "agent.log").is_file()


@pytest.mark.parametrize("where", ["hermes-home", "inside-it", "xdg-data-in-dot-hermes"])
def test_a_home_of_ours_inside_hermes_agent_home_is_refused(tmp_path, hf_offline_env, where):
    user = tmp_path / "user"
    dot_hermes = user / ".hermes"
    (dot_hermes / "logs").mkdir(parents=True)
    (dot_hermes / "logs" / "agent.log").write_text("theirs\n")
    if where == "hermes-home":
        env = clean_env(tmp_path, hf_offline_env, HERMES_TUI_HOME=str(dot_hermes))
        db = dot_hermes / "state.db"
    elif where == "inside-it":
        env = clean_env(tmp_path, hf_offline_env, HERMES_TUI_HOME=str(dot_hermes / "tui"))
        db = dot_hermes / "tui" / "state.db"
    else:  # HERMES_HOME unset: its default, ~/.hermes, is still Hermes Agent's
        env = clean_env(tmp_path, hf_offline_env, XDG_DATA_HOME=str(dot_hermes))
        db = dot_hermes / "hermes-tui" / "state.db"
    before = tree(dot_hermes)
    for args in (["sessions", "list"], ["compact", str(transcript(tmp_path)), "--provider", "extractive",
                                        "--context-limit", "4096"]):
        proc = run(env, args, tmp_path)
        assert proc.returncode == 2 and proc.stderr.count("\n") == 1, proc.stderr
        assert "Hermes Agent's home" in proc.stderr and "HERMES_TUI_HOME" in proc.stderr, proc.stderr
        assert "Traceback" not in proc.stderr
    assert str(db) in run(env, ["sessions", "list"], tmp_path).stderr
    assert tree(dot_hermes) == before


# --- the real binary in a real terminal -------------------------------------------------------------

OUR_CONFIG = "auxiliary:\n  compression:\n    provider: extractive\n"


def start_app(tmux, tmp_path: Path, hf_offline_env: dict[str, str], **homes: str) -> None:
    env = {**hf_offline_env, **homes, "HOME": str(tmp_path / "user"), "PYTHONFAULTHANDLER": "1"}
    tmux.start(shlex.join(["env", "-u", "HERMES_HOME", "-u", "HERMES_TUI_HOME",
                           *(f"{k}={v}" for k, v in env.items()), *_app_command()]), cwd=tmp_path)


def test_the_app_in_a_terminal_never_writes_into_hermes_agent_home(tmux, tmp_path, hf_offline_env):
    agent, ours = hermes_agent_home(tmp_path), tmp_path / "ours"
    ours.mkdir()
    (ours / "config.yaml").write_text(OUR_CONFIG)
    before = tree(agent)
    start_app(tmux, tmp_path, hf_offline_env, HERMES_TUI_HOME=str(ours), HERMES_HOME=str(agent))
    wait_for(tmux, lambda s: "No chat model is configured" in s, "the first-run screen", 120)
    tmux.keys("C-q")
    assert tmux.wait_exit(60) == "0", tmux.everything()
    assert tree(agent) == before
    assert (ours / "state.db").is_file()


def test_the_app_in_a_terminal_refuses_a_foreign_state_db_in_one_line(tmux, tmp_path, hf_offline_env):
    home = tmp_path / "home"
    home.mkdir()
    hermes_agent_state_db(home / "state.db")
    before = foreign_files(home)
    start_app(tmux, tmp_path, hf_offline_env, HERMES_TUI_HOME=str(home), HERMES_HOME=str(tmp_path / "agent"))
    assert tmux.wait_exit(120) == "2", tmux.everything()
    lines = [line for line in tmux.everything().splitlines() if line.strip() and not line.startswith("Pane is dead")]
    assert len(lines) == 1 and str(home / "state.db") in lines[0] and "not a hermes-tui database" in lines[0], lines
    assert foreign_files(home) == before
