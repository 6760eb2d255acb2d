"""Small modal dialogs shared by the screens: a yes/no confirmation, a one-line prompt and
the export dialog (sessions and benchmark runs)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar

from textual import on
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical
from textual.screen import ModalScreen
from textual.widgets import Button, Checkbox, Input, RadioButton, RadioSet, Static

from hermes_tui.store import StoreError

__all__ = ["ConfirmDialog", "ExportDialog", "ExportFormat", "FormDialog", "TextPromptDialog"]

ResultT = TypeVar("ResultT")


class FormDialog(ModalScreen[ResultT]):
    """A dialog with fields, an ``#error`` line and a ``#cancel`` button: Escape or Cancel
    dismisses with None; ``_error`` shows what is wrong and keeps the dialog open. Its
    look is here; a subclass sets its ``#dialog`` width and styles its own fields."""

    DEFAULT_CSS = """
    FormDialog {
        align: center middle;
        #dialog {
            max-width: 95%;
            height: auto;
            max-height: 100%;
            padding: 0 2;
            background: $surface;
            border: round $primary;
            border-title-color: $text;
        }
        #error { color: $error; display: none; }
        #error.-shown { display: block; }
        #buttons { height: auto; margin: 1 0; align-horizontal: right; }
        #buttons Button { margin-left: 2; }
    }
    """

    BINDINGS = [Binding("escape", "cancel", "Cancel")]

    def _error(self, text: str) -> None:
        error = self.query_one("#error", Static)
        error.update(text)
        error.add_class("-shown")

    @on(Button.Pressed, "#cancel")
    def action_cancel(self) -> None:
        self.dismiss(None)


class ConfirmDialog(ModalScreen[bool]):
    """Ask before doing something. Dismisses with True (confirmed) or False.

    The cancel button has the focus, so a stray Enter never confirms; Escape cancels.
    ``danger`` colours the dialog as a destructive action.
    """

    DEFAULT_CSS = """
    ConfirmDialog {
        align: center middle;
        #dialog {
            width: 64;
            max-width: 90%;
            height: auto;
            padding: 1 2;
            background: $surface;
            border: round $primary;
            border-title-color: $text;
        }
        &.-danger #dialog { border: round $error; }
        #question { text-style: bold; }
        #detail { color: $text-muted; margin-top: 1; }
        #buttons { height: auto; margin-top: 1; align-horizontal: right; }
        #buttons Button { margin-left: 2; }
    }
    """

    BINDINGS = [Binding("escape", "cancel", "Cancel")]

    def __init__(self, question: str, detail: str = "", *, confirm: str = "OK", cancel: str = "Cancel",
                 title: str = "", danger: bool = False) -> None:
        super().__init__(classes="-danger" if danger else None)
        self.question, self.detail = question, detail
        self.confirm_label, self.cancel_label = confirm, cancel
        self.dialog_title, self.danger = title, danger

    def compose(self) -> ComposeResult:
        with Vertical(id="dialog") as dialog:
            dialog.border_title = self.dialog_title
            yield Static(self.question, id="question", markup=False)
            if self.detail:
                yield Static(self.detail, id="detail", markup=False)
            with Horizontal(id="buttons"):
                yield Button(self.cancel_label, id="cancel")
                yield Button(self.confirm_label, id="confirm", variant="error" if self.danger else "primary")

    def on_mount(self) -> None:
        self.query_one("#cancel", Button).focus()

    @on(Button.Pressed, "#confirm")
    def _confirmed(self) -> None:
        self.dismiss(True)

    @on(Button.Pressed, "#cancel")
    def action_cancel(self) -> None:
        self.dismiss(False)


class TextPromptDialog(ModalScreen[str | None]):
    """Ask for one line of text. Dismisses with the stripped text, or None (Escape)."""

    DEFAULT_CSS = """
    TextPromptDialog {
        align: center middle;
        #dialog {
            width: 64;
            max-width: 90%;
            height: auto;
            padding: 1 2;
            background: $surface;
            border: round $primary;
            border-title-color: $text;
        }
        #prompt { margin-bottom: 1; }
        #error { color: $error; display: none; }
        #error.-shown { display: block; }
        #buttons { height: auto; margin-top: 1; align-horizontal: right; }
        #buttons Button { margin-left: 2; }
    }
    """

    BINDINGS = [Binding("escape", "cancel", "Cancel")]

    def __init__(self, prompt: str, value: str = "", *, title: str = "", submit: str = "OK",
                 placeholder: str = "") -> None:
        super().__init__()
        self.prompt, self.value, self.dialog_title = prompt, value, title
        self.submit_label, self.placeholder = submit, placeholder

    def compose(self) -> ComposeResult:
        with Vertical(id="dialog") as dialog:
            dialog.border_title = self.dialog_title
            yield Static(self.prompt, id="prompt", markup=False)
            yield Input(self.value, placeholder=self.placeholder, id="text", select_on_focus=True)
            yield Static("", id="error", markup=False)
            with Horizontal(id="buttons"):
                yield Button("Cancel", id="cancel")
                yield Button(self.submit_label, id="submit", variant="primary")

    @on(Input.Submitted, "#text")
    @on(Button.Pressed, "#submit")
    def _submit(self) -> None:
        text = self.query_one("#text", Input).value.strip()
        if not text:
            error = self.query_one("#error", Static)
            error.update("Type something first (Escape cancels).")
            error.add_class("-shown")
            return
        self.dismiss(text)

    @on(Button.Pressed, "#cancel")
    def action_cancel(self) -> None:
        self.dismiss(None)


