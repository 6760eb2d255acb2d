"""The sessions, settings and first-run screens, driven in a minimal app.

Each screen is pushed by a tiny test app that records what the screen dismisses
with. The sessions screen runs on a real SQLite store (one session has been through
real micro-compaction passes, so it has archived rows); the settings screen edits a
real config.yaml. Snapshot tests pin each screen at 80×24 and 160×48 with fixed
titles and timestamps.
"""

from __future__ import annotations

import difflib
import json
from datetime import UTC, datetime
from pathlib import Path

import pytest
from helpers import exchange, make_compactor, user
from support.chat_app import ScreenApp
from support.hermes_home import build_hermes_home, expected_active, fingerprint, shape
from textual.app import App
from textual.widgets import Button, Checkbox, DataTable, Input, Select, Static, Switch

from hermes_tui.chat.client import ChatError
from hermes_tui.compaction.summarizer import SummarizerError
from hermes_tui.config import (
    AuxiliaryCompressionConfig,
    Config,
    ConfigError,
    ConfigProblem,
    ModelConfig,
    load_config,
)
from hermes_tui.config.edit import changed_values, edit_config_text, save_changes
from hermes_tui.config.write import default_config_text
from hermes_tui.core.transcript import Message
from hermes_tui.hub.resolve import resolve_model_path
from hermes_tui.providers.selection import make_chat_client, make_summarizer
from hermes_tui.store import Store, StoreError
from hermes_tui.store import db as store_db
from hermes_tui.store.export import session_messages, to_json, to_markdown
from hermes_tui.tui.problems import first_run_actions, first_run_problem
from hermes_tui.tui.screens.dialogs import ConfirmDialog, TextPromptDialog
from hermes_tui.tui.screens.first_run import FirstRunScreen
from hermes_tui.tui.screens.hermes_import import HermesImportDialog
from hermes_tui.tui.screens.sessions import ExportDialog, SessionsScreen, human_time
from hermes_tui.tui.screens.settings import SettingsScreen

# Noon UTC: the same calendar day in (nearly) every time zone, so dates render the same.
DAY = 86_400
T0 = datetime(2023, 3, 14, 12, tzinfo=UTC).timestamp()


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"




def text(widget: Static) -> str:
    return str(widget.content)


def set_times(store: Store, session_id: str, ts: float) -> None:
    store.conn.execute("UPDATE sessions SET created = ?, updated = ? WHERE id = ?", (ts, ts, session_id))


def add_session(store: Store, title: str, messages: list[Message], ts: float) -> str:
    session_id = store.create_session(title).id
    store.flush(session_id, messages)
    set_times(store, session_id, ts)
    return session_id


def chat(*pairs: tuple[str, str]) -> list[Message]:
    out = []
    for question, answer in pairs:
        out += [user(question), Message(role="assistant", content=answer)]
    return out


# --- a store with sessions ------------------------------------------------------------------


@pytest.fixture
def store(tmp_path):
    """Three sessions; "Fix the parser" went through micro passes and has archived rows."""
    store = Store(tmp_path / "state.db")
    ids = {}
    parser = store.create_session("Fix the parser").id
    compactor, conv = make_compactor(limit=4000)
    conv.extend([Message(role="system", content="You are a coding agent."), user("The parser chokes on nested lists")])
    conv.extend([*exchange(60, text="Running the armadillo test suite on nested lists."), *exchange(60)])
    conv.extend([*exchange(60), *exchange(60), *exchange(60)])
    store.flush(parser, conv.messages)
    while compactor.micro_pass(conv, lambda r: store.archive_and_compact(parser, r)).outcome == "absorbed":
        pass
    archived = [m for m, state in store.load_all(parser) if state == "archived"]
    assert any("armadillo" in m.content for m in archived), "fixture: the armadillo exchange was not archived"
    set_times(store, parser, T0)
    ids["parser"] = parser
    ids["trip"] = add_session(store, "Plan the trip", chat(("Where to in May?", "Lisbon, by train.")), T0 + DAY)
    ids["ideas"] = add_session(store, "Ideas", chat(("A name for the cat?", "Quagga.")), T0 + 2 * DAY)
    store.ids = ids
    yield store
    store.close()


def table_of(app: App) -> DataTable:
    return app.screen.query_one("#sessions", DataTable)


def titles(app: App) -> list[str]:
    table = table_of(app)
    column = 1 if len(table.columns) == 4 else 0
    return [table.get_row_at(row)[column].plain for row in range(table.row_count)]


