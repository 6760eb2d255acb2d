"""One writer per session, across real processes on one real SQLite file.

Two ``compact --resume`` of one session, the app and a CLI command, two apps: the second
opener is refused with one clear line (the CLI exits 2), so stored rows are never
duplicated or interleaved. A writer killed with SIGKILL leaves its lease behind, and the
next opener takes it over. ``sessions rm`` of a session a live writer holds is refused:
deleting it under the writer would make its next message fail and lose what was typed.
"""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest
from helpers import agent_session

from hermes_tui.core.transcript import Message
from hermes_tui.store import SessionBusy, Store, StoreError, lease
from hermes_tui.util import paths

pytestmark = pytest.mark.integration

CLI = [sys.executable, "-m", "hermes_tui.cli"]
RUN_TIMEOUT_S = 180
BUSY = "is open in another hermes-tui (pid "


def cli_env() -> dict[str, str]:
    """The test's environment (its throwaway home included) without fault injection or keys."""
    return {k: v for k, v in os.environ.items() if k not in ("HERMES_TUI_CRASH_AT", "OPENAI_API_KEY")}


def compact_args(transcript: Path, *extra: str) -> list[str]:
    return [*CLI, "compact", str(transcript), "--provider", "extractive", "--turns", "step",
            "--context-limit", "4096", "--out", os.devnull, *extra]


def run(args: list[str], **env: str) -> subprocess.CompletedProcess:
    return subprocess.run(args, env={**cli_env(), **env}, stdin=subprocess.DEVNULL, capture_output=True,
                          text=True, timeout=RUN_TIMEOUT_S)


def key(msg: Message) -> tuple:
    return (msg.role, msg.content, msg.tool_call_id)


def stored_inputs(db: Path, session_id: str) -> list[tuple]:
    """Every message row of the session (active and archived, markers left out), in stored order."""
    with Store(db) as store:
        return [key(m) for m, _ in store.load_all(session_id) if not m.is_marker]


def assert_one_line_busy(stderr: str, pid: int | None = None) -> None:
    assert stderr.count("\n") == 1 and "Traceback" not in stderr, stderr
    assert BUSY in stderr, stderr
    if pid is not None:
        assert f"(pid {pid}," in stderr, stderr


@pytest.fixture
def db(hermes_home) -> Path:
    return paths.state_db_path()


@pytest.fixture
def long_transcript(tmp_path) -> tuple[Path, list[tuple]]:
    """An agent session long enough that replaying it takes seconds (so two replays overlap)."""
    messages = agent_session(exchanges=3000, size=60, users_every=20)  # ~3 s to replay here
    path = tmp_path / "agent.json"
    path.write_text(json.dumps([m.to_openai() for m in messages]))
    return path, [key(m) for m in messages]


def interrupted_session(transcript: Path, db: Path) -> str:
    """A replay killed (SIGKILL) after its second step: a stored session to resume."""
    killed = run(compact_args(transcript, "--session", "interrupted"), HERMES_TUI_CRASH_AT="turn.end:2")
    assert killed.returncode == -signal.SIGKILL, killed.stderr
    with Store(db) as store:
        (info,) = store.list_sessions()
    return info.id


def finish(process: subprocess.Popen, timeout: float = 60) -> tuple[int | None, str]:
    """Exit code (None: it hung and was killed) and stderr."""
    try:
        _, err = process.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        process.kill()
        _, err = process.communicate()
        return None, err
    return process.returncode, err


# --- CLI and CLI ------------------------------------------------------------------------------


