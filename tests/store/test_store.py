"""The session store on real SQLite files: schema, migrations, append-only flush, one-transaction
passes, resume, search, export, and what happens with bad files, locks and full disks.

Every test opens a real ``state.db`` in a temp dir; nothing is mocked but the odd crash
point (to make a transaction fail half-way) and the busy timeout (to keep lock tests fast).
"""

from __future__ import annotations

import hashlib
import json
import os
import sqlite3
import stat
import subprocess
import sys
import time
from pathlib import Path

import pytest
from helpers import (
    ScriptedSummarizer,
    agent_session,
    assert_tools_paired,
    exchange,
    make_compactor,
    user,
    user_texts,
    words,
)

from hermes_tui.cli import root as cli
from hermes_tui.compaction.state import MicroState, recover_state
from hermes_tui.compaction.summarizer import SummarizerError
from hermes_tui.compaction.window import head_end
from hermes_tui.core.transcript import Message
from hermes_tui.store import Store, StoreError, ownership
from hermes_tui.store import db as store_db
from hermes_tui.store import store as store_module
from hermes_tui.store.export import session_messages, to_json, to_markdown
from hermes_tui.store.ownership import APPLICATION_ID
from hermes_tui.store.schema import MIGRATIONS, SCHEMA_VERSION, migrate, user_version

# --- helpers ---------------------------------------------------------------------------


def digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def table(store: Store) -> list[tuple]:
    """Every message row (what a pass may change), in storage order."""
    return store.conn.execute(
        "SELECT id, session_id, position, role, content, kind, state, archived_by, meta FROM messages ORDER BY rowid"
    ).fetchall()


def ids(messages) -> list[str]:
    return [m.id for m in messages]


def markers(messages) -> list[Message]:
    return [m for m in messages if m.is_marker]


def one_line_naming(exc: BaseException, path: Path) -> str:
    text = str(exc)
    assert "\n" not in text, text
    assert str(path) in text, text
    return text


class Session:
    """A store, one session in it, and a compactor whose passes persist into it."""

    def __init__(self, path: Path, summarizer=None, **compactor_options):
        self.store = Store(path)
        self.id = self.store.create_session("test session").id
        self.compactor, self.conv = make_compactor(summarizer, **compactor_options)

    def persist(self, result) -> None:
        self.store.archive_and_compact(self.id, result)

    def add(self, messages) -> None:
        """A turn arrives: append it and flush it, as the session loop does."""
        self.conv.extend(messages)
        self.store.flush(self.id, self.conv.messages)

    def micro(self):
        return self.compactor.micro_pass(self.conv, self.persist)

    def finalize(self):
        return self.compactor.finalize_turn(self.conv, self.persist)


@pytest.fixture
def db_path(tmp_path) -> Path:
    return tmp_path / "state.db"


# --- schema and pragmas ----------------------------------------------------------------------


def test_new_database_is_wal_private_and_at_the_current_version(tmp_path):
    path = tmp_path / "fresh" / "nested" / "state.db"
    with Store(path) as store:
        conn = store.conn
        assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
        assert conn.execute("PRAGMA busy_timeout").fetchone()[0] == store_db.BUSY_TIMEOUT_MS
        assert conn.execute("PRAGMA foreign_keys").fetchone()[0] == 1
        assert user_version(conn) == SCHEMA_VERSION == len(MIGRATIONS)
        assert mode(path) == 0o600
        assert mode(path.parent) == 0o700
        session = store.create_session("s")
        store.flush(session.id, [user("hello")])
        # The WAL and shared-memory files hold conversation data too: same mode as the db.
        for suffix in ("-wal", "-shm"):
            side = path.with_name(path.name + suffix)
            assert side.exists(), suffix
            assert mode(side) == 0o600, (suffix, oct(mode(side)))
        assert conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"


def test_a_database_of_ours_left_readable_by_others_is_made_private(tmp_path):
    """An older version (or a umask) left state.db and its journal 0644 in a 0755 home: the
    full-text index holds tool output, secrets included."""
    home = tmp_path / "home"
    home.mkdir(mode=0o755)
    path = home / "state.db"
    with Store(path) as store:
        store.flush(store.create_session("s").id, [user("hello")])
        files = [path, *(path.with_name(path.name + s) for s in ("-wal", "-shm"))]
        for file in files:
            os.chmod(file, 0o644)
    os.chmod(path, 0o644)
    with Store(path):
        assert [oct(mode(f)) for f in files if f.exists()] == [oct(0o600)] * sum(f.exists() for f in files)
    assert mode(home) == 0o755  # a folder the user made keeps its mode


def test_hermes_home_state_db_is_created_private(hermes_home, capsys):
    assert cli.main(["sessions", "list"]) == 0
    assert "no sessions yet" in capsys.readouterr().out
    assert mode(hermes_home / "state.db") == 0o600


def test_reopening_keeps_the_data_and_the_version(db_path):
    with Store(db_path) as store:
        sid = store.create_session("kept").id
        store.flush(sid, [user("one"), user("two")])
    with Store(db_path) as store:
        assert user_version(store.conn) == SCHEMA_VERSION
        assert [m.content for m in store.load_active(sid)] == ["one", "two"]


# --- migrations ------------------------------------------------------------------------------


def _insert_v1_rows(conn: sqlite3.Connection) -> None:
    conn.execute(
        "INSERT INTO sessions (id, title, created, updated) VALUES ('old1', 'an old session', 1.0, 2.0)"
    )
    rows = [
        ("m1", 0, "user", "Please look at the zebra crossing module", None, None, None, "active"),
        ("m2", 1, "assistant", "Searching.",
         json.dumps([{"id": "c1", "type": "function", "function": {"name": "grep_files", "arguments": "{}"}}]),
         None, None, "archived"),
        ("m3", 2, "tool", "found the quagga in crossing.py", None, "c1", "grep_files", "archived"),
        ("m4", 2, "assistant", "[summary] read crossing.py", None, None, None, "active"),
    ]
    for mid, pos, role, content, calls, call_id, name, state in rows:
        conn.execute(
            """INSERT INTO messages (id, session_id, position, role, content, tool_calls, tool_call_id, name,
                                     kind, state, meta, created)
               VALUES (?, 'old1', ?, ?, ?, ?, ?, ?, ?, ?, ?, 3.0)""",
            (mid, pos, role, content, calls, call_id, name,
             "marker" if mid == "m4" else "message", state,
             json.dumps({"compaction": "micro", "summary": "read crossing.py"}) if mid == "m4" else "{}"),
        )


