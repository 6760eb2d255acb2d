"""The session's system prompt in the store (``Store.set_system_prompt``), on real SQLite files:
inserted ahead of every row, replaced by archiving the old row, in one transaction under the lease."""

from __future__ import annotations

import pytest
from helpers import user

from hermes_tui.core.transcript import SYSTEM_PROMPT, Message
from hermes_tui.store import Store, StoreError
from hermes_tui.store.lease import SessionBusy


def prompt(text: str) -> Message:
    return Message(role="system", content=text, meta={SYSTEM_PROMPT: True})


def test_a_prompt_for_an_empty_session_is_its_first_row_and_later_rows_follow(tmp_path):
    with Store(tmp_path / "state.db") as store:
        info = store.create_session("t")
        first = prompt("rules")
        store.set_system_prompt(info.id, first)
        store.flush(info.id, [user("hello"), user("again")])
        assert [m.content for m in store.load_active(info.id)] == ["rules", "hello", "again"]
        assert first.stored


def test_a_session_without_one_gets_it_ahead_of_every_row_foreign_system_message_included(tmp_path):
    foreign = Message(role="system", content="You are Hermes.")
    with Store(tmp_path / "state.db") as store:
        info = store.create_session("imported", messages=[foreign, user("hi")], archived=[user("older")])
        store.set_system_prompt(info.id, prompt("ours"))
        store.flush(info.id, [user("next")])
    with Store(tmp_path / "state.db") as store:
        active = store.load_active(info.id)
        assert [m.content for m in active] == ["ours", "You are Hermes.", "hi", "next"]
        assert active[0].is_system_prompt and not active[1].is_system_prompt
        # Ahead of the import's own archived history too: the whole record starts with it.
        assert [m.content for m, _ in store.load_all(info.id)][:2] == ["ours", "older"]


def test_a_replaced_prompt_is_archived_and_a_reopened_store_loads_the_new_one(tmp_path):
    with Store(tmp_path / "state.db") as store:
        info = store.create_session("t")
        old = prompt("mode: ask")
        store.set_system_prompt(info.id, old)
        store.flush(info.id, [user("hello")])
        new = prompt("mode: full")
        store.set_system_prompt(info.id, new, replacing=old)
    with Store(tmp_path / "state.db") as store:
        assert [m.content for m in store.load_active(info.id)] == ["mode: full", "hello"]
        rows = [(m.content, state) for m, state in store.load_all(info.id)]
        assert rows == [("mode: ask", "archived"), ("mode: full", "active"), ("hello", "active")]
        archived_by = store.conn.execute("SELECT archived_by FROM messages WHERE id = ?", (old.id,)).fetchone()[0]
        assert archived_by == new.id
        # The app's prompts are not messages anyone added: the count stays the chat's.
        assert store.get_session(info.id).message_count == 1


def test_it_needs_the_lease_and_writes_nothing_without_it(tmp_path):
    with Store(tmp_path / "state.db") as store:
        info = store.create_session("t")
        store.flush(info.id, [user("hello")])
        store.release_lease(info.id)
        with pytest.raises(StoreError):
            store.set_system_prompt(info.id, prompt("rules"))
        assert [m.content for m in store.load_active(info.id)] == ["hello"]


def test_a_session_taken_over_elsewhere_refuses_it(tmp_path):
    with Store(tmp_path / "state.db") as mine, Store(tmp_path / "state.db") as theirs:
        info = mine.create_session("t")
        mine.flush(info.id, [user("hello")])
        # Another live process took it over (the lease lapsed here): our write must not land.
        mine._leases[info.id].token = "not-the-current-token"
        with pytest.raises(SessionBusy):
            mine.set_system_prompt(info.id, prompt("rules"))
        assert [m.content for m in theirs.load_active(info.id)] == ["hello"]


def test_a_failed_replacement_leaves_the_old_prompt_active(tmp_path):
    with Store(tmp_path / "state.db") as store:
        info = store.create_session("t")
        old = prompt("v1")
        store.set_system_prompt(info.id, old)
        clash = prompt("v2")
        clash.id = old.id  # the insert fails on the primary key after the archive ran: one transaction
        with pytest.raises(StoreError):
            store.set_system_prompt(info.id, clash, replacing=old)
        assert [(m.content, s) for m, s in store.load_all(info.id)] == [("v1", "active")]
