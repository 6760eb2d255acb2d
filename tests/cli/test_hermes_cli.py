"""Hermes Agent sessions through the command line: import (read-only on its home), open,
export for Hermes, and replays through ``compact`` that keep its summaries as summaries.

The Hermes home is built where the ``hermes_home`` fixture points HERMES_HOME, the way
Hermes fills it (``support.hermes_home``).
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest
from support.cli import COMPACT, explain, run_cli
from support.hermes_home import (
    A2,
    A3,
    BRANCH_USER,
    MICRO_ROW,
    SYSTEM,
    T2,
    U1,
    U2,
    U3,
    A2b,
    batch_text,
    build_hermes_home,
    expected_active,
    fingerprint,
    micro_text,
    shape,
)

from hermes_tui.compaction import hermes_markers
from hermes_tui.compaction.markers import read_marker
from hermes_tui.config import Config
from hermes_tui.core.transcript import MICRO
from hermes_tui.hermes_agent.sessions import read_transcript_file
from hermes_tui.session.wiring import import_transcript
from hermes_tui.store import Store
from hermes_tui.util import paths


@pytest.fixture
def agent_home(hermes_home, tmp_path) -> Path:
    """Hermes' home, with Hermes still running: its writes in the -wal, the -shm live."""
    home = tmp_path / "hermes_agent_home"
    writer = build_hermes_home(home, "wal")
    yield home
    writer.conn.close()


def stored(hermes_home: Path) -> Store:
    """Our store, as the commands run in ``hermes_home`` wrote it."""
    return Store(paths.state_db_path())


def imported_id(line: str) -> str:
    return line.rsplit(" ", 1)[-1]


def test_import_without_ids_lists_conversations_and_imports_none(hermes_home, agent_home):
    proc = run_cli(hermes_home, "sessions", "import", "--from", "hermes")
    assert proc.returncode == 0, explain(proc)
    lines = proc.stdout.splitlines()
    # one row per conversation: the compressed s1 is listed as its continuation s2
    assert [line.split()[0] for line in lines] == ["s1-branch", "s2"]
    assert lines[1].endswith("3 messages  Pagination fix")
    assert "--all" in proc.stderr
    assert run_cli(hermes_home, "sessions", "list").stdout.strip() == "no sessions yet"


def test_import_of_one_session_stores_the_active_transcript_and_history_and_leaves_hermes_untouched(
    hermes_home, agent_home,
):
    assert {"state.db-wal", "state.db-shm", "config.yaml"} <= {p.name for p in agent_home.iterdir()}
    before = fingerprint(agent_home)
    proc = run_cli(hermes_home, "sessions", "import", "--from", "hermes", "s1")
    assert proc.returncode == 0, explain(proc)
    (line,) = proc.stdout.splitlines()
    assert line.startswith("imported Hermes session s2 (Pagination fix): 4 messages, 1 summary, 9 archived -> session ")
    assert fingerprint(agent_home) == before
    with stored(hermes_home) as store:
        sid = imported_id(line)
        assert store.get_session(sid).title == "Pagination fix"
        assert shape(store.load_active(sid)) == expected_active()
        archived = [m.content for m, state in store.load_all(sid) if state == "archived"]
        assert U2["content"] in archived and A2b["content"] in archived
        assert [h.state for h in store.search("regression test") if h.session_id == sid and h.role == "user"] == ["archived"]


def test_import_all_takes_each_conversation_once(hermes_home, agent_home):
    proc = run_cli(hermes_home, "sessions", "import", "--from", "hermes", "--all")
    assert proc.returncode == 0, explain(proc)
    lines = proc.stdout.splitlines()
    assert [line.split()[3] for line in lines] == ["s1-branch", "s2"]
    with stored(hermes_home) as store:
        branch = store.load_active(imported_id(lines[0]))
        assert [m.content for m in branch] == [SYSTEM["content"], BRANCH_USER["content"]]
    # both ids of one chain name one conversation
    again = run_cli(hermes_home, "sessions", "import", "--from", "hermes", "s1", "s2")
    assert len(again.stdout.splitlines()) == 1, explain(again)


