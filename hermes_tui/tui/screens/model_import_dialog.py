"""The import dialog of the models and first-run screens: a GGUF file or an MLX folder, and an
optional name; it checks the path exists and dismisses with an ``ImportRequest`` (None: cancelled)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from textual import on
from textual.app import ComposeResult
from textual.containers import Horizontal, Vertical
from textual.widgets import Button, Input, Static

from hermes_tui.tui.screens.dialogs import FormDialog

__all__ = ["ImportDialog", "ImportRequest"]


@dataclass(frozen=True)
class ImportRequest:
    path: Path
    name: str | None


class ImportDialog(FormDialog[ImportRequest | None]):
    """Ask for a GGUF file or an MLX folder, and an optional name. Checks the path exists."""

    DEFAULT_CSS = """
    ImportDialog {
        #dialog { width: 76; }
        .label { margin-top: 1; }
        #hint { color: $text-muted; }
    }
    """

    def compose(self) -> ComposeResult:
        with Vertical(id="dialog") as dialog:
            dialog.border_title = "Import a model"
            yield Static("A GGUF file (llama architecture) or an MLX model folder:", classes="label", markup=False)
            yield Input(placeholder="~/Downloads/model.Q4_K_M.gguf", id="path")
            yield Static("Name in the models folder (optional):", classes="label", markup=False)
            yield Input(placeholder="default: the file or folder name", id="name")
            yield Static("MLX folders are linked (no copy); GGUF files are converted to MLX.", id="hint",
                         markup=False)
            yield Static("", id="error", markup=False)
            with Horizontal(id="buttons"):
                yield Button("Cancel", id="cancel")
                yield Button("Import", id="import", variant="primary")

    def on_mount(self) -> None:
        self.query_one("#path", Input).focus()

    @on(Input.Submitted)
    @on(Button.Pressed, "#import")
    def _submit(self) -> None:
        raw = self.query_one("#path", Input).value.strip()
        if not raw:
            self._error("Type the path of a GGUF file or an MLX folder (Escape cancels).")
            return
        path = Path(raw).expanduser()
        if not path.exists():
            self._error(f"{path}: no such file or folder")
            return
        name = self.query_one("#name", Input).value.strip() or None
        self.dismiss(ImportRequest(path, name))