@dataclass(frozen=True)
class ExportFormat:
    """One format the export dialog offers: ``id`` is what ``write`` receives (and the radio button's id)."""

    id: str
    label: str
    suffix: str  # ".md", ".csv", ...


class ExportDialog(FormDialog[Path | None]):
    """Pick a format (and an option), name a new file, export. Dismisses with the path written, or None.

    ``write(fmt, path, option)`` writes ``path`` without overwriting (open mode "x") and
    returns it; its errors stay in the dialog so the user can fix the name. The file name
    starts as ``default_name(fmt)``; a relative path is taken from ``directory``. ``option``
    is ``(id, label)`` of a checkbox whose value reaches ``write`` (False without one).
    """

    DEFAULT_CSS = """
    ExportDialog {
        #dialog { width: 72; }
        #what { text-style: bold; margin-top: 1; }
        #format { layout: horizontal; width: 100%; height: auto; margin-top: 1; border: none; padding: 0; }
        #format RadioButton { margin-right: 2; }
        #dialog > Checkbox { margin-top: 0; border: none; padding: 0; }
        #where { color: $text-muted; margin-top: 1; }
    }
    """

    def __init__(
        self,
        title: str,
        what: str,
        formats: Sequence[ExportFormat],
        directory: Path,
        default_name: Callable[[str], str],
        write: Callable[[str, Path, bool], Path],
        *,
        option: tuple[str, str] | None = None,
    ) -> None:
        super().__init__()
        self.dialog_title, self.what = title, what
        self.formats = {f.id: f for f in formats}
        self.directory, self.default_name, self.write = Path(directory), default_name, write
        self.option = option
        self.fmt = formats[0].id  # the first format is the one picked at the start

    def compose(self) -> ComposeResult:
        with Vertical(id="dialog") as dialog:
            dialog.border_title = self.dialog_title
            yield Static(self.what, id="what", markup=False)
            with RadioSet(id="format"):
                for f in self.formats.values():
                    yield RadioButton(f.label, value=f.id == self.fmt, id=f.id)
            if self.option is not None:
                option_id, label = self.option
                yield Checkbox(label, id=option_id)
            yield Static(f"File name, or a path (relative to {self.directory}):", id="where", markup=False)
            yield Input(self.default_name(self.fmt), id="path")
            yield Static("", id="error", markup=False)
            with Horizontal(id="buttons"):
                yield Button("Cancel", id="cancel")
                yield Button("Export", id="export", variant="primary")

    def on_mount(self) -> None:
        self.query_one("#path", Input).focus()

    @on(RadioSet.Changed, "#format")
    def _format_changed(self, event: RadioSet.Changed) -> None:
        path = self.query_one("#path", Input)
        old = self.fmt
        self.fmt = event.pressed.id or old
        if path.value == self.default_name(old):
            path.value = self.default_name(self.fmt)
        elif path.value.endswith(self.formats[old].suffix):  # a name of the user's: follow the format
            path.value = str(Path(path.value).with_suffix(self.formats[self.fmt].suffix))

    def target(self) -> Path:
        raw = self.query_one("#path", Input).value.strip() or self.default_name(self.fmt)
        path = Path(raw).expanduser()
        if not path.is_absolute():
            path = self.directory / path
        if path.is_dir():
            path = path / self.default_name(self.fmt)
        return path.absolute()

    @on(Input.Submitted, "#path")
    @on(Button.Pressed, "#export")
    def _export(self) -> None:
        path = self.target()
        checked = self.option is not None and self.query_one(f"#{self.option[0]}", Checkbox).value
        try:
            written = self.write(self.fmt, path, checked)
        except FileExistsError:
            self._error(f"{path} already exists: type another name (nothing was overwritten).")
            return
        except OSError as exc:
            self._error(f"Cannot write {path}: {exc.strerror or exc}")
            return
        except StoreError as exc:
            self._error(str(exc))
            return
        self.dismiss(written)