@pytest.mark.parametrize("args, problem", [
    (["--home", "{tmp}/nowhere"], "no Hermes Agent home here"),
    (["--home", "{tmp}/empty", "s1"], "no Hermes database here"),
    (["s1", "zz"], "no Hermes session 'zz'"),
    (["--home", "{tmp}/other", "s1"], "not a Hermes Agent state database"),
    (["--all", "s1"], "not both"),
])
def test_bad_imports_exit_2_in_one_line_and_store_nothing(hermes_home, agent_home, tmp_path, args, problem):
    import sqlite3

    (tmp_path / "empty").mkdir()
    (tmp_path / "other").mkdir()
    sqlite3.connect(tmp_path / "other" / "state.db").executescript("CREATE TABLE notes (id INTEGER);").close()
    before = fingerprint(agent_home)
    proc = run_cli(hermes_home, "sessions", "import", "--from", "hermes", *[a.format(tmp=tmp_path) for a in args])
    assert proc.returncode == 2, explain(proc)
    assert problem in proc.stderr and len(proc.stderr.strip().splitlines()) == 1, explain(proc)
    assert proc.stdout == "" and "Traceback" not in proc.stderr
    assert fingerprint(agent_home) == before
    assert run_cli(hermes_home, "sessions", "list").stdout.strip() == "no sessions yet"


# --- open ------------------------------------------------------------------------------------


def snapshot_file(tmp_path: Path) -> Path:
    snapshot = {"session_id": "20260801_101010_ab12cd", "title": "Snapshot",
                "messages": [SYSTEM, U1, MICRO_ROW, U2, A2, T2, A2b]}
    path = tmp_path / "session_20260801_101010_ab12cd.json"
    path.write_text(json.dumps(snapshot))
    return path


def test_open_takes_a_hermes_snapshot_and_an_export_file_and_a_plain_list_still(hermes_home, tmp_path):
    export = tmp_path / "export.jsonl"
    rows = [{**m, "id": n, "active": 1} for n, m in enumerate([SYSTEM, U1, MICRO_ROW, U2])]
    rows.insert(2, {**A2b, "id": 9, "active": 0, "compacted": 1})
    export.write_text(json.dumps({"id": "s9", "title": "Exported", "messages": rows}) + "\n")
    plain = tmp_path / "plain.jsonl"
    plain.write_text("\n".join(json.dumps(m) for m in [SYSTEM, U1]) + "\n")
    with Store(tmp_path / "ours.db") as store:
        snap = import_transcript(store, Config(), snapshot_file(tmp_path))
        assert snap.title == "Snapshot"
        kinds = [read_marker(m).kind for m in store.load_active(snap.id) if m.is_marker]
        assert kinds == [MICRO]
        exp = import_transcript(store, Config(), export)
        assert exp.title == "Exported" and exp.message_count == 4
        assert [m.content for m, state in store.load_all(exp.id) if state == "archived"] == [A2b["content"]]
        assert [m.content for m in store.load_active(import_transcript(store, Config(), plain).id)] == [
            SYSTEM["content"], U1["content"]]


def test_open_refuses_a_bad_snapshot_in_one_line_before_the_app_starts(hermes_home, tmp_path):
    bad = tmp_path / "session_bad.json"
    bad.write_text(json.dumps({"session_id": "x", "messages": {"role": "user"}}))
    proc = run_cli(hermes_home, "open", str(bad))
    assert proc.returncode == 2, explain(proc)
    assert proc.stderr.strip() == f'hermes-tui: {bad}: "messages" must be a list of messages'


# --- export for Hermes, and replays ------------------------------------------------------------


def compact_stored(hermes_home: Path, path: Path, *extra: str) -> tuple[list, str]:
    proc = run_cli(hermes_home, "compact", str(path), *COMPACT, "--turns", "step", "--protect-first-n", "2", *extra)
    assert proc.returncode == 0, explain(proc)
    session_id = proc.stderr.rsplit("stored as session ", 1)[1].split()[0]
    return proc, session_id


def test_round_trip_import_compact_export_for_hermes_reimport(hermes_home, agent_home, tmp_path):
    imported = imported_id(run_cli(hermes_home, "sessions", "import", "--from", "hermes", "s1").stdout.strip())
    work = [{"role": "user", "content": "Now document the pagination fix."}]
    for n in range(10):
        work += [{"role": "assistant", "content": "", "tool_calls": [
                     {"id": f"w{n}", "type": "function", "function": {"name": "shell", "arguments": json.dumps({"cmd": f"cat docs/page{n}.md"})}}]},
                 {"role": "tool", "tool_call_id": f"w{n}", "content": f"docs page {n}: " + "lorem ipsum " * 60}]
    work.append({"role": "assistant", "content": "Documented it in docs/pagination.md."})
    exported = json.loads(run_cli(hermes_home, "sessions", "export", imported).stdout)
    transcript = tmp_path / "imported.json"
    transcript.write_text(json.dumps(exported + work))
    _, compacted = compact_stored(hermes_home, transcript)

    proc = run_cli(hermes_home, "sessions", "export", compacted, "--format", "hermes")
    assert proc.returncode == 0, explain(proc)
    snapshot = json.loads(proc.stdout)
    carriers = [m for m in snapshot["messages"] if m.get("_compressed_summary")]
    # Hermes reads each as its own summary: its preamble, the summary, its end line
    assert carriers and all(
        m["role"] == "assistant" and m["content"].startswith(hermes_markers.PREAMBLE)
        and m["content"].rstrip().endswith(hermes_markers.END_LINE) for m in carriers)
    hermes_file = tmp_path / "for_hermes.json"
    hermes_file.write_text(proc.stdout)
    back = read_transcript_file(hermes_file)
    with stored(hermes_home) as store:
        ours = store.load_active(compacted)
    assert [m.to_openai() for m in back.messages if not m.is_marker] == [m.to_openai() for m in ours if not m.is_marker]
    assert [(read_marker(m).kind, read_marker(m).summary) for m in back.messages if m.is_marker] == [
        (read_marker(m).kind, read_marker(m).summary) for m in ours if m.is_marker]
    assert back.markers == 1 and sum(m.is_marker for m in ours) == 1