async def select_session(pilot, session_id: str) -> None:
    table = table_of(pilot.app)
    table.focus()
    table.move_cursor(row=table.get_row_index(session_id))  # in the list, rows are keyed by session id
    await pilot.pause()


# --- sessions ---------------------------------------------------------------------------------


@pytest.mark.anyio
async def test_sessions_lists_them_newest_first_with_dates_and_counts(store):
    app = ScreenApp(lambda: SessionsScreen(store, current_id=store.ids["trip"]))
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.pause()
        assert titles(app) == ["Ideas", "Plan the trip", "Fix the parser"]
        trip = table_of(app).get_row(store.ids["trip"])
        assert trip[0].plain == "●"  # the session open in the chat
        assert trip[2].plain == "15 Mar 2023"
        assert trip[3].plain == "2"
        parser = store.get_session(store.ids["parser"])
        assert table_of(app).get_row(parser.id)[3].plain == str(parser.message_count)
        assert "Sessions · 3" in text(app.screen.query_one("#heading", Static))


@pytest.mark.anyio
async def test_search_finds_an_archived_message_and_enter_resumes_it(store):
    app = ScreenApp(lambda: SessionsScreen(store))
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.press("slash", *"armadillo")
        await pilot.pause()
        table = table_of(app)
        assert table.row_count >= 1
        session, match = (cell.plain for cell in table.get_row_at(0))
        assert session == "Fix the parser"
        assert "archived" in match and "armadillo" in match
        await pilot.press("enter")  # from the search box to the results
        assert app.focused is table
        await pilot.press("enter")
        await pilot.pause()
    assert app.results == [store.ids["parser"]]


@pytest.mark.anyio
async def test_search_with_no_hits_says_so_and_an_empty_query_shows_all_again(store):
    app = ScreenApp(lambda: SessionsScreen(store))
    async with app.run_test(size=(80, 24)) as pilot:
        search = app.screen.query_one("#search", Input)
        search.value = "okapi"
        await pilot.pause()
        assert app.screen.has_class("-empty")
        assert "No messages match “okapi”" in text(app.screen.query_one("#empty", Static))
        search.value = ""
        await pilot.pause()
        assert not app.screen.has_class("-empty")
        assert titles(app) == ["Ideas", "Plan the trip", "Fix the parser"]


@pytest.mark.anyio
async def test_an_empty_store_says_so_and_offers_the_search_box(tmp_path):
    with Store(tmp_path / "empty.db") as empty:
        app = ScreenApp(lambda: SessionsScreen(empty))
        async with app.run_test(size=(80, 24)) as pilot:
            await pilot.pause()
            assert "No sessions yet" in text(app.screen.query_one("#empty", Static))
            assert app.focused is app.screen.query_one("#search", Input)
            await pilot.press("escape")
            await pilot.pause()
    assert app.results == [None]


@pytest.mark.anyio
async def test_enter_resumes_and_escape_goes_back(store):
    app = ScreenApp(lambda: SessionsScreen(store))
    async with app.run_test(size=(80, 24)) as pilot:
        await select_session(pilot, store.ids["trip"])
        await pilot.press("enter")
        await pilot.pause()
    assert app.results == [store.ids["trip"]]

    app = ScreenApp(lambda: SessionsScreen(store))
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.press("escape")
        await pilot.pause()
    assert app.results == [None]


@pytest.mark.anyio
async def test_rename_persists(store):
    app = ScreenApp(lambda: SessionsScreen(store))
    async with app.run_test(size=(80, 24)) as pilot:
        await select_session(pilot, store.ids["ideas"])
        await pilot.press("r")
        await pilot.pause()
        assert isinstance(app.screen, TextPromptDialog)
        prompt = app.screen.query_one("#text", Input)
        assert prompt.value == "Ideas"
        prompt.value = "Names for the cat"
        await pilot.press("enter")
        await pilot.pause()
        assert isinstance(app.screen, SessionsScreen)
        assert "Names for the cat" in titles(app)
    assert store.get_session(store.ids["ideas"]).title == "Names for the cat"