def test_migration_from_version_1_keeps_old_rows_and_makes_them_searchable(db_path):
    conn = sqlite3.connect(db_path, isolation_level=None)
    assert migrate(conn, target=1) == 0
    assert user_version(conn) == 1
    _insert_v1_rows(conn)
    conn.close()

    with Store(db_path) as store:
        assert user_version(store.conn) == SCHEMA_VERSION
        assert store.conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
        # Old rows are searchable: active and archived, by content and by tool name.
        hits = {h.message_id: h for h in store.search("zebra")}
        assert set(hits) == {"m1"} and hits["m1"].state == "active" and hits["m1"].title == "an old session"
        hits = {h.message_id: h for h in store.search("quagga")}
        assert set(hits) == {"m3"} and hits["m3"].state == "archived"
        assert {h.message_id for h in store.search("grep_files")} == {"m2", "m3"}
        # The old session loads as before, and new rows are indexed by the new triggers.
        assert [m.id for m in store.load_active("old1")] == ["m1", "m4"]
        assert [m.id for m, _ in store.load_all("old1")] == ["m1", "m2", "m3", "m4"]
        store.acquire_lease("old1")  # a session from before leases: its writer takes one like any other
        store.flush("old1", [user("and the okapi too")])
        assert [m.id for m in store.load_active("old1")][:2] == ["m1", "m4"]
        assert [h.role for h in store.search("okapi")] == ["user"]
        info = store.get_session("old1")
        assert info.message_count == 4  # markers excluded
        store.conn.execute("INSERT INTO messages_fts (messages_fts) VALUES ('integrity-check')")


@pytest.mark.parametrize("start", range(SCHEMA_VERSION))
def test_each_migration_applies_on_top_of_the_previous_version(tmp_path, start):
    path = tmp_path / f"v{start}.db"
    conn = sqlite3.connect(path, isolation_level=None)
    migrate(conn, target=start)
    assert user_version(conn) == start
    conn.close()
    with Store(path) as store:
        assert user_version(store.conn) == SCHEMA_VERSION
        sid = store.create_session("after migration").id
        store.flush(sid, [user("a message about pangolins")])
        assert [h.session_id for h in store.search("pangolins")] == [sid]
        assert store.conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"


def test_a_failing_migration_leaves_the_previous_version(db_path, monkeypatch):
    conn = sqlite3.connect(db_path, isolation_level=None)
    migrate(conn, target=1)
    monkeypatch.setattr("hermes_tui.store.schema.MIGRATIONS", [MIGRATIONS[0], MIGRATIONS[1] + "\nSELECT nonsense(;"])
    with pytest.raises(sqlite3.DatabaseError):
        migrate(conn, target=2)
    assert user_version(conn) == 1
    assert "tool_names" not in [r[1] for r in conn.execute("PRAGMA table_info(messages)")]
    conn.close()


def test_a_database_from_a_newer_hermes_is_refused_untouched(db_path):
    with Store(db_path) as store:
        store.conn.execute(f"PRAGMA user_version = {SCHEMA_VERSION + 5}")
    before = digest(db_path)
    with pytest.raises(StoreError) as caught:
        Store(db_path)
    text = one_line_naming(caught.value, db_path)
    assert f"schema version {SCHEMA_VERSION + 5}" in text and "upgrade hermes-tui" in text
    assert digest(db_path) == before


# --- whose database it is ------------------------------------------------------------------------


def hermes_agent_db(path: Path, *, journal: str = "DELETE") -> None:
    """A state.db shaped like Hermes Agent's: sessions and messages tables of its own."""
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute(f"PRAGMA journal_mode = {journal}")
    conn.executescript("""
        CREATE TABLE schema_version (version INTEGER NOT NULL);
        INSERT INTO schema_version VALUES (4);
        CREATE TABLE sessions (id TEXT PRIMARY KEY, source TEXT NOT NULL, model TEXT, started_at REAL NOT NULL,
                               ended_at REAL, message_count INTEGER DEFAULT 0);
        CREATE TABLE messages (id INTEGER PRIMARY KEY AUTOINCREMENT, session_id TEXT NOT NULL REFERENCES sessions(id),
                               role TEXT NOT NULL, content TEXT, tool_calls TEXT, tool_name TEXT,
                               timestamp REAL NOT NULL);
        INSERT INTO sessions (id, source, model, started_at) VALUES ('20250101_abc', 'cli', 'claude', 1.0);
        INSERT INTO messages (session_id, role, content, timestamp) VALUES ('20250101_abc', 'user', 'hi', 1.0);
    """)
    conn.close()


def foreign_v2_db(path: Path) -> None:
    """Another program's database at user_version 2 (the old code migrated it to 3)."""
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute("PRAGMA journal_mode = DELETE")
    conn.executescript("CREATE TABLE notes (id INTEGER PRIMARY KEY, body TEXT); INSERT INTO notes (body) VALUES ('x');"
                       "PRAGMA user_version = 2;")
    conn.close()


def side_files(path: Path) -> list[str]:
    return sorted(p.name for p in path.parent.iterdir() if p.name.startswith(path.name))


@pytest.mark.parametrize("make", [hermes_agent_db, foreign_v2_db], ids=["hermes-agent", "user-version-2"])
def test_another_programs_database_is_refused_before_a_byte_is_written(db_path, make):
    make(db_path)
    before = digest(db_path)
    with pytest.raises(StoreError) as caught:
        Store(db_path)
    text = one_line_naming(caught.value, db_path)
    assert "not a hermes-tui database" in text and "left untouched" in text and "HERMES_TUI_HOME" in text
    assert caught.value.kind == ownership.FOREIGN  # what the UI words it by, without reading the text
    assert "already exists" not in text
    assert digest(db_path) == before
    assert side_files(db_path) == ["state.db"]  # no -wal, -shm or -journal: not even the journal mode changed
    conn = sqlite3.connect(f"file:{db_path}?mode=ro", uri=True)
    assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "delete"
    conn.close()


@pytest.mark.parametrize("make", [hermes_agent_db, foreign_v2_db], ids=["hermes-agent", "user-version-2"])
def test_another_programs_database_keeps_its_permissions(db_path, make):
    make(db_path)
    os.chmod(db_path, 0o644)
    with pytest.raises(StoreError):
        Store(db_path)
    assert mode(db_path) == 0o644


def test_another_programs_wal_database_is_refused_without_creating_its_wal_files(db_path):
    hermes_agent_db(db_path, journal="WAL")
    assert side_files(db_path) == ["state.db"]  # closed cleanly: SQLite removed its -wal and -shm
    before = digest(db_path)
    with pytest.raises(StoreError) as caught:
        Store(db_path)
    assert "not a hermes-tui database" in one_line_naming(caught.value, db_path)
    assert digest(db_path) == before and side_files(db_path) == ["state.db"]