def test_a_snapshot_and_a_hermes_format_transcript_with_both_marker_kinds_replay_without_absorbing_a_marker(
    hermes_home, tmp_path,
):
    tail = []
    for n in range(8):
        tail += [{"role": "assistant", "content": "", "tool_calls": [
                     {"id": f"r{n}", "type": "function", "function": {"name": "shell", "arguments": json.dumps({"cmd": f"pytest -k case{n}"})}}]},
                 {"role": "tool", "tool_call_id": f"r{n}", "content": f"case {n}: " + "passed " * 80}]
    micro = {"role": "assistant", "content": micro_text("- Read app/views.py; fixed ListView.get_queryset."),
             "_compressed_summary": True}
    batch = {"role": "user", "content": batch_text("Added tests/test_views.py for pagination."), "_compressed_summary": True}
    files = {
        "snapshot.json": json.dumps({"session_id": "snap", "messages": [SYSTEM, U1, micro, U2, *tail, A3]}),
        # what `sessions export --format hermes` writes: both kinds, flagged, on assistant messages
        "hermes_format.json": json.dumps({"session_id": "ours", "messages": [
            SYSTEM, U1,
            {"role": "assistant", "content": hermes_markers.render_summary("- Fixed ListView.get_queryset.", micro=True),
             "_compressed_summary": True, "_micro_compact_marker": True},
            U2,
            {"role": "assistant", "content": hermes_markers.render_summary("Added the regression test.", micro=False),
             "_compressed_summary": True, "_micro_compact_marker": False},
            {"role": "user", "content": U3}, *tail, A3]}),
        "batch_snapshot.json": json.dumps({"session_id": "b", "messages": [SYSTEM, batch, U2, *tail, A3]}),
        # a plain message list in Hermes' message format, both kinds: its assistant-role micro marker
        # and its user-role summary that carries the user's next request behind the end line
        "hermes_messages.json": json.dumps([
            SYSTEM, U1, micro, U2, {**batch, "content": f"{batch['content']}\n\n{U3}"}, *tail, A3]),
    }
    for name, text in files.items():
        path = tmp_path / name
        path.write_text(text)
        imported = [m for m in read_transcript_file(path).messages if m.is_marker]
        assert imported, name
        proc, session_id = compact_stored(hermes_home, path)
        with stored(hermes_home) as store:
            rows = store.load_all(session_id)
        markers = [m for m, _ in rows if m.is_marker]
        absorbed = {i for m in markers for i in m.meta.get("covers", [])}
        old = [m for m in markers if m.meta.get("hermes")]  # the markers the file carried
        assert len(old) == len(imported), name
        assert not absorbed & {m.id for m in old}, f"{name}: an old marker was absorbed as an exchange"
        newest = [m for m, state in rows if m.is_marker and state == "active"]
        assert newest and not newest[-1].meta.get("hermes"), f"{name}: no pass ran\n{explain(proc)}"
        # an old marker stays, or a pass superseded it as the rolling summary (and carried its text)
        state_of = {m.id: state for m, state in rows}
        superseded = {m.meta.get("supersedes") for m in markers}
        for m in old:
            assert state_of[m.id] == "active" or m.id in superseded, name
        carried = [m for m in old if m.id in superseded]
        assert carried, name
        assert read_marker(carried[-1]).summary in read_marker(newest[-1]).summary, name
        # Hermes' scaffolding and summaries never stand as something the user typed
        for m, _ in rows:
            if m.role == "user":
                assert "CONTEXT COMPACTION" not in (m.content or "") and "Added tests/test_views.py" not in (m.content or ""), name
        if name == "hermes_messages.json":
            assert [m.meta["hermes"]["role"] for m in old] == ["assistant", "user"]
            assert U3 in [m.content for m, _ in rows if m.role == "user"]  # the user's own text, verbatim