@pytest.mark.anyio
async def test_delete_asks_first_cancel_keeps_it_confirm_removes_it_and_its_messages(store):
    trip = store.get_session(store.ids["trip"])
    app = ScreenApp(lambda: SessionsScreen(store))
    async with app.run_test(size=(80, 24)) as pilot:
        await select_session(pilot, trip.id)
        await pilot.press("d")
        await pilot.pause()
        assert isinstance(app.screen, ConfirmDialog)
        question = text(app.screen.query_one("#question", Static))
        assert "Plan the trip" in question and f"{trip.message_count} messages" in question
        await pilot.press("enter")  # the focused button is Cancel: a stray Enter never deletes
        await pilot.pause()
        assert isinstance(app.screen, SessionsScreen)
        assert store.get_session(trip.id).title == "Plan the trip"

        await pilot.press("d")
        await pilot.pause()
        await pilot.press("escape")
        await pilot.pause()
        assert store.get_session(trip.id)

        await pilot.press("d")
        await pilot.pause()
        await pilot.click("#confirm")
        await pilot.pause()
        assert isinstance(app.screen, SessionsScreen)
        assert "Plan the trip" not in titles(app)
        assert "Deleted “Plan the trip”" in text(app.screen.query_one("#status", Static))
    assert trip.id not in {s.id for s in store.list_sessions()}
    assert store.conn.execute("SELECT count(*) FROM messages WHERE session_id = ?", (trip.id,)).fetchone()[0] == 0
    assert app.results == []


@pytest.mark.anyio
async def test_the_open_session_is_not_deleted(store):
    app = ScreenApp(lambda: SessionsScreen(store, current_id=store.ids["ideas"]))
    async with app.run_test(size=(80, 24)) as pilot:
        await select_session(pilot, store.ids["ideas"])
        await pilot.press("d")
        await pilot.pause()
        assert isinstance(app.screen, SessionsScreen)  # no confirmation: refused outright
        assert any("open in the chat" in n.message for n in app._notifications)
    assert store.get_session(store.ids["ideas"]).title == "Ideas"


@pytest.mark.anyio
async def test_export_writes_markdown_and_json_where_it_says(store, tmp_path, monkeypatch):
    out = tmp_path / "out"
    out.mkdir()
    monkeypatch.setenv("HOME", str(out))  # a relative path is taken from the home folder
    parser = store.get_session(store.ids["parser"])
    app = ScreenApp(lambda: SessionsScreen(store))
    async with app.run_test(size=(80, 24)) as pilot:
        await select_session(pilot, parser.id)

        # Markdown, active messages, the default name in the home folder.
        await pilot.press("e")
        await pilot.pause()
        assert isinstance(app.screen, ExportDialog)
        default_name = app.screen.query_one("#path", Input).value
        assert default_name.endswith(".md") and default_name.startswith("fix-the-parser-")
        await pilot.press("enter")
        await pilot.pause()
        markdown = out / default_name
        assert markdown.read_text() == to_markdown(parser, store.load_active(parser.id))
        assert str(markdown) in text(app.screen.query_one("#status", Static))

        # JSON with the archived originals (--all), to a path the user types.
        await pilot.press("e")
        await pilot.pause()
        await pilot.click("#json")
        await pilot.click("#all")
        await pilot.pause()
        assert app.screen.query_one("#path", Input).value.endswith(".json")
        assert app.screen.query_one("#all", Checkbox).value
        app.screen.query_one("#path", Input).value = "no-such-dir/all.json"
        await pilot.click("#export")
        await pilot.pause()
        assert isinstance(app.screen, ExportDialog)  # the error stays in the dialog
        assert "no-such-dir" in text(app.screen.query_one("#error", Static))
        path = app.screen.query_one("#path", Input)
        path.value = "all.json"
        path.focus()
        await pilot.press("enter")  # (a second click on Export within its 0.2 s press effect is ignored)
        await pilot.pause()
        assert isinstance(app.screen, SessionsScreen)

        # An existing file is never overwritten.
        await pilot.press("e")
        await pilot.pause()
        app.screen.query_one("#path", Input).value = default_name
        await pilot.press("enter")
        await pilot.pause()
        assert "already exists" in text(app.screen.query_one("#error", Static))
        await pilot.press("escape")
        await pilot.pause()

    everything = session_messages(store, parser.id, include_archived=True)
    written = json.loads((out / "all.json").read_text())
    assert written == json.loads(to_json(everything))
    assert len(written) > len(store.load_active(parser.id))
    assert any(m.get("meta", {}).get("archived") for m in written)
    assert markdown.read_text() == to_markdown(parser, store.load_active(parser.id))
    assert app.results == []