def test_another_programs_wal_database_in_use_is_refused_with_its_wal_and_shm_unchanged(db_path):
    """The other program has it open (its -wal holds a commit not yet checkpointed)."""
    hermes_agent_db(db_path, journal="WAL")
    live = sqlite3.connect(db_path, isolation_level=None)
    try:
        live.execute("INSERT INTO messages (session_id, role, content, timestamp) VALUES ('x', 'user', 'live', 2.0)")
        files = [db_path.with_name(name) for name in side_files(db_path)]
        assert [f.name for f in files] == ["state.db", "state.db-shm", "state.db-wal"]
        before = [digest(f) for f in files]
        with pytest.raises(StoreError) as caught:
            Store(db_path)
        assert "not a hermes-tui database" in one_line_naming(caught.value, db_path)
        assert [digest(f) for f in files] == before
    finally:
        live.close()


def test_a_database_marked_by_another_program_is_refused_even_with_our_tables(db_path):
    with Store(db_path):
        pass
    conn = sqlite3.connect(db_path, isolation_level=None)
    conn.execute("PRAGMA application_id = 1234")
    conn.execute("PRAGMA journal_mode = DELETE")
    conn.close()
    before = digest(db_path)
    with pytest.raises(StoreError) as caught:
        Store(db_path)
    assert "application_id 0x4d2 is another program's" in one_line_naming(caught.value, db_path)
    assert digest(db_path) == before and side_files(db_path) == ["state.db"]


def test_a_new_database_is_marked_as_ours(db_path):
    with Store(db_path) as store:
        assert store.conn.execute("PRAGMA application_id").fetchone()[0] == APPLICATION_ID


def test_an_empty_file_is_ours_to_initialise(db_path):
    db_path.write_bytes(b"")
    with Store(db_path) as store:
        assert user_version(store.conn) == SCHEMA_VERSION
        assert store.conn.execute("PRAGMA application_id").fetchone()[0] == APPLICATION_ID


@pytest.mark.parametrize("version", range(1, SCHEMA_VERSION + 1))
def test_a_database_made_before_the_mark_is_recognised_by_its_schema_and_marked(tmp_path, version):
    path = tmp_path / f"v{version}.db"
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute("PRAGMA journal_mode = WAL")  # as earlier versions left it
    migrate(conn, target=version)
    conn.execute("INSERT INTO sessions (id, title, created, updated) VALUES ('old1', 'kept', 1.0, 2.0)")
    assert conn.execute("PRAGMA application_id").fetchone()[0] == 0
    conn.close()
    with Store(path) as store:
        assert store.conn.execute("PRAGMA application_id").fetchone()[0] == APPLICATION_ID
        assert user_version(store.conn) == SCHEMA_VERSION
        assert store.get_session("old1").title == "kept"


def test_our_tables_under_a_version_we_never_released_are_not_ours(db_path):
    conn = sqlite3.connect(db_path, isolation_level=None)
    conn.execute("PRAGMA journal_mode = DELETE")
    migrate(conn, target=1)
    conn.execute("PRAGMA user_version = 2")  # version 2 adds messages_fts, which is missing
    conn.close()
    before = digest(db_path)
    with pytest.raises(StoreError) as caught:
        Store(db_path)
    assert "not a hermes-tui database" in one_line_naming(caught.value, db_path)
    assert digest(db_path) == before


RACE_SCRIPT = """
import sys, time
from pathlib import Path
from hermes_tui import cli
ready, go = Path(sys.argv[1]), Path(sys.argv[2])
ready.touch()
while not go.exists():
    time.sleep(0.001)
sys.exit(cli.main(["sessions", "list"]))
"""