@pytest.mark.parametrize("text", [
    '{"messages": ' + "[" * 100_000 + "]" * 100_000 + "}",         # a snapshot nested past any parser's depth
    '{"id": "s1", "messages": []}\n' + '{"a": ' * 100_000 + "1" + "}" * 100_000,  # an export's second line
])
def test_a_session_file_nested_too_deep_is_refused_in_one_line(hermes_home, tmp_path, text):
    bad = tmp_path / "deep.json"
    bad.write_text(text)
    proc = run_cli(hermes_home, "open", str(bad))
    assert proc.returncode == 2, explain(proc)
    assert proc.stderr.startswith(f"hermes-tui: {bad}") and len(proc.stderr.strip().splitlines()) == 1, explain(proc)


# --- open: one session of an export that holds several ----------------------------------------


def several_sessions_export(tmp_path: Path) -> Path:
    """``hermes sessions export`` of three sessions: one JSON object a line, each session row
    with its messages (hermes_state_portability.py export_all)."""
    def session(sid, title, *messages):
        return {"id": sid, "source": "cli", "title": title,
                "messages": [{**m, "id": n, "session_id": sid, "active": 1} for n, m in enumerate(messages)]}

    path = tmp_path / "export.jsonl"
    path.write_text("\n".join(json.dumps(s) for s in [
        session("s9", "Pagination fix", SYSTEM, U1, MICRO_ROW, U2),
        session("s10", "Pagination docs", SYSTEM, {"role": "user", "content": "Document the pagination."}),
        session("s11", None, SYSTEM, BRANCH_USER),
    ]) + "\n")
    return path


def test_open_of_an_export_with_several_sessions_lists_them_and_says_how_to_pick_one(hermes_home, tmp_path):
    export = several_sessions_export(tmp_path)
    proc = run_cli(hermes_home, "open", str(export))
    assert proc.returncode == 2, explain(proc)
    assert [line.split()[0] for line in proc.stdout.splitlines()] == ["s9", "s10", "s11"]
    assert proc.stdout.splitlines()[0].endswith("4 messages  Pagination fix")
    assert proc.stdout.splitlines()[2].endswith("2 messages  (untitled)")
    (err,) = proc.stderr.strip().splitlines()
    assert err == (f"hermes-tui: {export}: 3 sessions in this file (s9, s10, s11): "
                   f"open one with hermes-tui open {export} --session ID (or the start of its title)")
    # a title prefix that fits two: those two listed
    proc = run_cli(hermes_home, "open", str(export), "--session", "pagination")
    assert proc.returncode == 2, explain(proc)
    assert [line.split()[0] for line in proc.stdout.splitlines()] == ["s9", "s10"]
    assert "2 sessions have a title starting 'pagination' (s9, s10)" in proc.stderr
    # nothing of that name: one line naming the sessions there are
    proc = run_cli(hermes_home, "open", str(export), "--session", "zz")
    assert proc.returncode == 2 and proc.stdout == "", explain(proc)
    assert proc.stderr.strip() == f"hermes-tui: {export}: no session 'zz' in this file (its sessions: s9, s10, s11)"
    # a plain message list has nothing to pick from
    plain = tmp_path / "plain.json"
    plain.write_text(json.dumps([SYSTEM, U1]))
    proc = run_cli(hermes_home, "open", str(plain), "--session", "s9")
    assert proc.returncode == 2 and "a plain message list holds one conversation" in proc.stderr, explain(proc)
    assert run_cli(hermes_home, "sessions", "list").stdout.strip() == "no sessions yet"


@pytest.mark.parametrize("choice, title, user_text", [
    ("s10", "Pagination docs", "Document the pagination."),       # by id
    ("PAGINATION F", "Pagination fix", U2["content"]),             # by the start of its title, any case
    ("s11", "export", BRANCH_USER["content"]),                     # untitled: the file's name
])
def test_open_with_session_opens_that_session_in_the_app(hermes_home, tmp_path, monkeypatch, choice, title, user_text):
    from hermes_tui.cli import root as cli
    from hermes_tui.tui.app import HermesApp

    export = several_sessions_export(tmp_path)
    opened = []

    def run(app):  # the app as the command line builds it, mounted headless
        async def mount():
            async with app.run_test(size=(100, 30)) as pilot:
                await pilot.pause()
        asyncio.run(mount())
        opened.extend(app.store.list_sessions())

    monkeypatch.setattr(HermesApp, "run", run)
    assert cli.main(["open", str(export), "--session", choice]) == 0
    (info,) = opened
    assert info.title == title
    with stored(hermes_home) as store:
        contents = [m.content for m in store.load_active(info.id)]
    assert contents[0] == SYSTEM["content"] and user_text in contents