@pytest.mark.anyio
async def test_export_takes_a_relative_path_from_the_home_folder_and_says_where_it_wrote(
        store, tmp_path, monkeypatch):
    # The app's current folder is wherever it was started from, which the app never shows:
    # exports go to a place the user knows, and the dialog and status name it in full.
    user_home, elsewhere = tmp_path / "user", tmp_path / "started-here"
    user_home.mkdir()
    (user_home / "exports").mkdir()
    elsewhere.mkdir()
    monkeypatch.setenv("HOME", str(user_home))
    monkeypatch.chdir(elsewhere)
    parser = store.get_session(store.ids["parser"])
    app = ScreenApp(lambda: SessionsScreen(store))
    async with app.run_test(size=(80, 24)) as pilot:
        await select_session(pilot, parser.id)
        await pilot.press("e")
        await pilot.pause()
        assert isinstance(app.screen, ExportDialog)
        assert f"relative to {user_home}" in text(app.screen.query_one("#where", Static))
        app.screen.query_one("#path", Input).value = "exports/parser.md"
        await pilot.press("enter")
        await pilot.pause()
        assert isinstance(app.screen, SessionsScreen)
        written = user_home / "exports" / "parser.md"
        assert written.read_text() == to_markdown(parser, store.load_active(parser.id))
        assert text(app.screen.query_one("#status", Static)).endswith(f" to {written}")
        assert [n.message for n in app._notifications][-1] == str(written)
    assert list(elsewhere.iterdir()) == []


def test_human_time():
    now = datetime(2024, 6, 12, 15, 30).timestamp()  # a Wednesday, local time
    assert human_time(now - 10, now) == "just now"
    assert human_time(now - 300, now) == "5 min ago"
    assert human_time(datetime(2024, 6, 12, 9, 5).timestamp(), now) == "today 09:05"
    assert human_time(datetime(2024, 6, 11, 22, 0).timestamp(), now) == "yesterday 22:00"
    assert human_time(datetime(2024, 6, 8, 8, 0).timestamp(), now) == "Sat 08:00"
    assert human_time(datetime(2024, 1, 3, 8, 0).timestamp(), now) == "3 Jan"
    assert human_time(datetime(2021, 1, 3, 8, 0).timestamp(), now) == "3 Jan 2021"
    assert human_time(now + 3 * DAY, now) == "15 Jun"  # a clock ahead: the date, never "-3 days"


# --- settings ---------------------------------------------------------------------------------

USER_CONFIG = """\
# my own notes: the laptop setup
model:
  provider: openai-api   # llama-server on the desk
  model: qwen2.5-7b
  base_url: http://127.0.0.1:8080/v1

compression:
  threshold: 0.8  # keep it high
  # micro_compact: false   (tried it, too slow)
"""


@pytest.mark.anyio
async def test_import_from_hermes_agent_lists_its_sessions_and_imports_the_picked_one(store, hermes_home, tmp_path):
    agent_home = tmp_path / "hermes_agent_home"  # where the hermes_home fixture points HERMES_HOME
    writer = build_hermes_home(agent_home, "wal")
    (s2_started,) = writer.conn.execute("SELECT started_at FROM sessions WHERE id = 's2'").fetchone()
    writer.conn.close()
    before = fingerprint(agent_home)
    app = ScreenApp(lambda: SessionsScreen(store))
    async with app.run_test(size=(120, 30)) as pilot:
        table_of(app).focus()
        await pilot.press("i")
        await pilot.pause()
        assert isinstance(app.screen, HermesImportDialog)
        listed = app.screen.query_one("#hermes-sessions", DataTable)
        rows = {str(key.value): [cell.plain for cell in listed.get_row(key)] for key in listed.rows}
        # one row per conversation: the compressed s1 is imported through its continuation s2
        assert set(rows) == {"s2", "s1-branch"}
        title, when, size = rows["s2"]
        assert title == "Pagination fix" and size == "3 messages"
        assert when == datetime.fromtimestamp(s2_started).strftime("%Y-%m-%d %H:%M")
        listed.move_cursor(row=listed.get_row_index("s2"))
        await pilot.press("enter")
        await pilot.pause()
        assert isinstance(app.screen, SessionsScreen)
        assert titles(app)[0] == "Pagination fix"
        assert "Imported “Pagination fix” from Hermes Agent" in text(app.screen.query_one("#status", Static))
    imported = next(s for s in store.list_sessions() if s.title == "Pagination fix")
    assert shape(store.load_active(imported.id)) == expected_active()
    assert fingerprint(agent_home) == before