def test_processes_opening_a_fresh_home_at_once_all_succeed(tmp_path):
    """Four real processes run `sessions list` on a fresh home at the same instant, 20 times over."""
    env = {**os.environ, "HERMES_HOME": str(tmp_path / "hermes-agent")}
    for run in range(20):
        home, gate = tmp_path / f"home{run}", tmp_path / f"gate{run}"
        gate.mkdir()
        env["HERMES_TUI_HOME"] = str(home)
        procs = [subprocess.Popen([sys.executable, "-c", RACE_SCRIPT, str(gate / f"ready{n}"), str(gate / "go")],
                                  env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
                 for n in range(4)]
        deadline = time.monotonic() + 120
        while len(list(gate.glob("ready*"))) < 4 and time.monotonic() < deadline:
            time.sleep(0.01)
        (gate / "go").touch()  # every process has imported hermes-tui and now opens the store at once
        results = [(p.wait(timeout=120), *p.communicate()) for p in procs]
        failures = [r for r in results if r[0] != 0]
        assert not failures, f"run {run}: {failures}"
        with Store(home / "state.db") as store:
            assert user_version(store.conn) == SCHEMA_VERSION
            assert store.conn.execute("PRAGMA application_id").fetchone()[0] == APPLICATION_ID
            assert store.conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
            assert ownership.tables(store.conn) == ownership.reference_tables(SCHEMA_VERSION)


# --- append-only flush -----------------------------------------------------------------------


def test_flush_writes_only_new_messages_and_stamps_them(db_path):
    store = Store(db_path)
    sid = store.create_session("flush").id
    messages = agent_session(exchanges=3, size=20)
    assert not any(m.stored for m in messages)

    assert store.flush(sid, messages) == len(messages)
    assert all(m.stored for m in messages)
    assert store.count_rows() == len(messages)

    changes = store.conn.total_changes
    assert store.flush(sid, messages) == 0
    assert store.conn.total_changes == changes  # nothing at all was written
    assert store.count_rows() == len(messages)

    more = exchange(30)
    messages += more
    changes = store.conn.total_changes
    rows = table(store)
    assert store.flush(sid, messages) == len(more)
    assert table(store)[: len(rows)] == rows  # earlier rows untouched
    assert store.count_rows() == len(messages)
    assert ids(store.load_active(sid)) == ids(messages)
    # Rows written: the new messages (plus their index entries and the session's timestamp).
    written = store.conn.total_changes - changes
    assert written < 10 * len(more)
    store.close()


def test_flush_roundtrips_every_field(db_path):
    store = Store(db_path)
    sid = store.create_session("fields").id
    call = {"id": "call_x", "type": "function", "function": {"name": "read_file", "arguments": '{"path": "a.py"}'}}
    messages = [
        Message(role="system", content="sys"),
        Message(role="user", content="Zoë's café — ünïcode ✓"),
        Message(role="assistant", content="", tool_calls=[call], meta={"note": 1}),
        Message(role="tool", content="print('x')", tool_call_id="call_x", name="read_file",
                token_count=5, token_counter="estimate"),
    ]
    store.flush(sid, messages)
    loaded = Store(db_path).load_active(sid)
    for a, b in zip(messages, loaded, strict=True):
        assert (a.id, a.role, a.content, a.tool_calls, a.tool_call_id, a.name, a.meta) == (
            b.id, b.role, b.content, b.tool_calls, b.tool_call_id, b.name, b.meta)
        assert b.stored
    assert loaded[3].token_count == 5 and loaded[3].token_counter == "estimate"


# --- archive_and_compact -----------------------------------------------------------------------


def _rows_of_one_pass(path: Path, exchanges: int) -> tuple[int, set, set, int]:
    # A window so large that neither size is under pressure, and a tail of ~800 tokens.
    s = Session(path, ScriptedSummarizer(lambda r: "- did a step."), limit=400_000, target_ratio=0.0025)
    s.add(agent_session(exchanges=exchanges, size=60, users_every=1000))
    for _ in range(3):  # so there is a marker to supersede
        assert s.micro().outcome == "absorbed"
    before = {row[0]: row for row in table(s.store)}
    changes = s.store.conn.total_changes
    report = s.micro()
    assert report.outcome == "absorbed"
    delta = s.store.conn.total_changes - changes
    after = {row[0]: row for row in table(s.store)}
    changed = {mid for mid in before if before[mid] != after[mid]}
    inserted = set(after) - set(before)
    marker = markers(s.conv.messages)[0]
    covered = set(marker.meta["covers"])
    assert changed == covered | {marker.meta["supersedes"]}
    assert inserted == {marker.id}
    s.store.close()
    return delta, changed, inserted, len(covered)


def test_a_pass_writes_rows_for_the_exchange_not_for_the_session(tmp_path):
    small = _rows_of_one_pass(tmp_path / "small.db", exchanges=20)
    large = _rows_of_one_pass(tmp_path / "large.db", exchanges=400)
    small_delta, small_changed, _, small_exchange = small
    large_delta, large_changed, _, large_exchange = large
    assert small_exchange == large_exchange == 2
    # Exactly the exchange and the superseded marker change state; one marker row is new.
    assert len(small_changed) == len(large_changed) == small_exchange + 1
    # Every change SQLite counts (rows, FTS shadow rows, the session timestamp) is the
    # same at 43 and 803 stored messages.
    assert small_delta == large_delta
    assert small_delta < 20


def test_a_pass_archives_what_it_absorbed_and_the_superseded_marker(db_path):
    s = Session(db_path)
    original = agent_session(exchanges=12, size=60, users_every=3)
    s.add(original)
    for _ in range(6):
        s.micro()
    rows = s.store.load_all(s.id)
    active = [m for m, state in rows if state == "active"]
    archived = [m for m, state in rows if state == "archived"]
    assert ids(active) == ids(s.conv.messages)
    assert len(markers(active)) == 1
    assert len(markers(archived)) == 5  # every superseded marker is kept
    # Non-marker rows are the input, once each, in order.
    assert ids(m for m, _ in rows if not m.is_marker) == ids(original)
    # archived_by names the marker that absorbed the row
    by = dict(s.store.conn.execute("SELECT id, archived_by FROM messages WHERE state = 'archived'").fetchall())
    all_markers = {m.id: m for m, _ in rows if m.is_marker}
    for mid, marker_id in by.items():
        marker = all_markers[marker_id]
        assert mid in marker.meta["covers"] or mid == marker.meta.get("supersedes")


def test_a_pass_over_unflushed_messages_waits_until_they_are_stored(db_path):
    s = Session(db_path, limit=4000)
    s.add([Message(role="system", content="sys"), user("first")])
    # A flush failed (disk full, locked): a user message and exchanges are not stored yet.
    s.conv.extend([user("second request"), *exchange(60), *exchange(60), *exchange(60), *exchange(60)])
    before = ids(s.conv.messages)
    # Storing the absorbed rows now would put them before the unflushed user message.
    assert s.micro().outcome == "store_failed"
    assert ids(s.conv.messages) == before
    s.store.flush(s.id, s.conv.messages)
    assert s.micro().outcome == "absorbed"
    assert ids(s.store.load_active(s.id)) == ids(s.conv.messages)


def _raising_at(point: str):
    def crash_point(name: str) -> None:
        if name == point:
            raise RuntimeError(f"injected failure at {name}")

    return crash_point


@pytest.mark.parametrize("point", ["compact.after_archive", "compact.before_commit"])
def test_a_pass_that_fails_inside_the_transaction_is_not_published(db_path, monkeypatch, point):
    s = Session(db_path)
    s.add(agent_session(exchanges=10, size=60))
    s.micro()
    s.micro()
    rows = table(s.store)
    conversation = list(s.conv.messages)
    state = s.compactor.state
    cursor = s.compactor.cursor(s.conv.messages)

    monkeypatch.setattr(store_module, "crash_point", _raising_at(point))
    report = s.micro()
    assert report.outcome == "store_failed"
    assert report.fields["failure"] == "RuntimeError"
    assert s.conv.messages == conversation  # the very same objects, same order
    assert table(s.store) == rows
    assert not s.store.conn.in_transaction
    assert s.compactor.state.evolve(passes_total=state.passes_total) == state
    assert s.compactor.cursor(s.conv.messages) == cursor

    # The next pass, with a working store, absorbs the exchange the failed one tried.
    monkeypatch.undo()
    s.add([user("one more request"), *exchange(40)])
    report = s.micro()
    assert report.outcome == "absorbed" and report.fields["cursor"] == cursor
    assert ids(s.store.load_active(s.id)) == ids(s.conv.messages)


def test_a_pass_refused_by_sqlite_is_not_published_and_positions_stay_right(db_path):
    s = Session(db_path)
    s.add(agent_session(exchanges=10, size=60))
    s.micro()
    s.store.conn.execute(
        """CREATE TRIGGER refuse_markers BEFORE INSERT ON messages WHEN new.kind = 'marker'
           BEGIN SELECT RAISE(ABORT, 'injected: no markers today'); END"""
    )
    rows = table(s.store)
    conversation = list(s.conv.messages)
    report = s.micro()
    assert report.outcome == "store_failed" and report.fields["failure"] == "StoreError"
    assert s.conv.messages == conversation
    assert table(s.store) == rows
    # Appends after a rolled-back pass land at the end, in order.
    s.add([user("after the failure"), *exchange(30)])
    assert ids(s.store.load_active(s.id)) == ids(s.conv.messages)
    s.store.conn.execute("DROP TRIGGER refuse_markers")
    assert s.micro().outcome == "absorbed"
    assert ids(s.store.load_active(s.id)) == ids(s.conv.messages)
    positions = [p for (p,) in s.store.conn.execute(
        "SELECT position FROM messages WHERE kind = 'message' ORDER BY position")]
    assert positions == list(range(len(positions)))


def test_skipped_exchanges_are_flagged_in_the_store(db_path):
    def script(request):
        if "bad exchange" in request.messages[0].content:
            raise SummarizerError("timeout", "scripted timeout")
        return "- did a step."

    s = Session(db_path, ScriptedSummarizer(script), limit=4000)
    bad = exchange(40, text="bad exchange")
    s.add([*agent_session(exchanges=1, size=40)[:-1], *bad, *exchange(40), *exchange(40), *exchange(40),
           *exchange(40), *exchange(40), *exchange(40)])
    outcomes = [s.micro().outcome for _ in range(4)]
    assert outcomes == ["absorbed", "summarize_failed", "summarize_failed", "exchange_skipped"]
    stored = {m.id: m for m in s.store.load_active(s.id)}
    for msg in bad:
        assert stored[msg.id].meta.get("compaction_skipped") is True


# --- resume ------------------------------------------------------------------------------------


def _growing_session(s: Session, turns: int) -> list[Message]:
    added = [Message(role="system", content="You are a coding agent."), user("Fix the bug in app/models.py")]
    s.add(added[:])
    for n in range(turns):
        turn = ([user(f"request {n}: keep going")] if n % 3 == 2 else []) + exchange(80, calls=1 + n % 2)
        added += turn
        s.add(turn)
        s.finalize()
    return added


def _clone(messages: list[Message]) -> list[Message]:
    return [Message(role=m.role, content=m.content, tool_calls=m.tool_calls, tool_call_id=m.tool_call_id,
                    name=m.name, meta=dict(m.meta), id=m.id) for m in messages]


def test_resume_loads_the_live_conversation_and_continues_where_it_stopped(db_path):
    def script(request):
        if request.kind == "defrag":  # long enough not to be rejected as a scrap (checks.defrag_problem)
            return ("- condensed: the agent read the files of the task, ran the steps one after the other,\n"
                    "  and kept fixing the bug in app/models.py as the user asked, request after request.")
        return (request.summary + "\n" if request.summary else "") + f"- step {len(request.messages)}."

    summarizer = ScriptedSummarizer(script)
    s = Session(db_path, summarizer, defrag_threshold=60)
    _growing_session(s, 25)
    assert len(markers(s.conv.messages)) == 1
    s.store.close()

    store = Store(db_path)
    store.acquire_lease(s.id)  # the closed store gave it up
    loaded = store.load_active(s.id)
    assert ids(loaded) == ids(s.conv.messages)
    for a, b in zip(loaded, s.conv.messages, strict=True):
        assert (a.role, a.content, a.tool_calls, a.tool_call_id, a.meta) == (
            b.role, b.content, b.tool_calls, b.tool_call_id, b.meta)
    assert all(m.stored for m in loaded)

    # A fresh compactor rebuilds the same cursor and rolling summary from the newest marker.
    fresh, conv2 = make_compactor(ScriptedSummarizer(summarizer.script), defrag_threshold=60)
    conv2.extend(loaded)
    assert fresh.cursor(conv2.messages) == s.compactor.cursor(s.conv.messages)
    recovered = recover_state(conv2.messages, head_end(conv2.messages, fresh.settings.protect_first_n), MicroState())
    assert recovered.summary == s.compactor.rolling_summary != ""
    assert recovered.passes_total == s.compactor.state.passes_total

    # Both continue with the same turns and make the same passes: nothing is absorbed twice.
    seen = set()
    for _ in range(4):
        turn = exchange(80)
        s.conv.extend(turn)
        live = s.compactor.micro_pass(s.conv)  # the live process, now without its (closed) store
        conv2.extend(_clone(turn))
        store.flush(s.id, conv2.messages)
        archived_before = {m.id for m, state in store.load_all(s.id) if state == "archived"}
        resumed = fresh.micro_pass(conv2, lambda r: store.archive_and_compact(s.id, r))
        seen.add(resumed.outcome)
        assert resumed.outcome == live.outcome
        assert resumed.fields["cursor"] == live.fields["cursor"]
        new_marker, live_marker = markers(conv2.messages)[0], markers(s.conv.messages)[0]
        assert new_marker.meta["covers"] == live_marker.meta["covers"]
        assert new_marker.meta["summary"] == live_marker.meta["summary"]
        if resumed.outcome in ("absorbed", "defrag"):
            assert not archived_before & set(new_marker.meta["covers"])  # nothing absorbed twice
        assert ids(store.load_active(s.id)) == ids(conv2.messages)
        assert [m.content for m in conv2.messages] == [m.content for m in s.conv.messages]
    assert "absorbed" in seen
    store.close()


def test_resume_steps_over_skipped_exchanges(db_path):
    def script(request):
        if any("cursed" in m.content for m in request.messages):
            raise SummarizerError("timeout", "scripted timeout")
        return "- ok."

    s = Session(db_path, ScriptedSummarizer(script), limit=4000)
    s.add([Message(role="system", content="sys"), user("go")])
    cursed = exchange(40, text="cursed step")
    s.add(cursed)
    for _ in range(6):
        s.add(exchange(40))
    for _ in range(3):
        s.micro()
    assert s.compactor.state.failures == 0  # skipped after the third failure
    s.store.close()
    loaded = Store(db_path).load_active(s.id)
    fresh, conv2 = make_compactor(ScriptedSummarizer(script), limit=4000)
    conv2.extend(loaded)
    assert fresh.cursor(conv2.messages) == s.compactor.cursor(s.conv.messages)
    assert fresh.micro_pass(conv2).outcome == "absorbed"  # not another failure on the cursed one


# --- batch compaction through the store ---------------------------------------------------------


def test_batch_compaction_is_one_transaction_and_keeps_users(db_path):
    s = Session(db_path, limit=4000)
    original = agent_session(exchanges=30, size=60, users_every=4)
    s.add(original[:20])
    assert [s.micro().outcome for _ in range(2)] == ["absorbed", "absorbed"]
    s.add(original[20:])
    changes = s.store.conn.total_changes
    report = s.compactor.compress(s.conv, persist=s.persist)
    assert report.outcome == "compressed"
    assert s.store.conn.total_changes > changes
    active = s.store.load_active(s.id)
    assert ids(active) == ids(s.conv.messages)
    assert [m.marker_kind for m in markers(active)] == ["batch"]
    assert user_texts(active) == user_texts(original)
    assert_tools_paired(active)
    everything = s.store.load_all(s.id)
    assert ids(m for m, _ in everything if not m.is_marker) == ids(original)
    # The next micro pass supersedes the batch marker.
    s.add(exchange(60) + exchange(60) + exchange(60))
    assert s.micro().outcome in ("absorbed", "defrag")
    active = s.store.load_active(s.id)
    assert [m.marker_kind for m in markers(active)] == ["micro"]
    assert ids(active) == ids(s.conv.messages)


def test_failed_batch_write_leaves_everything_as_it_was(db_path, monkeypatch):
    s = Session(db_path, limit=4000)
    s.add(agent_session(exchanges=20, size=60))
    rows, conversation = table(s.store), list(s.conv.messages)
    monkeypatch.setattr(store_module, "crash_point", _raising_at("compact.before_commit"))
    assert s.compactor.compress(s.conv, persist=s.persist).outcome == "store_failed"
    assert table(s.store) == rows and s.conv.messages == conversation


# --- sessions: list, rename, search, delete ----------------------------------------------------


def test_sessions_list_get_rename(db_path):
    store = Store(db_path)
    a = store.create_session("first", model="main-m", aux_model="aux-m")
    b = store.create_session("second")
    store.flush(a.id, agent_session(exchanges=2, size=10))
    assert [s.id for s in store.list_sessions()][0] == a.id  # most recently updated first
    info = store.get_session(a.id)
    assert (info.title, info.model, info.aux_model, info.message_count) == ("first", "main-m", "aux-m", 7)
    assert store.get_session(b.id[:8]).id == b.id
    store.rename_session(b.id, "renamed ✓")
    assert store.get_session(b.id).title == "renamed ✓"
    with pytest.raises(StoreError, match="no session 'nope'"):
        store.get_session("nope")
    with pytest.raises(StoreError):
        store.get_session("")
    store.close()


def test_a_session_prefix_is_literal(db_path):
    store = Store(db_path)
    sid = store.create_session("only one").id
    for prefix in ("_", sid[0] + "_"):
        with pytest.raises(StoreError):
            store.get_session(prefix)
    store.close()


def test_search_finds_active_and_archived_and_survives_odd_queries(db_path):
    s = Session(db_path, limit=4000)
    s.add([Message(role="system", content="sys"), user("the flamingo report")])
    s.add([*exchange(60, text="Running foo-bar with the \"x\" flag on the armadillo tables."), *exchange(60)])
    s.add([*exchange(60), *exchange(60), *exchange(60)])
    other = s.store.create_session("other")
    s.store.flush(other.id, [user("another flamingo here")])
    while s.micro().outcome == "absorbed":
        pass
    hits = s.store.search("armadillo")
    assert len(hits) == 1 and hits[0].state == "archived" and hits[0].role == "assistant"
    assert "[armadillo]" in hits[0].snippet
    assert {(h.session_id, h.state) for h in s.store.search("flamingo")} == {(s.id, "active"), (other.id, "active")}
    assert len(s.store.search('foo-bar "x')) == 1
    assert s.store.search("bash")  # tool names are indexed
    for odd in ['"', '""', "AND", "OR NOT", "NEAR(", "*", "col:umn", "a'b", "(((", "-", "^", "\x00x", "✓"]:
        s.store.search(odd)  # never an FTS syntax error
    assert s.store.search("") == [] and s.store.search("   ") == []
    assert len(s.store.search("flamingo", limit=1)) == 1


def test_delete_removes_rows_and_search_entries_of_that_session_only(db_path):
    store = Store(db_path)
    keep = store.create_session("keep")
    gone = store.create_session("gone")
    store.flush(keep.id, [user("shared word walrus"), user("keep me")])
    store.flush(gone.id, [user("shared word walrus"), user("only in the deleted narwhal session")])
    store.delete_session(gone.id)
    assert store.search("narwhal") == []
    assert [h.session_id for h in store.search("walrus")] == [keep.id]
    assert store.conn.execute("SELECT count(*) FROM messages WHERE session_id = ?", (gone.id,)).fetchone()[0] == 0
    fts = store.conn.execute("SELECT count(*) FROM messages_fts WHERE messages_fts MATCH 'narwhal'").fetchone()[0]
    assert fts == 0
    store.conn.execute("INSERT INTO messages_fts (messages_fts) VALUES ('integrity-check')")
    with pytest.raises(StoreError):
        store.get_session(gone.id)
    assert [m.content for m in store.load_active(keep.id)] == ["shared word walrus", "keep me"]
    store.close()


def test_deleting_a_session_row_cascades_to_its_messages_and_index(db_path):
    store = Store(db_path)
    sid = store.create_session("cascade").id
    store.flush(sid, [user("the capybara")])
    store.conn.execute("DELETE FROM sessions WHERE id = ?", (sid,))
    assert store.count_rows() == 0
    assert store.search("capybara") == []
    store.conn.execute("INSERT INTO messages_fts (messages_fts) VALUES ('integrity-check')")
    store.close()


# --- export ------------------------------------------------------------------------------------


def _compacted(db_path: Path) -> tuple[Session, list[Message]]:
    s = Session(db_path)
    original = agent_session(exchanges=10, size=60, users_every=3)
    s.add(original)
    for _ in range(5):
        assert s.micro().outcome == "absorbed"
    return s, original


def test_export_json_active_and_all(db_path):
    s, original = _compacted(db_path)
    active = json.loads(to_json(session_messages(s.store, s.id, include_archived=False)))
    assert [m["content"] for m in active] == [m.content for m in s.conv.messages]
    marker = [m for m in active if "meta" in m]
    assert len(marker) == 1 and marker[0]["meta"]["compaction"] == "micro"
    assert marker[0]["meta"]["summary"] and marker[0]["meta"]["covers"]
    assert all(set(m) <= {"role", "content", "tool_calls", "tool_call_id", "name", "meta"} for m in active)

    everything = json.loads(to_json(session_messages(s.store, s.id, include_archived=True)))
    plain = [m for m in everything if "compaction" not in m.get("meta", {})]
    assert [(m["role"], m["content"], m.get("tool_calls"), m.get("tool_call_id")) for m in plain] == [
        (m.role, m.content, m.tool_calls, m.tool_call_id) for m in original]
    absorbed = set()
    for m in markers([x for x, _ in s.store.load_all(s.id)]):
        absorbed |= set(m.meta["covers"])
    for exported, msg in zip(plain, original, strict=True):
        assert bool(exported.get("meta", {}).get("archived")) == (msg.id in absorbed)
    exported_markers = [m for m in everything if "compaction" in m.get("meta", {})]
    assert len(exported_markers) == 5
    assert [m.get("meta", {}).get("archived", False) for m in exported_markers] == [True] * 4 + [False]


def test_export_markdown(db_path):
    s, original = _compacted(db_path)
    info = s.store.get_session(s.id)
    md = to_markdown(info, session_messages(s.store, s.id, include_archived=True))
    assert md.startswith("# test session\n")
    assert "## Context summary (micro)" in md and "(archived)" in md
    assert "## Tool result (bash) (archived)" in md
    assert "Tool call `bash`" in md
    for text in user_texts(original):
        assert text in md
    active_md = to_markdown(info, session_messages(s.store, s.id, include_archived=False))
    assert "(archived)" not in active_md and active_md.count("## Context summary") == 1


def test_export_markdown_fences_tool_output_containing_fences(db_path):
    store = Store(db_path)
    sid = store.create_session("fences").id
    a = Message(role="assistant", content="", tool_calls=[
        {"id": "c1", "type": "function", "function": {"name": "cat", "arguments": "{}"}}])
    t = Message(role="tool", content="```python\nx = 1\n```", tool_call_id="c1", name="cat")
    store.flush(sid, [a, t])
    md = to_markdown(store.get_session(sid), store.load_active(sid))
    assert "````\n```python\nx = 1\n```\n````" in md


# --- the CLI on the store ------------------------------------------------------------------------


def test_cli_sessions_commands(hermes_home, capsys):
    s, original = _compacted(hermes_home / "state.db")
    other = s.store.create_session("second one")
    s.store.flush(other.id, [user("a lonely message about tapirs")])
    s.store.close()

    assert cli.main(["sessions", "list", "--json"]) == 0
    listing = json.loads(capsys.readouterr().out)
    assert {tuple(sorted(row)) for row in listing} == {("created", "id", "kind", "message_count", "title")}
    rows = {row["id"]: row for row in listing}
    assert {row["kind"] for row in listing} == {"chat"}
    assert rows[s.id]["title"] == "test session" and rows[s.id]["message_count"] == len(original)
    assert rows[other.id]["message_count"] == 1

    assert cli.main(["sessions", "list"]) == 0
    assert "test session" in capsys.readouterr().out

    assert cli.main(["sessions", "export", s.id[:6], "--all"]) == 0
    everything = json.loads(capsys.readouterr().out)
    assert [m["content"] for m in everything if "compaction" not in m.get("meta", {})] == [
        m.content for m in original]
    assert cli.main(["sessions", "export", s.id, "--format", "md"]) == 0
    assert capsys.readouterr().out.startswith("# test session")
    assert cli.main(["sessions", "show", s.id]) == 0
    assert "## Context summary (micro)" in capsys.readouterr().out

    assert cli.main(["sessions", "search", "tapirs"]) == 0
    out = capsys.readouterr().out
    assert other.id in out and "second one" in out and "[tapirs]" in out
    assert cli.main(["sessions", "search", 'foo-bar "x']) == 0
    assert "no matches" in capsys.readouterr().out

    assert cli.main(["sessions", "rm", other.id]) == 0
    assert "deleted session" in capsys.readouterr().out
    assert cli.main(["sessions", "export", other.id]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "no session" in err


def test_cli_compact_stores_the_replay_as_a_session(hermes_home, tmp_path):
    messages = [m.to_openai() for m in agent_session(exchanges=12, size=120, users_every=4)]
    transcript = tmp_path / "my-transcript.json"
    transcript.write_text(json.dumps(messages))
    env = {**os.environ, "HERMES_TUI_HOME": str(hermes_home)}
    command = [sys.executable, "-m", "hermes_tui.cli", "compact", str(transcript),
               "--provider", "extractive", "--context-limit", "4096", "--turns", "step"]
    for extra in ([], ["--session", "Named run"]):
        proc = subprocess.run([*command, *extra], env=env, capture_output=True, text=True, timeout=120)
        assert proc.returncode == 0, proc.stderr
    with Store(hermes_home / "state.db") as store:
        sessions = {s.title: s for s in store.list_sessions()}
        assert len(sessions) == 2 and "Named run" in sessions
        (default_title,) = set(sessions) - {"Named run"}
        assert default_title.startswith("my-transcript.json · replay "), default_title
        assert {s.kind for s in sessions.values()} == {"replay"}
        for info in sessions.values():
            assert info.message_count == len(messages)
            everything = session_messages(store, info.id, include_archived=True)
            assert [m.content for m in everything if not m.is_marker] == [m["content"] for m in messages]
            assert len(markers(store.load_active(info.id))) == 1


# --- bad disks and bad files ----------------------------------------------------------------------


def test_a_file_that_is_not_sqlite_is_refused_and_left_alone(db_path, hermes_home, capsys):
    for path in (db_path, hermes_home / "state.db"):
        path.write_bytes(b"these are not the bytes you are looking for\x00" + os.urandom(5000))
    before = digest(db_path)
    with pytest.raises(StoreError) as caught:
        Store(db_path)
    text = one_line_naming(caught.value, db_path)
    assert "not a readable SQLite database" in text and "move it aside" in text
    assert caught.value.kind == store_db.UNREADABLE
    assert digest(db_path) == before
    assert sorted(p.name for p in db_path.parent.iterdir() if p.name.startswith("state.db")) == ["state.db"]
    # and through the CLI: exit 2, one line, the file untouched
    home_db = hermes_home / "state.db"
    home_before = digest(home_db)
    assert cli.main(["sessions", "list"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and str(home_db) in err and "Traceback" not in err
    assert digest(home_db) == home_before


def _real_db(path: Path) -> str:
    with Store(path) as store:
        sid = store.create_session("doomed").id
        store.flush(sid, [user(words(800, f"m{n}-")) for n in range(40)])
        store.conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    return sid


def test_a_truncated_database_gives_a_clear_error_and_is_left_alone(db_path):
    sid = _real_db(db_path)
    raw = db_path.read_bytes()
    db_path.write_bytes(raw[: len(raw) // 3])
    before = digest(db_path)
    with pytest.raises(StoreError) as caught:
        store = Store(db_path)
        try:
            store.list_sessions()
            store.load_active(sid)
        finally:
            store.close()
    text = one_line_naming(caught.value, db_path)
    assert "not a readable SQLite database" in text and "move it aside" in text
    assert digest(db_path) == before


def test_a_corrupt_page_gives_a_clear_error_and_is_left_alone(db_path):
    _real_db(db_path)
    conn = sqlite3.connect(db_path)
    page_size = conn.execute("PRAGMA page_size").fetchone()[0]
    root = conn.execute("SELECT rootpage FROM sqlite_master WHERE name = 'sessions'").fetchone()[0]
    conn.close()
    raw = bytearray(db_path.read_bytes())
    raw[(root - 1) * page_size: root * page_size] = b"\xff" * page_size
    db_path.write_bytes(bytes(raw))
    before = digest(db_path)
    with pytest.raises(StoreError) as caught:
        store = Store(db_path)
        try:
            store.list_sessions()
        finally:
            store.close()
    text = one_line_naming(caught.value, db_path)
    assert "not a readable SQLite database" in text
    assert digest(db_path) == before


def test_a_corrupt_database_is_not_written_to(db_path):
    sid = _real_db(db_path)
    conn = sqlite3.connect(db_path)
    page_size = conn.execute("PRAGMA page_size").fetchone()[0]
    root = conn.execute("SELECT rootpage FROM sqlite_master WHERE name = 'messages_fts_data'").fetchone()[0]
    conn.close()
    raw = bytearray(db_path.read_bytes())
    raw[(root - 1) * page_size: root * page_size] = b"\xff" * page_size
    db_path.write_bytes(bytes(raw))
    before = digest(db_path)
    try:
        with Store(db_path) as store:
            new = store.create_session("written into a corrupt file").id
            store.flush(new, [user("hello")])
            store.load_active(sid)
    except StoreError as exc:
        assert "not a readable SQLite database" in str(exc), str(exc)
    assert digest(db_path) == before


@pytest.fixture
def short_busy_timeout(monkeypatch):
    monkeypatch.setattr(store_db, "BUSY_TIMEOUT_MS", 150)


def test_a_locked_database_fails_the_write_clearly_and_loses_nothing(db_path, short_busy_timeout):
    s = Session(db_path)
    s.add(agent_session(exchanges=8, size=60))
    rows = table(s.store)
    other = sqlite3.connect(db_path, isolation_level=None, timeout=0)
    other.execute("BEGIN EXCLUSIVE")
    try:
        turn = [user("while locked"), *exchange(40)]
        s.conv.extend(turn)
        with pytest.raises(StoreError) as caught:
            s.store.flush(s.id, s.conv.messages)
        text = one_line_naming(caught.value, db_path)
        assert "locked by another process" in text and "try again" in text
        assert caught.value.kind == store_db.LOCKED
        assert not any(m.stored for m in turn)
        conversation = list(s.conv.messages)
        report = s.micro()
        assert report.outcome == "store_failed"
        assert s.conv.messages == conversation
    finally:
        other.execute("ROLLBACK")
        other.close()
    assert table(s.store) == rows
    assert s.store.flush(s.id, s.conv.messages) == len(turn)  # written once the lock is gone
    assert s.micro().outcome == "absorbed"
    assert ids(s.store.load_active(s.id)) == ids(s.conv.messages)


def test_opening_a_database_another_process_holds_locked(db_path, short_busy_timeout):
    other = sqlite3.connect(db_path, isolation_level=None, timeout=0)
    other.execute("CREATE TABLE placeholder (x)")
    other.execute("BEGIN EXCLUSIVE")
    other.execute("INSERT INTO placeholder VALUES (1)")
    try:
        with pytest.raises(StoreError) as caught:
            Store(db_path)
        assert "locked by another process" in one_line_naming(caught.value, db_path)
        assert caught.value.kind == store_db.LOCKED
    finally:
        other.execute("ROLLBACK")
        other.close()


def _fill_the_disk(store: Store) -> None:
    """No new page can be allocated from now on (SQLITE_FULL), as on a full disk."""
    store.conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    pages = store.conn.execute("PRAGMA page_count").fetchone()[0]
    store.conn.execute(f"PRAGMA max_page_count = {pages}")


def _free_space(store: Store) -> None:
    store.conn.execute("PRAGMA max_page_count = 1073741823")


def test_a_full_disk_fails_the_flush_clearly_and_loses_nothing(db_path):
    s = Session(db_path)
    s.add(agent_session(exchanges=8, size=60))
    _fill_the_disk(s.store)
    rows = table(s.store)

    turn = [user(words(3000, "big")), *exchange(3000)]
    s.conv.extend(turn)
    with pytest.raises(StoreError) as caught:
        s.store.flush(s.id, s.conv.messages)
    text = one_line_naming(caught.value, db_path)
    assert "disk is full" in text and "free some space" in text
    assert not any(m.stored for m in turn)  # so the next flush writes them
    assert not s.store.conn.in_transaction
    assert table(s.store) == rows

    _free_space(s.store)
    assert s.store.flush(s.id, s.conv.messages) == len(turn)
    assert ids(s.store.load_active(s.id)) == ids(s.conv.messages)
    assert s.store.conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"


def test_a_full_disk_during_a_pass_is_store_failed_and_loses_nothing(db_path):
    # A summary of several pages must go to new overflow pages, which a full disk refuses.
    s = Session(db_path, ScriptedSummarizer(lambda r: words(2500, "summary")))
    s.add([Message(role="system", content="sys"), user("go"), *exchange(4000), *exchange(4000), *exchange(60)])
    _fill_the_disk(s.store)
    rows, conversation = table(s.store), list(s.conv.messages)
    report = s.micro()
    assert report.outcome == "store_failed" and report.fields["failure"] == "StoreError"
    assert s.conv.messages == conversation and table(s.store) == rows
    _free_space(s.store)
    assert s.micro().outcome in ("absorbed", "defrag")
    assert ids(s.store.load_active(s.id)) == ids(s.conv.messages)


def test_a_path_under_a_regular_file_cannot_be_created(tmp_path, monkeypatch, capsys):
    blocker = tmp_path / "not-a-dir"
    blocker.write_text("I am a file")
    for path in (blocker / "state.db", blocker / "deeper" / "state.db"):
        with pytest.raises(StoreError) as caught:
            Store(path)
        text = one_line_naming(caught.value, path)
        assert "HERMES_TUI_HOME" in text
    assert blocker.read_text() == "I am a file"
    monkeypatch.setenv("HERMES_TUI_HOME", str(blocker))
    assert cli.main(["sessions", "list"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and str(blocker / "state.db") in err


def test_a_read_only_database_file_fails_writes_clearly(db_path):
    """Open read-only (what a read-only mount gives): writes fail with a clear error."""
    with Store(db_path) as store:
        sid = store.create_session("ro").id
    store = Store(db_path)
    store.conn.execute("PRAGMA query_only = ON")
    with pytest.raises(StoreError) as caught:
        store.flush(sid, [user("x")])
    assert "\n" not in str(caught.value) and str(db_path) in str(caught.value)
    store.close()


def test_an_import_stores_its_history_archived_ahead_of_the_active_rows_in_one_transaction(tmp_path):
    history = [Message(role="user", content="the first try"), Message(role="assistant", content="an old answer")]
    active = [Message(role="system", content="You are a coding agent."), Message(role="user", content="go on")]
    with Store(tmp_path / "state.db") as store:
        info = store.create_session("imported", messages=active, archived=history)
        assert info.message_count == 4 and info.active_count == 2
        assert [(m.content, state) for m, state in store.load_all(info.id)] == [
            ("the first try", "archived"), ("an old answer", "archived"),
            ("You are a coding agent.", "active"), ("go on", "active")]
        assert [m.content for m in store.load_active(info.id)] == ["You are a coding agent.", "go on"]
        assert [h.state for h in store.search("old answer")] == ["archived"]
        store.flush(info.id, [Message(role="assistant", content="next")])  # appends after the import
        assert [m.content for m in store.load_active(info.id)][-1] == "next"
        # a row that cannot go in (an id already stored) takes the whole session with it
        clash = Message(role="user", content="dup", id=active[0].id)
        with pytest.raises(StoreError):
            store.create_session("broken", messages=[Message(role="user", content="x")], archived=[clash])
        assert [s.title for s in store.list_sessions()] == ["imported"]
