"""Small modal dialogs shared by the screens: a yes/no confirmation and a one-line prompt."""

from __future__ import annotations

from textual import on
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical
from textual.screen import ModalScreen
from textual.widgets import Button, Input, Static

__all__ = ["ConfirmDialog", "TextPromptDialog"]


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