def test_two_compact_resumes_at_once_store_the_input_once(long_transcript, db):
    transcript, inputs = long_transcript
    sid = interrupted_session(transcript, db)
    assert 0 < len(stored_inputs(db, sid)) < len(inputs)

    procs = [subprocess.Popen(compact_args(transcript, "--resume", sid), env=cli_env(), stdin=subprocess.DEVNULL,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for _ in range(2)]
    outcomes = [finish(p) for p in procs]

    assert stored_inputs(db, sid) == inputs, "rows duplicated or interleaved"
    codes = sorted(code for code, _ in outcomes if code is not None)
    assert codes == [0, 2], outcomes  # the replays overlapped: the second one was refused
    (refused,) = [err for code, err in outcomes if code == 2]
    winner = next(p.pid for p, (code, _) in zip(procs, outcomes) if code == 0)
    assert_one_line_busy(refused, winner)
    assert f"session {sid} " in refused

    # Once the first is done, the session is free again: a resume finds nothing left to do.
    again = run(compact_args(transcript, "--resume", sid))
    assert again.returncode == 0, again.stderr
    assert stored_inputs(db, sid) == inputs


# --- a killed writer --------------------------------------------------------------------------


def wait_for_writes(db: Path, pid: int, process: subprocess.Popen, rows: int = 1,
                    timeout: float = RUN_TIMEOUT_S) -> str:
    """The session whose lease ``pid`` holds, once it holds one and has stored ``rows`` messages in it."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        assert process.poll() is None, process.stderr.read() if process.stderr else "the writer exited"
        if db.exists():
            conn = sqlite3.connect(db, timeout=5)
            try:
                row = conn.execute(
                    "SELECT l.session_id, (SELECT count(*) FROM messages m WHERE m.session_id = l.session_id)"
                    " FROM session_leases l WHERE l.pid = ?", (pid,)).fetchone()
            except sqlite3.OperationalError:
                row = None  # not migrated yet
            finally:
                conn.close()
            if row and row[1] >= rows:
                return row[0]
        time.sleep(0.02)
    raise AssertionError(f"pid {pid} never took a lease and wrote {rows} rows")


def test_a_writer_killed_with_sigkill_leaves_a_lease_the_next_writer_takes_over(long_transcript, db):
    transcript, inputs = long_transcript
    writer = subprocess.Popen(compact_args(transcript, "--session", "killed"), env=cli_env(),
                              stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        sid = wait_for_writes(db, writer.pid, writer, rows=200)
        os.kill(writer.pid, signal.SIGKILL)
        assert writer.wait(timeout=RUN_TIMEOUT_S) == -signal.SIGKILL
    finally:
        if writer.poll() is None:
            writer.kill()
            writer.wait()
        writer.stderr.close()
    with Store(db) as store:
        left = lease.read(store.conn, sid)
    assert left is not None and left[1].pid == writer.pid  # the dead writer's lease is still there

    resumed = run(compact_args(transcript, "--resume", sid))
    assert resumed.returncode == 0, resumed.stderr
    assert f"stored as session {sid}" in resumed.stderr
    assert stored_inputs(db, sid) == inputs
    with Store(db) as store:
        assert lease.read(store.conn, sid) is None  # released at exit


# --- the lease in one store file ----------------------------------------------------------------


def dead_pid() -> int:
    """The pid of a process that has exited and been reaped."""
    process = subprocess.Popen([sys.executable, "-c", "pass"])
    process.wait()
    return process.pid


def rows(store: Store, session_id: str) -> list[tuple]:
    return store.conn.execute(
        "SELECT id, position, state FROM messages WHERE session_id = ? ORDER BY position, rowid", (session_id,)
    ).fetchall()


def test_a_second_store_on_a_held_session_is_refused_and_writes_nothing(tmp_path):
    path = tmp_path / "state.db"
    with Store(path) as first, Store(path) as second:
        sid = first.create_session("held").id
        first.flush(sid, [Message("user", "only the holder writes")])
        before = rows(first, sid)

        with pytest.raises(SessionBusy) as busy:
            second.acquire_lease(sid)
        assert str(busy.value).startswith(f"session {sid} is open in another hermes-tui (pid {os.getpid()}, since ")
        with pytest.raises(SessionBusy, match="is open in another hermes-tui .*: nothing was saved"):
            second.flush(sid, [Message("user", "an intruder")])
        with pytest.raises(SessionBusy, match="nothing was deleted"):
            second.delete_session(sid)
        assert rows(second, sid) == before

        first.release_lease(sid)
        second.acquire_lease(sid)  # free again: taken at once
        second.flush(sid, [Message("user", "the next writer")])
        with pytest.raises(StoreError):
            first.flush(sid, [Message("user", "the old writer again")])
        assert [m.content for m in second.load_active(sid)] == ["only the holder writes", "the next writer"]


def test_a_writer_whose_stale_lease_was_taken_over_cannot_write(tmp_path):
    path = tmp_path / "state.db"
    with Store(path) as old, Store(path) as new:
        sid = old.create_session("taken over").id
        old.flush(sid, [Message("user", "before")])
        # As if the old writer had been killed: its pid is gone.
        old.conn.execute("UPDATE session_leases SET pid = ? WHERE session_id = ?", (dead_pid(), sid))
        new.acquire_lease(sid)
        new.flush(sid, [Message("user", "after the takeover")])

        with pytest.raises(SessionBusy) as lost:
            old.flush(sid, [Message("user", "from the old writer")])
        assert f"(pid {os.getpid()}," in str(lost.value) and "nothing more is saved" in str(lost.value)
        assert [m.content for m in new.load_active(sid)] == ["before", "after the takeover"]
        assert [p for _, p, _ in rows(new, sid)] == [0, 1]


def holder(**changes) -> lease.Holder:
    return lease.Holder(**{**lease.me().__dict__, **changes})


def test_who_is_still_alive():
    now = time.time()
    assert lease.is_alive(holder())
    assert not lease.is_alive(holder(pid=dead_pid()))
    assert not lease.is_alive(holder(started="1"))  # our pid, another start time: the pid was reused
    assert not lease.is_alive(holder(boot_id="another-boot"))  # this host rebooted since
    # Another machine cannot be asked: its heartbeat decides, with a generous timeout.
    assert lease.is_alive(holder(host="elsewhere", pid=dead_pid(), heartbeat=now - 60), now)
    assert not lease.is_alive(holder(host="elsewhere", heartbeat=now - lease.OTHER_HOST_STALE_S - 1), now)
    # The parent of this process is alive, started earlier, and is not us.
    parent = holder(pid=os.getppid(), started=lease.process_started(os.getppid()))
    assert parent.started and parent.started != lease.me().started and lease.is_alive(parent)


def test_without_proc_the_start_time_comes_from_ps(monkeypatch):
    real_isdir = os.path.isdir
    monkeypatch.setattr(lease.os.path, "isdir", lambda p: False if p == "/proc/self" else real_isdir(p))
    started = lease.process_started(os.getpid())
    assert started and started == lease.process_started(os.getpid())
    assert lease.process_started(dead_pid()) is None


def test_a_write_reads_the_lease_and_refreshes_it_only_when_it_is_old(tmp_path):
    with Store(tmp_path / "state.db") as store:
        sid = store.create_session("cheap").id
        beat = lease.read(store.conn, sid)[1].heartbeat
        for n in range(5):
            store.flush(sid, [Message("user", f"message {n}")])
        assert lease.read(store.conn, sid)[1].heartbeat == beat  # no lease write per flush
        store.conn.execute("UPDATE session_leases SET heartbeat = heartbeat - ?", (lease.HEARTBEAT_EVERY_S,))
        store.flush(sid, [Message("user", "a minute later")])
        assert lease.read(store.conn, sid)[1].heartbeat > beat


def test_close_gives_up_every_lease_the_store_holds(tmp_path):
    path = tmp_path / "state.db"
    with Store(path) as store:
        a, b = store.create_session("a").id, store.create_session("b").id
        store.acquire_lease(a)  # held twice here: one release leaves it held
        store.release_lease(a)
        assert lease.read(store.conn, a) is not None
    with Store(path) as store:
        assert lease.read(store.conn, a) is None and lease.read(store.conn, b) is None


# --- the app ------------------------------------------------------------------------------------

REPLY = 4            # tokens per reply: the tiny model never stops by itself
SIZE = (100, 30)
WAIT = 90.0          # seconds: only bounds a hang on a slow machine

# The app in its own process, headless (``App.run_test``) on a stored session: it sends one
# message, prints "ready" once the reply and its pass are stored, and holds the session
# until its stdin closes (or it is killed).
APP_HOLDER = r'''
import asyncio, sys, time
from hermes_tui.util import paths
from hermes_tui.config import Config
from hermes_tui.store import Store
from hermes_tui.tui.app import HermesApp
from hermes_tui.tui.widgets.composer import Composer

model, session_id, text = sys.argv[1:4]
config = Config().with_overrides({"model.provider": "mlx", "model.model": model, "model.context_length": 1024,
                                  "auxiliary.compression.provider": "extractive"})

async def main():
    with Store(paths.state_db_path()) as store:
        app = HermesApp(config, store, session_id=session_id, reply_tokens=4)
        async with app.run_test(size=(100, 30)) as pilot:
            await pilot.pause()
            screen = app.screen
            assert screen.session.info.id == session_id, "not resumed"
            stored = len(store.load_active(session_id))
            composer = screen.query_one(Composer)
            composer.focus()
            composer.insert(text)
            await pilot.press("enter")
            deadline = time.monotonic() + 90
            while screen.busy or len(store.load_active(session_id)) < stored + 2:
                assert time.monotonic() < deadline, "the reply was not stored in time"
                await pilot.pause(0.05)
            print("ready", flush=True)
            await asyncio.to_thread(sys.stdin.readline)

asyncio.run(main())
'''


def app_config(tiny_model):
    from hermes_tui.config import Config

    return Config().with_overrides({
        "model.provider": "mlx", "model.model": str(tiny_model.fp32), "model.context_length": 1024,
        "auxiliary.compression.provider": "extractive",
    })


def stored_session(db: Path, *texts: str) -> str:
    """A stored session with one user message and reply per text, not held by anyone."""
    with Store(db) as store:
        sid = store.create_session("shared").id
        for text in texts:
            store.flush(sid, [Message("user", text), Message("assistant", f"About {text}.")])
    return sid


async def until(pilot, condition, what: str, timeout: float = WAIT) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        await pilot.pause(0.05)


async def send(pilot, text: str) -> None:
    from hermes_tui.tui.widgets.composer import Composer

    await until(pilot, lambda: pilot.app.screen.query(Composer), "the composer")
    composer = pilot.app.screen.query_one(Composer)
    composer.focus()
    composer.insert(text)
    await pilot.press("enter")


def user_texts(db: Path, session_id: str) -> list[str]:
    with Store(db) as store:
        return [m.content for m, _ in store.load_all(session_id) if m.role == "user"]


def user_texts_or_none(db: Path, session_id: str) -> list[str] | None:
    with Store(db) as store:
        return None if session_id not in {s.id for s in store.list_sessions()} else user_texts(db, session_id)


def notified(app, text: str) -> bool:
    return any(text in n.message for n in app._notifications)


def test_the_app_holds_its_session_against_cli_commands_and_a_second_app(tiny_model, hf_offline_env, db, tmp_path):
    import asyncio

    from hermes_tui.tui.app import HermesApp

    config = app_config(tiny_model)
    sid = stored_session(db, "first question")
    transcript = tmp_path / "same.json"
    transcript.write_text(json.dumps([  # the stored session and one more turn: a resume would append it
        {"role": "user", "content": "first question"}, {"role": "assistant", "content": "About first question."},
        {"role": "user", "content": "a question from the CLI"}, {"role": "assistant", "content": "An answer."},
    ]))

    async def scenario() -> None:
        with Store(db) as store:
            app = HermesApp(config, store, session_id=sid, reply_tokens=REPLY)
            async with app.run_test(size=SIZE) as pilot:
                await pilot.pause()
                screen = app.screen
                assert screen.session.info.id == sid
                before = user_texts(db, sid)
                for args in (compact_args(transcript, "--resume", sid), [*CLI, "sessions", "rm", sid],
                             [*CLI, "--resume", sid]):
                    refused = await asyncio.to_thread(run, args)
                    assert refused.returncode == 2, (args, refused.stderr)
                    assert_one_line_busy(refused.stderr, os.getpid())
                assert "nothing was deleted" in (await asyncio.to_thread(run, [*CLI, "sessions", "rm", sid])).stderr
                assert user_texts(db, sid) == before

                # The app's own next message is stored as usual: nothing was deleted under it.
                await send(pilot, "second question")
                await until(pilot, lambda: not screen.busy and len(store.load_active(sid)) >= 4, "the reply")
                assert not notified(app, "unreadable")

                # Switching to a new session frees this one for other processes at once.
                await pilot.press("ctrl+n")
                await until(pilot, lambda: app.screen is not screen, "the new session")
                removed = await asyncio.to_thread(run, [*CLI, "sessions", "rm", sid])
                assert removed.returncode == 0, removed.stderr
                assert lease.read(store.conn, app.screen.session.info.id) is not None  # the new one is held

    asyncio.run(scenario())
    assert user_texts_or_none(db, sid) is None


def test_two_apps_one_session_then_the_first_is_killed(tiny_model, hf_offline_env, db, tmp_path):
    import asyncio

    from hermes_tui.tui.app import HermesApp
    from hermes_tui.tui.screens.chat import ChatScreen

    config = app_config(tiny_model)
    sid = stored_session(db, "first question")
    first = subprocess.Popen([sys.executable, "-c", APP_HOLDER, str(tiny_model.fp32), sid, "from the first app"],
                             env=cli_env(), stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                             text=True)
    try:
        line = first.stdout.readline()  # bounded by the holder's own 90 s deadline
        assert line.strip() == "ready", first.stderr.read() if first.poll() is not None else line
        held = user_texts(db, sid)
        assert held == ["first question", "from the first app"]

        async def scenario() -> None:
            with Store(db) as store:
                app = HermesApp(config, store, session_id=sid, reply_tokens=REPLY)
                async with app.run_test(size=SIZE) as pilot:
                    await pilot.pause()
                    # The second app says the session is open elsewhere and starts a new one.
                    assert isinstance(app.screen, ChatScreen) and app.screen.session.info.id != sid
                    assert notified(app, f"session {sid} is open in another hermes-tui (pid {first.pid}, since ")
                    app.resume(sid)  # as from the sessions screen: refused, with the same clear line
                    await pilot.pause()
                    assert app.screen.session.info.id != sid
                    assert notified(app, f"Session {sid} is open in another hermes-tui (pid {first.pid}, since ")
                    assert not notified(app, "unreadable")
                    with pytest.raises(SessionBusy):
                        store.delete_session(sid)
                    assert user_texts(db, sid) == held

                    # The first app is killed: its lease is left behind, and taken over here.
                    first.kill()
                    first.wait(timeout=WAIT)
                    app.resume(sid)
                    await until(pilot, lambda: app.screen.session.info.id == sid, "the resumed session")
                    screen = app.screen
                    await send(pilot, "from the second app")
                    await until(pilot, lambda: not screen.busy and len(user_texts(db, sid)) == 3, "the reply")

        asyncio.run(scenario())
    finally:
        if first.poll() is None:
            first.kill()
            first.wait()
        for stream in (first.stdin, first.stdout, first.stderr):
            stream.close()
    assert user_texts(db, sid) == ["first question", "from the first app", "from the second app"]
    with Store(db) as store:
        positions = [p for _, p, _ in rows(store, sid)]
        assert positions == sorted(positions) and len(set(positions)) == len(positions) - sum(
            m.is_marker for m, _ in store.load_all(sid))


def test_the_sessions_screen_does_not_delete_a_session_another_writer_holds(tmp_path):
    import asyncio

    from textual.app import App
    from textual.widgets import DataTable

    from hermes_tui.tui.screens.sessions import SessionsScreen

    path = tmp_path / "state.db"

    class ScreenApp(App):
        def on_mount(self) -> None:
            self.push_screen(SessionsScreen(here))

    async def scenario() -> None:
        async with ScreenApp().run_test(size=(80, 24)) as pilot:
            table = pilot.app.screen.query_one("#sessions", DataTable)
            table.focus()
            table.move_cursor(row=table.get_row_index(sid))
            await pilot.pause()
            await pilot.press("d")
            await pilot.pause()
            await pilot.click("#confirm")
            await pilot.pause()
            assert notified(pilot.app, f"session {sid} is open in another hermes-tui (pid {os.getpid()}, since ")
            assert notified(pilot.app, "nothing was deleted")

    with Store(path) as writer, Store(path) as here:
        sid = writer.create_session("held elsewhere").id
        writer.flush(sid, [Message("user", "still being written")])
        asyncio.run(scenario())
        assert [m.content for m in here.load_active(sid)] == ["still being written"]
