"""Pick one of Hermes Agent's sessions to import: its title, when it started, its size.

Dismisses with the Hermes session id (Enter), or None (Escape). Reading the list
only reads Hermes' database (``hermes_agent/state_db.py``); the import itself is the caller's.
"""

from __future__ import annotations

from rich.text import Text
from textual import on
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical
from textual.screen import ModalScreen
from textual.widgets import DataTable, Static

from hermes_tui.hermes_agent.importer import size, started
from hermes_tui.hermes_agent.state_db import HermesSessionInfo
from hermes_tui.tui.widgets.outside import shown_cell


class HermesImportDialog(ModalScreen[str | None]):
    DEFAULT_CSS = """
    HermesImportDialog {
        align: center middle;
        #dialog {
            width: 90;
            max-width: 95%;
            height: auto;
            max-height: 80%;
            padding: 1 2;
            background: $surface;
            border: round $primary;
            border-title-color: $text;
        }
        #where { margin-bottom: 1; color: $text-muted; }
        #hermes-sessions { height: auto; max-height: 20; }
    }
    """

    BINDINGS = [Binding("escape", "cancel", "Cancel"), Binding("enter", "pick", "Import", show=True)]

    def __init__(self, sessions: list[HermesSessionInfo], where: str) -> None:
        super().__init__()
        self.sessions, self.where = sessions, where

    def compose(self) -> ComposeResult:
        with Vertical(id="dialog") as dialog:
            dialog.border_title = "Import from Hermes Agent"
            yield Static(f"{self.where} · Enter imports the highlighted session as a new one", id="where",
                         markup=False)
            yield DataTable(id="hermes-sessions", cursor_type="row", zebra_stripes=True)

    def on_mount(self) -> None:
        table = self.query_one(DataTable)
        table.add_column("Title", width=44, key="title")
        table.add_column("Started", width=16, key="started")
        table.add_column(Text("Size", justify="right"), width=13, key="size")
        for s in self.sessions:
            table.add_row(
                shown_cell(s.title or f"(untitled {s.id})", no_wrap=True, overflow="ellipsis"),
                Text(started(s), no_wrap=True), Text(size(s), justify="right"), key=s.id,
            )
        table.focus()

    @on(DataTable.RowSelected, "#hermes-sessions")
    def _row_selected(self, event: DataTable.RowSelected) -> None:
        self.dismiss(event.row_key.value)

    def action_pick(self) -> None:
        table = self.query_one(DataTable)
        if table.row_count:
            self.dismiss(table.coordinate_to_cell_key(table.cursor_coordinate).row_key.value)

    def action_cancel(self) -> None:
        self.dismiss(None)