@pytest.mark.anyio
async def test_import_from_hermes_agent_without_a_hermes_home_says_so(store, hermes_home):
    app = ScreenApp(lambda: SessionsScreen(store))
    async with app.run_test(size=(80, 24)) as pilot:
        table_of(app).focus()
        await pilot.press("i")
        await pilot.pause()
        assert isinstance(app.screen, SessionsScreen)
        assert any("no Hermes Agent home here" in str(n.message) for n in app._notifications)
    assert len(store.list_sessions()) == 3


@pytest.fixture
def config_path(tmp_path) -> Path:
    path = tmp_path / "config.yaml"
    path.write_text(USER_CONFIG)
    return path


@pytest.mark.anyio
async def test_settings_save_writes_the_changed_values_and_keeps_the_users_comments(config_path):
    app = ScreenApp(lambda: SettingsScreen(config_path))
    async with app.run_test(size=(80, 24)) as pilot:
        screen = app.screen
        assert screen.query_one("#model--base_url", Input).value == "http://127.0.0.1:8080/v1"
        screen.query_one("#compression--threshold", Input).value = "0.6"
        screen.query_one("#auxiliary--compression--provider", Select).value = "extractive"
        screen.query_one("#compression--micro_compact", Switch).focus()
        await pilot.press("space")  # switch it off
        await pilot.pause()
        assert "modified" in text(screen.query_one("#heading", Static))
        await pilot.press("ctrl+s")
        await pilot.pause()
    [saved] = app.results
    assert isinstance(saved, Config)
    assert saved.compression.threshold == 0.6
    assert saved.compression.micro_compact is False
    assert saved.auxiliary.compression.provider == "extractive"
    assert load_config(config_path) == saved
    new = config_path.read_text()
    assert "# my own notes: the laptop setup" in new
    assert "provider: openai-api   # llama-server on the desk" in new
    assert "threshold: 0.6  # keep it high" in new
    assert "# micro_compact: false   (tried it, too slow)" in new
    removed = [line for line in difflib.ndiff(USER_CONFIG.splitlines(), new.splitlines()) if line.startswith("- ")]
    assert removed == ["-   threshold: 0.8  # keep it high"]


@pytest.mark.anyio
async def test_settings_never_save_an_invalid_value_and_say_which_key(config_path):
    before = config_path.read_bytes()
    app = ScreenApp(lambda: SettingsScreen(config_path))
    async with app.run_test(size=(80, 24)) as pilot:
        screen = app.screen
        screen.query_one("#compression--threshold", Input).value = "5"
        await pilot.press("ctrl+s")
        await pilot.pause()
        assert app.screen is screen  # still editing
        error = screen.query_one("#error-compression--threshold", Static)
        assert error.has_class("-shown") and "at most 1" in text(error) and "got 5" in text(error)
        assert screen.query_one("#row-compression--threshold").has_class("-invalid")
        assert "compression.threshold" in text(screen.query_one("#outcome", Static))
        assert any("compression.threshold" in n.message for n in app._notifications)
        assert app.focused is screen.query_one("#compression--threshold", Input)

        # Fixing it clears the error and saves.
        screen.query_one("#compression--threshold", Input).value = "0.5"
        assert config_path.read_bytes() == before
        await pilot.press("ctrl+s")
        await pilot.pause()
    assert app.results[0].compression.threshold == 0.5


@pytest.mark.anyio
async def test_settings_text_in_a_number_field_is_an_error_not_a_crash(config_path):
    app = ScreenApp(lambda: SettingsScreen(config_path))
    async with app.run_test(size=(80, 24)) as pilot:
        app.screen.query_one("#model--context_length", Input).value = "lots"
        app.screen.query_one("#model--base_url", Input).value = "localhost:8080"
        await pilot.click("#save")
        await pilot.pause()
        assert "expected a whole number" in text(app.screen.query_one("#error-model--context_length", Static))
        assert "http://" in text(app.screen.query_one("#error-model--base_url", Static))
    assert app.results == [] and config_path.read_text() == USER_CONFIG


