"""The sessions screen: browse, search, resume, rename, delete and export stored sessions.

Pushed by the app; dismisses with the id of the session to resume, or None (Escape).
Full-text search covers every message, archived originals included, so what
compaction condensed can still be found and reopened.

Deleting the session that is open in the chat is refused (with a notice saying why):
the chat still holds it, and deleting rows under a live session would make its next
flush write into a session that no longer exists.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable
from pathlib import Path

from rich.text import Text
from textual import events, on
from textual.app import ComposeResult
from textual.binding import Binding
from textual.screen import Screen
from textual.widgets import DataTable, Footer, Input, Static

from hermes_tui.hermes_agent.importer import conversations, hermes_db, read_all, store_session
from hermes_tui.hermes_agent.state_db import HermesImportError
from hermes_tui.store import SearchHit, SessionInfo, Store, StoreError
from hermes_tui.store.export import session_messages, to_json, to_markdown
from hermes_tui.tui.screens.dialogs import (
    ConfirmDialog,
    ExportDialog,
    ExportFormat,
    TextPromptDialog,
)
from hermes_tui.tui.screens.hermes_import import HermesImportDialog
from hermes_tui.tui.widgets.outside import shown_cell
from hermes_tui.tui.widgets.text import human_time
from hermes_tui.util.terminal_text import visible_controls

__all__ = ["ExportDialog", "SessionsScreen", "export_session", "human_time"]  # ExportDialog: from dialogs

FORMATS = {"markdown": ".md", "json": ".json"}
IMPORT_HINT = "i: import a session from Hermes Agent"
EXPORT_FORMATS = [ExportFormat("markdown", "Markdown", FORMATS["markdown"]),
                  ExportFormat("json", "JSON (OpenAI messages)", FORMATS["json"])]


def export_session(store: Store, info: SessionInfo, fmt: str, include_archived: bool, path: Path) -> Path:
    """Write ``info`` as Markdown or JSON to a new file at ``path`` (never overwrites one)."""
    messages = session_messages(store, info.id, include_archived=include_archived)
    text = to_markdown(info, messages) if fmt == "markdown" else to_json(messages)
    with open(path, "x", encoding="utf-8") as handle:
        handle.write(text if text.endswith("\n") else text + "\n")
    return path


def default_export_name(info: SessionInfo, fmt: str) -> str:
    slug = re.sub(r"[^a-z0-9]+", "-", info.title.lower()).strip("-")[:40].strip("-")
    return f"{slug or 'session'}-{info.id[:8]}{FORMATS[fmt]}"


class SessionTable(DataTable[Text]):
    """The sessions (or search hits), one per row; Enter resumes the highlighted one."""

    BINDINGS = [Binding("enter", "select_cursor", "Resume")]


class SessionsScreen(Screen[str | None]):
    """Stored sessions, newest first, with full-text search.

    Dismisses with the session id to resume (Enter), or None (Escape).
    """

    DEFAULT_CSS = """
    SessionsScreen {
        background: $background;
        #heading {
            height: 1;
            padding: 0 1;
            background: $panel;
            color: $text;
            text-style: bold;
        }
        #search { margin: 1 1 0 1; }
        #sessions {
            height: 1fr;
            margin: 1 1 0 1;
            background: $surface;
        }
        #empty {
            height: 1fr;
            margin: 1 1 0 1;
            padding: 1 2;
            color: $text-muted;
            background: $surface;
            display: none;
        }
        &.-empty #sessions { display: none; }
        &.-empty #empty { display: block; }
        #status {
            height: 1;
            padding: 0 1;
            color: $text-muted;
        }
    }
    """

    BINDINGS = [
        Binding("escape", "back", "Back"),
        Binding("slash", "focus_search", "Search"),
        Binding("r", "rename", "Rename"),
        Binding("d", "delete", "Delete"),
        Binding("e", "export", "Export"),
        # Not in the footer (no room at 80 columns): the status line offers it instead.
        Binding("i", "import_hermes", "Import from Hermes Agent", show=False),
    ]

    AUTO_FOCUS = "#sessions"

    # Exports are named from the home folder: the current folder is wherever the app was
    # started, which the app never shows. The dialog and the status name the full path.
    def __init__(self, store: Store, current_id: str | None = None, *,
                 export_dir: Callable[[], Path] = Path.home) -> None:
        super().__init__()
        self.store = store
        self.current_id = current_id
        self.export_dir = export_dir
        self._query = ""
        self._row_session: dict[str, str] = {}   # row key -> session id
        self._sessions: dict[str, SessionInfo] = {}

    # --- layout ----------------------------------------------------------------------
    def compose(self) -> ComposeResult:
        yield Static("Sessions", id="heading")
        yield Input(placeholder="Search every message, archived ones too  (/)", id="search")
        yield SessionTable(id="sessions", cursor_type="row", zebra_stripes=True)
        yield Static("", id="empty", markup=False)
        yield Static(IMPORT_HINT, id="status", markup=False)
        yield Footer()

    def on_mount(self) -> None:
        self.reload()

    def on_resize(self) -> None:
        self.reload(keep=self.selected_session_id())

    # --- data ------------------------------------------------------------------------
    def reload(self, keep: str | None = None) -> None:
        """Rebuild the table from the store for the current query, keeping the cursor on ``keep``."""
        table = self.query_one(SessionTable)
        try:
            self._sessions = {s.id: s for s in self.store.list_sessions()}
            hits = self.store.search(self._query) if self._query.strip() else None
        except StoreError as exc:
            self._show_empty(f"The session database cannot be read: {exc}")
            self.notify(str(exc), title="Sessions", severity="error")
            return
        table.clear(columns=True)
        self._row_session.clear()
        width = max(self.size.width or self.app.size.width, 40) - 6  # margins and scrollbar
        if hits is None:
            self._fill_sessions(table, width)
            count = len(self._sessions)
            heading = f"Sessions · {count}" if count else "Sessions"
            empty = "No sessions yet. Conversations are stored here as you chat."
        else:
            self._fill_hits(table, width, hits)
            heading = f"Sessions · {len(hits)}{'+' if len(hits) >= 50 else ''} matches for “{self._query.strip()}”"
            empty = f"No messages match “{self._query.strip()}”."
        self.query_one("#heading", Static).update(heading)
        if not self._row_session:
            self._show_empty(empty)
            return
        self.remove_class("-empty")
        if keep is not None:
            for row_key, session_id in self._row_session.items():
                if session_id == keep:
                    table.move_cursor(row=table.get_row_index(row_key))
                    break
        self.refresh_bindings()

    def _fill_sessions(self, table: DataTable[Text], width: int) -> None:
        updated_width, count_width = 16, 8
        title_width = max(12, width - updated_width - count_width - 1 - 8)  # 8: cell padding
        table.add_column("", width=1, key="open")
        table.add_column("Title", width=title_width, key="title")
        table.add_column("Updated", width=updated_width, key="updated")
        table.add_column(Text("Messages", justify="right"), width=count_width, key="count")
        now = time.time()
        for info in self._sessions.values():
            is_open = info.id == self.current_id
            title = shown_cell(info.title or f"(untitled {info.id[:8]})", no_wrap=True, overflow="ellipsis")
            if info.kind == "replay":  # stored by ``compact``, not a conversation of the user's
                title = Text.assemble(("replay ", "dim"), title, no_wrap=True, overflow="ellipsis")
            table.add_row(
                Text("●" if is_open else "", style="bold"),
                title,
                Text(human_time(info.updated, now), no_wrap=True),
                Text(str(info.message_count), justify="right"),
                key=info.id,
            )
            self._row_session[info.id] = info.id

    def _fill_hits(self, table: DataTable[Text], width: int, hits: list[SearchHit]) -> None:
        session_width = max(12, min(32, width // 3))
        table.add_column("Session", width=session_width, key="title")
        table.add_column("Match", width=max(20, width - session_width - 4), key="match")
        for hit in hits:
            table.add_row(
                shown_cell(hit.title or hit.session_id[:8], no_wrap=True, overflow="ellipsis"),
                _snippet(hit),
                key=hit.message_id,
            )
            self._row_session[hit.message_id] = hit.session_id

    def _show_empty(self, text: str) -> None:
        self.query_one("#empty", Static).update(text)
        self.add_class("-empty")
        if self.focused is None or isinstance(self.focused, SessionTable):
            self.query_one("#search", Input).focus()  # the table is hidden: nothing else to do
        self.refresh_bindings()

    def selected_session_id(self) -> str | None:
        if not self._row_session or self.has_class("-empty"):
            return None
        table = self.query_one(SessionTable)
        if table.row_count == 0:
            return None
        row_key = table.coordinate_to_cell_key(table.cursor_coordinate).row_key
        return self._row_session.get(row_key.value or "")

    def _selected(self) -> SessionInfo | None:
        session_id = self.selected_session_id()
        return self._sessions.get(session_id) if session_id else None

    def _status(self, text: str) -> None:
        self.query_one("#status", Static).update(text)

    # --- events and actions -------------------------------------------------------------
    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        if action == "import_hermes" and isinstance(self.focused, Input):
            return False
        if action in ("rename", "delete", "export"):
            if isinstance(self.focused, Input):
                return False  # letters type into the search box: do not offer them
            return True if self._selected() is not None else None
        return True

    def on_descendant_focus(self) -> None:
        self.refresh_bindings()

    @on(Input.Changed, "#search")
    def _search_changed(self, event: Input.Changed) -> None:
        self._query = event.value
        self.reload()

    @on(Input.Submitted, "#search")
    def _search_submitted(self) -> None:
        if not self.has_class("-empty"):
            self.query_one(SessionTable).focus()

    def on_key(self, event: events.Key) -> None:
        # Down from the search box goes to the results.
        if event.key == "down" and self.focused is self.query_one("#search", Input) and not self.has_class("-empty"):
            event.stop()
            self.query_one(SessionTable).focus()

    @on(DataTable.RowSelected, "#sessions")
    def _row_selected(self, event: DataTable.RowSelected) -> None:
        session_id = self._row_session.get(event.row_key.value or "")
        if session_id:
            self.dismiss(session_id)

    def action_resume(self) -> None:
        session_id = self.selected_session_id()
        if session_id:
            self.dismiss(session_id)

    def action_back(self) -> None:
        if isinstance(self.focused, Input) and not self.has_class("-empty"):
            self.query_one(SessionTable).focus()
            return
        self.dismiss(None)

    def action_focus_search(self) -> None:
        self.query_one("#search", Input).focus()

    def action_rename(self) -> None:
        info = self._selected()
        if info is None:
            return

        def renamed(title: str | None) -> None:
            if not title or title == info.title:
                return
            try:
                self.store.rename_session(info.id, title)
            except StoreError as exc:
                self.notify(str(exc), title="Rename", severity="error")
                return
            self._status(f"Renamed “{info.title}” to “{title}”.")
            self.reload(keep=info.id)

        self.app.push_screen(
            TextPromptDialog("New title for this session:", info.title, title="Rename", submit="Rename"), renamed
        )

    def action_delete(self) -> None:
        info = self._selected()
        if info is None:
            return
        if info.id == self.current_id:
            self.notify(
                "This session is open in the chat. Open another session (or start a new one) first, then delete it.",
                title="Not deleted", severity="warning",
            )
            return
        count = f"{info.message_count} message{'' if info.message_count == 1 else 's'}"

        def confirmed(yes: bool | None) -> None:
            if not yes:
                self._status("Nothing deleted.")
                return
            try:
                self.store.delete_session(info.id)
            except StoreError as exc:
                self.notify(str(exc), title="Delete", severity="error")
                return
            self._status(f"Deleted “{info.title}” and its {count}.")
            self.reload()

        self.app.push_screen(
            ConfirmDialog(
                f"Delete “{info.title}” and its {count}?",
                "Archived originals go too. This cannot be undone; export it first to keep a copy.",
                confirm="Delete", title="Delete session", danger=True,
            ),
            confirmed,
        )

    def action_export(self) -> None:
        info = self._selected()
        if info is None:
            return

        def exported(path: Path | None) -> None:
            if path is not None:
                self._status(f"Exported “{info.title}” to {path}")
                self.notify(str(path), title="Exported")

        def write(fmt: str, path: Path, include_archived: bool) -> Path:
            return export_session(self.store, info, fmt, include_archived, path)

        count = f"{info.message_count} message{'' if info.message_count == 1 else 's'}"
        dialog = ExportDialog(
            "Export session", f"“{info.title}” · {count}", EXPORT_FORMATS, self.export_dir(),
            lambda fmt: default_export_name(info, fmt), write,
            option=("all", "Include archived originals (--all)"),
        )
        self.app.push_screen(dialog, exported)

    def action_import_hermes(self) -> None:
        """Hermes Agent's conversations to pick one from; it becomes a new session here."""
        try:
            db = hermes_db()
            listed = conversations(db)
        except HermesImportError as exc:
            self.notify(str(exc), title="Import from Hermes Agent", severity="error")
            return
        if not listed:
            self.notify(f"No Hermes sessions in {db}.", title="Import from Hermes Agent")
            return

        def picked(hermes_id: str | None) -> None:
            if hermes_id is None:
                return
            try:
                (session,) = read_all(db, [hermes_id])
                imported = store_session(self.store, session)
            except (HermesImportError, StoreError) as exc:
                self.notify(str(exc), title="Import from Hermes Agent", severity="error")
                return
            self._status(f"Imported “{imported.info.title}” from Hermes Agent ({len(session.messages)} messages).")
            self.reload(keep=imported.info.id)

        self.app.push_screen(HermesImportDialog(listed, str(db)), picked)


def _snippet(hit: SearchHit) -> Text:
    """The FTS snippet with its [matches] in bold, after the role (and "archived")."""
    where = hit.role + (" · archived" if hit.state == "archived" else "")
    text = Text(f"{where}  ", style="dim", no_wrap=True, overflow="ellipsis")
    body = visible_controls(" ".join(hit.snippet.split()))
    last = 0
    for match in re.finditer(r"\[([^\[\]]*)\]", body):
        text.append(body[last : match.start()])
        text.append(match.group(1), style="bold underline")
        last = match.end()
    text.append(body[last:])
    return text
