"""Closing a store that worker threads still use: it waits for the write in progress, then refuses.

A reply or a tool result can land on its worker thread while the app closes the store on
quit. The write either lands whole before the close or is refused with a ``StoreError``;
the connection is never used after it is closed, and the file stays intact.
"""

from __future__ import annotations

import sqlite3
import threading
import time

import pytest

from hermes_tui.core.transcript import Message
from hermes_tui.store import Store, StoreError


def test_a_write_after_close_raises_a_store_error_and_changes_nothing(tmp_path):
    store = Store(tmp_path / "state.db")
    session = store.create_session("s")
    store.flush(session.id, [Message(role="user", content="kept")])
    store.close()
    late = Message(role="assistant", content="too late")
    with pytest.raises(StoreError, match="closed"):
        store.flush(session.id, [late])
    with pytest.raises(StoreError, match="closed"):
        store.load_active(session.id)
    assert not late.stored
    with Store(tmp_path / "state.db") as reopened:
        assert [m.content for m in reopened.load_active(session.id)] == ["kept"]


def test_close_waits_for_the_transaction_in_progress_on_another_thread(tmp_path):
    store = Store(tmp_path / "state.db")
    session = store.create_session("s")
    inside, release = threading.Event(), threading.Event()
    errors: list[BaseException] = []

    def write() -> None:
        try:
            with store._transaction():
                store._check_writer(session.id)
                store._append(session.id, [Message(role="user", content="in flight")])
                inside.set()
                release.wait(30)
        except BaseException as exc:  # noqa: BLE001 - reported by the test
            errors.append(exc)

    writer = threading.Thread(target=write)
    writer.start()
    assert inside.wait(30)
    closer = threading.Thread(target=store.close)
    closer.start()
    time.sleep(0.3)
    assert closer.is_alive()  # the close waits: the connection is in use
    release.set()
    writer.join(30)
    closer.join(30)
    assert not errors and not closer.is_alive()
    with sqlite3.connect(tmp_path / "state.db") as conn:
        assert conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    with Store(tmp_path / "state.db") as reopened:
        assert [m.content for m in reopened.load_active(session.id)] == ["in flight"]


def test_writers_racing_a_close_either_land_whole_or_are_refused(tmp_path):
    store = Store(tmp_path / "state.db")
    session = store.create_session("s")
    outcomes: list[str] = []
    start = threading.Barrier(5)

    def write(n: int) -> None:
        start.wait(30)
        for i in range(200):
            try:
                store.flush(session.id, [Message(role="user", content=f"{n}-{i}")])
            except StoreError:
                outcomes.append("refused")
                return
        outcomes.append("done")

    writers = [threading.Thread(target=write, args=(n,)) for n in range(4)]
    for thread in writers:
        thread.start()
    start.wait(30)
    time.sleep(0.05)
    store.close()
    for thread in writers:
        thread.join(60)
    assert len(outcomes) == 4
    with sqlite3.connect(tmp_path / "state.db") as conn:
        assert conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