@pytest.mark.anyio
async def test_settings_escape_asks_before_dropping_unsaved_changes(config_path):
    app = ScreenApp(lambda: SettingsScreen(config_path))
    async with app.run_test(size=(80, 24)) as pilot:
        settings = app.screen
        settings.query_one("#model--model", Input).value = "llama-3.2-3b"
        await pilot.press("escape")
        await pilot.pause()
        assert isinstance(app.screen, ConfirmDialog)
        assert "model.model" in text(app.screen.query_one("#detail", Static))
        await pilot.press("escape")  # keep editing
        await pilot.pause()
        assert app.screen is settings
        assert settings.query_one("#model--model", Input).value == "llama-3.2-3b"
        await pilot.press("escape")
        await pilot.pause()
        await pilot.click("#confirm")  # discard
        await pilot.pause()
    assert app.results == [None]
    assert config_path.read_text() == USER_CONFIG


@pytest.mark.anyio
async def test_settings_escape_without_changes_just_leaves(config_path):
    app = ScreenApp(lambda: SettingsScreen(config_path))
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.press("escape")
        await pilot.pause()
    assert app.results == [None]


@pytest.mark.anyio
async def test_settings_replace_an_unreadable_file_and_keep_it_as_bak(tmp_path):
    path = tmp_path / "config.yaml"
    path.write_text("compression:\n  threshold: [0.5\n")
    app = ScreenApp(lambda: SettingsScreen(path))
    async with app.run_test(size=(80, 24)) as pilot:
        assert app.screen.has_class("-load-error")
        assert "not valid YAML" in text(app.screen.query_one("#load-error", Static))
        app.screen.query_one("#compression--threshold", Input).value = "0.5"
        await pilot.press("ctrl+s")
        await pilot.pause()
    assert load_config(path).compression.threshold == 0.5
    backups = sorted(tmp_path.glob("config.yaml.*.bak"))
    assert [b.read_text() for b in backups] == ["compression:\n  threshold: [0.5\n"]


@pytest.mark.anyio
async def test_settings_create_a_missing_file_from_the_commented_template(tmp_path):
    path = tmp_path / "home" / "config.yaml"
    app = ScreenApp(lambda: SettingsScreen(path))
    async with app.run_test(size=(80, 24)) as pilot:
        app.screen.query_one("#auxiliary--compression--timeout", Input).value = "30"
        await pilot.press("ctrl+s")
        await pilot.pause()
        assert not app._notifications  # nothing of the user's was lost: no warning
    assert load_config(path).auxiliary.compression.timeout == 30
    assert path.read_text().startswith("# hermes-tui configuration.")


# --- config_edit: saving without losing the user's file -------------------------------------------


def test_edit_replaces_only_the_changed_values():
    text = default_config_text()
    new = edit_config_text(text, {"compression.threshold": 0.5, "model.base_url": "http://x:1/v1"})
    changed = [(a, b) for a, b in zip(text.splitlines(), new.splitlines()) if a != b]
    assert len(text.splitlines()) == len(new.splitlines()) and len(changed) == 2
    # The trailing comments stay in their column.
    for before, after in changed:
        assert before.index("#") == after.index("#")
    assert load_text(new).compression.threshold == 0.5


def test_edit_adds_missing_keys_under_their_section():
    text = "# mine\nmodel:\n  model: qwen  # the big one\nauxiliary:\n  compression:\n    timeout: 30\ncompression:\n# nothing yet\n"
    new = edit_config_text(text, {
        "model.base_url": "http://h:1/v1",
        "auxiliary.compression.model": "small",
        "compression.threshold": 0.5,
    })
    assert new.startswith("# mine\nmodel:\n  model: qwen  # the big one\n  base_url: http://h:1/v1\n")
    assert "    timeout: 30\n    model: small\n" in new
    assert "compression:\n  threshold: 0.5\n# nothing yet\n" in new
    assert edit_config_text("# only comments\n", {"auxiliary.compression.timeout": 60}) == (
        "# only comments\nauxiliary:\n  compression:\n    timeout: 60\n"
    )


@pytest.mark.parametrize("value", ["a: b", "# not a comment", "it's", '"quoted"', "", "null", "true", "0.5", "ünï"])
def test_edited_strings_read_back_as_the_same_string(value):
    new = edit_config_text('compression:\n  tokenizer: "x"  # note\n', {"compression.tokenizer": value})
    assert load_text(new).compression.tokenizer == value
    assert new.endswith("# note\n")


def test_a_flow_style_file_is_rewritten_from_the_template(tmp_path):
    path = tmp_path / "config.yaml"
    path.write_text("compression: {threshold: 0.7}\n")
    assert edit_config_text(path.read_text(), {"compression.threshold": 0.5}) is None
    result = save_changes(path, {"compression.threshold": 0.5})
    assert not result.kept_layout
    assert load_config(path).compression.threshold == 0.5


def test_save_changes_applies_to_the_file_as_it_is_now_and_validates_first(config_path):
    config_path.write_text(USER_CONFIG.replace("qwen2.5-7b", "edited-meanwhile"))
    result = save_changes(config_path, {"compression.target_ratio": 0.3})
    assert result.kept_layout and result.config.model.model == "edited-meanwhile"
    before = config_path.read_text()
    with pytest.raises(ConfigError, match="compression.target_ratio"):
        save_changes(config_path, {"compression.target_ratio": 1.5})
    assert config_path.read_text() == before


def test_changed_values_lists_dotted_leaves():
    old = Config()
    new = old.with_overrides({"compression.threshold": 0.5, "auxiliary.compression.timeout": 60})
    assert changed_values(old, new) == {"compression.threshold": 0.5, "auxiliary.compression.timeout": 60}


def load_text(text: str) -> Config:
    import yaml

    return Config.model_validate(yaml.safe_load(text) or {})


# --- first run --------------------------------------------------------------------------------

URL = "http://127.0.0.1:8080/v1"


def raised(call) -> Exception:
    """The error ``call`` raises: the first-run texts are judged on errors as the code makes them."""
    try:
        call()
    except Exception as exc:  # noqa: BLE001 - any is what the screen is given
        return exc
    raise AssertionError(f"{call} raised nothing")


FIRST_RUN_CASES = {
    "no chat model": (
        raised(lambda: make_chat_client(ModelConfig(provider="openai-api"))),
        "No chat model is configured", "Open settings", ["settings", "models", "quit"],
    ),
    "no compression model": (
        raised(lambda: make_summarizer(AuxiliaryCompressionConfig())),  # auto: no URL, no GPU here
        "No compression model is configured", "extractive", ["settings", "models", "quit"],
    ),
    "not downloaded": (
        raised(lambda: resolve_model_path("mlx-community/Qwen3-4B-4bit")),  # offline, not cached
        "Model mlx-community/Qwen3-4B-4bit is not downloaded", "models screen", ["models", "settings", "quit"],
    ),
    "not downloaded, through the provider": (
        raised(lambda: make_chat_client(ModelConfig(provider="mlx", model="mlx-community/Qwen3-4B-4bit"))),
        "Model mlx-community/Qwen3-4B-4bit is not downloaded", "models screen", ["models", "settings", "quit"],
    ),
    "refused": (
        ChatError("refused", f"model endpoint {URL} refused the connection: is the server running?", endpoint=URL),
        f"The endpoint {URL} refused the connection", "Start the model server", ["retry", "settings", "quit"],
    ),
    "timeout": (
        SummarizerError("timeout", f"compression endpoint {URL} did not answer within 120 s", endpoint=URL),
        f"The endpoint {URL} did not answer in time", "try again", ["retry", "settings", "quit"],
    ),
    "http_4xx": (
        ChatError("http_4xx", f"model endpoint {URL} rejected the request with HTTP 401: bad key "
                              "(check the API key (model.api_key_env))", endpoint=URL,
                  fix="check the API key (model.api_key_env)"),
        f"The endpoint {URL} rejected the request", "Check the API key (model.api_key_env) in settings",
        ["settings", "quit"],
    ),
    "unavailable": (
        ChatError("unavailable", "MLX is not installed"),
        "The chat model cannot run here: MLX is not installed", "Choose another model", ["models", "settings", "quit"],
    ),
    "database unreadable": (
        StoreError("/h/state.db: not a readable SQLite database (file is not a database). It was left "
                   "untouched: move it aside (or restore a backup) and start again, or set HERMES_TUI_HOME",
                   kind=store_db.UNREADABLE),
        "The session database is unreadable: /h/state.db: not a readable SQLite database", "Move it aside",
        ["quit"],
    ),
    "database locked": (
        StoreError("/h/state.db: the database is locked by another process (waited 5 s): close the other",
                   kind=store_db.LOCKED),
        "in use by another hermes-tui", "Close the other hermes-tui", ["quit"],
    ),
    "bad config": (
        ConfigError([ConfigProblem("/h/config.yaml", 7, "compression.threshold", "must be at most 1, got 5")]),
        "The settings file has a problem: /h/config.yaml: line 7: compression.threshold", "open settings",
        ["settings", "quit"],
    ),
    "anything else": (
        RuntimeError("boom\nwith a second line"),
        "Something went wrong: RuntimeError: boom with a second line", "Try again", ["settings", "quit"],
    ),
}


@pytest.mark.anyio
@pytest.mark.parametrize("case", list(FIRST_RUN_CASES))
async def test_first_run_says_what_is_wrong_and_how_to_fix_it(case):
    exc, problem, fix, actions = FIRST_RUN_CASES[case]
    assert [action for _, action in first_run_actions(exc)] == actions
    app = ScreenApp(lambda: FirstRunScreen.for_error(exc))
    async with app.run_test(size=(80, 24)) as pilot:
        shown_problem = text(app.screen.query_one("#problem", Static))
        shown_fix = text(app.screen.query_one("#fix", Static))
        assert problem in shown_problem and fix in shown_fix
        for shown in (shown_problem, shown_fix):
            assert "\n" not in shown and "Traceback" not in shown
        assert len(app.screen.query(Button)) == len(actions)
        await pilot.click(f"#action-{len(actions) - 1}")
        await pilot.pause()
    assert app.results == [actions[-1]]
    assert first_run_problem(exc) == (shown_problem, shown_fix)


@pytest.mark.anyio
@pytest.mark.parametrize("index,action", [(0, "settings"), (1, "models"), (2, "quit")])
async def test_first_run_buttons_dismiss_with_their_action(index, action):
    actions = [("Open settings", "settings"), ("Open models", "models"), ("Quit", "quit")]
    app = ScreenApp(lambda: FirstRunScreen("No chat model is configured", "Open settings.", actions))
    async with app.run_test(size=(80, 24)) as pilot:
        assert [str(b.label) for b in app.screen.query(Button)] == ["Open settings", "Open models", "Quit"]
        assert app.focused is app.screen.query_one("#action-0", Button)
        await pilot.press(*["right"] * index, "enter")
        await pilot.pause()
    assert app.results == [action]


@pytest.mark.anyio
async def test_first_run_escape_quits_only_when_quit_is_offered():
    app = ScreenApp(lambda: FirstRunScreen("p", "f"))
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.press("escape")
        await pilot.pause()
    assert app.results == ["quit"]
    app = ScreenApp(lambda: FirstRunScreen("p", "f", [("Open settings", "settings")]))
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.press("escape")
        await pilot.pause()
        assert isinstance(app.screen, FirstRunScreen)
    assert app.results == []


# --- snapshots --------------------------------------------------------------------------------

SIZES = [(80, 24), (160, 48)]


@pytest.fixture
def snapshot_store(tmp_path):
    """Fixed titles, counts and timestamps: the sessions screen renders the same every run."""
    store = Store(tmp_path / "snapshot.db")
    add_session(store, "Refactor the tokenizer cache", chat(("a", "b"), ("c", "d"), ("e", "f")), T0)
    current = add_session(store, "Plan the trip to Lisbon", chat(("Where to in May?", "Lisbon.")), T0 + DAY)
    add_session(store, "Why does the parser choke on nested lists inside tables? A very long title that "
                       "does not fit", chat(*[("q", "a")] * 6), T0 + 40 * DAY)
    add_session(store, "Ideas", [user("A name for the cat?")], T0 + 41 * DAY)
    store.current = current
    yield store
    store.close()


@pytest.mark.parametrize("size", SIZES, ids=lambda s: f"{s[0]}x{s[1]}")
def test_snapshot_sessions(snap_compare, snapshot_store, size):
    app = ScreenApp(lambda: SessionsScreen(snapshot_store, current_id=snapshot_store.current))
    assert snap_compare(app, terminal_size=size)


@pytest.mark.parametrize("size", SIZES, ids=lambda s: f"{s[0]}x{s[1]}")
def test_snapshot_settings(snap_compare, config_path, monkeypatch, size):
    monkeypatch.chdir(config_path.parent)  # the heading shows the path: keep it the same every run
    app = ScreenApp(lambda: SettingsScreen(Path("config.yaml")))
    assert snap_compare(app, terminal_size=size)


@pytest.mark.parametrize("size", SIZES, ids=lambda s: f"{s[0]}x{s[1]}")
def test_snapshot_first_run(snap_compare, size):
    exc = ChatError("refused", f"model endpoint {URL} refused the connection: is the server running?", endpoint=URL)
    app = ScreenApp(lambda: FirstRunScreen.for_error(exc))
    assert snap_compare(app, terminal_size=size)
