"""The settings screen: edit config.yaml safely.

One form over both model roles (the chat model and the compression model), the
compaction keys and the MCP servers (add, remove, enable: ``McpServersForm``). The form is built from the config schema, so every field's label,
help text and choices come from ``hermes_tui.config`` and cannot drift from it.

Save validates everything first (``apply_overrides``, the same rules as loading the
file): a bad value shows its one-line message under its field and nothing is
written. A valid form is written by ``config.edit.save_changes``: only the values
that changed are replaced in the user's file, so comments and layout stay; where
that is not possible the file is rewritten from the commented template (the screen
says so). Dismisses with the new ``Config`` after a save, or None when cancelled.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal, get_args, get_origin

from textual import events, on
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, VerticalScroll
from textual.screen import Screen
from textual.widget import Widget
from textual.widgets import Button, Footer, Input, Label, Select, Static, Switch

from hermes_tui.config import (
    AuxiliaryCompressionConfig,
    CompressionConfig,
    Config,
    ConfigError,
    ModelConfig,
    load_config,
    value_at,
)
from hermes_tui.config.edit import apply_changes, save_changes
from hermes_tui.config.schema import Section, Setting
from hermes_tui.config.write import refuse_foreign_config
from hermes_tui.tui.screens.chat_host import ScreenHost
from hermes_tui.tui.screens.dialogs import ConfirmDialog
from hermes_tui.tui.widgets.mcp_servers_form import McpServersForm

__all__ = ["FIELDS", "FormField", "SettingsScreen"]


@dataclass(frozen=True)
class FormField:
    key: str            # dotted config key, e.g. "compression.threshold"
    section: str        # the heading it is shown under
    info: Setting

    @property
    def widget_id(self) -> str:
        return self.key.replace(".", "--")

    @property
    def name(self) -> str:
        return self.key.rpartition(".")[2]

    @property
    def choices(self) -> tuple[str, ...]:
        return tuple(get_args(self.info.annotation)) if get_origin(self.info.annotation) is Literal else ()

    @property
    def is_bool(self) -> bool:
        return self.info.annotation is bool

    @property
    def is_text(self) -> bool:
        return self.info.annotation is str

    @property
    def nullable(self) -> bool:
        return type(None) in get_args(self.info.annotation)

    @property
    def help(self) -> str:
        note = (self.info.json_schema_extra or {}).get("note") if isinstance(self.info.json_schema_extra, dict) else None
        parts = [self.info.description or ""] + ([" ".join(note.split())] if note else [])
        return " · ".join(p for p in parts if p)


def _fields(section: str, prefix: str, model: type[Section]) -> list[FormField]:
    return [FormField(f"{prefix}.{name}", section, info) for name, info in model.model_fields.items()]


FIELDS: list[FormField] = [
    *_fields("Chat model", "model", ModelConfig),
    *_fields("Compression model", "auxiliary.compression", AuxiliaryCompressionConfig),
    *_fields("Compaction", "compression", CompressionConfig),
]
_BY_KEY = {f.key: f for f in FIELDS}
_SECTION_KEYS = {"Chat model": "model", "Compression model": "auxiliary.compression", "Compaction": "compression"}


def shown(value: Any) -> str:
    """A config value as the text of an Input."""
    if value is None:
        return ""
    if isinstance(value, float):
        return str(int(value)) if value.is_integer() else repr(value)
    return str(value)


def parsed(field: FormField, text: str) -> Any:
    """The value an Input's text stands for; validation says if it is wrong."""
    if field.is_text:
        return text.strip()
    text = text.strip()
    if field.nullable and text.lower() in ("", "null", "none", "~"):
        return None
    for number in (int, float):
        try:
            return number(text)
        except ValueError:
            pass
    return text


class SettingsScreen(Screen[Config | None]):
    """Edit ``config_path``; dismisses with the saved ``Config``, or None when cancelled."""

    DEFAULT_CSS = """
    SettingsScreen {
        background: $background;
        #heading {
            height: 1;
            padding: 0 1;
            background: $panel;
            color: $text;
            text-style: bold;
        }
        #note { padding: 0 1; color: $text-muted; }
        #load-error { padding: 0 1; color: $error; display: none; }
        &.-load-error #load-error { display: block; }
        #form {
            height: 1fr;
            margin: 0 1;
            padding: 0 1;
            background: $surface;
            scrollbar-gutter: stable;
        }
        .section {
            margin-top: 1;
            color: $primary;
            text-style: bold;
        }
        .field {
            height: 1;
            &:focus-within { background: $boost; }
            &:focus-within .name { color: $accent; text-style: bold; }
            &.-invalid .name { color: $error; }
        }
        .name { width: 40; padding-right: 1; color: $text; }
        .control { width: 1fr; max-width: 48; height: 1; }
        .control Input, .control Select { width: 1fr; }
        .field Switch {
            height: 1;
            border: none;
            padding: 0;
            background: transparent;
            &:focus { border: none; background-tint: $foreground 5%; }
        }
        .desc {
            width: 1fr;
            padding-left: 2;
            color: $text-muted;
            display: none;
            text-wrap: nowrap;
            text-overflow: ellipsis;
        }
        &.-wide .desc { display: block; }
        .error { padding-left: 40; color: $error; display: none; height: auto; }
        .error.-shown { display: block; }
        #help {
            height: 2;
            padding: 0 1;
            margin: 0 1;
            color: $text-muted;
        }
        #bar { height: 1; padding: 0 1; }
        #outcome { width: 1fr; color: $error; }
        #bar Button { margin-left: 2; }
    }
    """

    HORIZONTAL_BREAKPOINTS = [(0, "-narrow"), (120, "-wide")]

    BINDINGS = [
        Binding("ctrl+s", "save", "Save"),
        Binding("escape", "cancel", "Cancel"),
    ]

    def __init__(self, config_path: Path) -> None:
        super().__init__()
        self.config_path = Path(config_path)
        self.load_error: ConfigError | None = None
        try:
            self.config = load_config(self.config_path)
        except ConfigError as exc:
            self.load_error = exc
            self.config = Config()

    # --- layout ----------------------------------------------------------------------
    def compose(self) -> ComposeResult:
        yield Static(f"Settings · {self.config_path}", id="heading", markup=False)
        yield Static(
            "Save edits only the changed values; your comments in config.yaml are kept.",
            id="note", markup=False,
        )
        yield Static(self._load_error_text(), id="load-error", markup=False)
        with VerticalScroll(id="form"):
            section = None
            for field in FIELDS:
                if field.section != section:
                    section = field.section
                    yield Static(f"{section}  ({_SECTION_KEYS[section]})", classes="section", markup=False)
                with Horizontal(classes="field", id=f"row-{field.widget_id}"):
                    yield Label(field.name, classes="name", markup=False)
                    with Horizontal(classes="control"):
                        yield self._widget(field)
                    yield Static(field.info.description or "", classes="desc", markup=False)
                yield Static("", classes="error", id=f"error-{field.widget_id}", markup=False)
            yield Static("MCP servers  (mcp_servers)", classes="section", markup=False)
            yield McpServersForm(self.config.mcp_servers, id="mcp-servers")
        yield Static("", id="help", markup=False)
        with Horizontal(id="bar"):
            yield Static("", id="outcome", markup=False)
            yield Button("Cancel", id="cancel", compact=True)
            yield Button("Save", id="save", variant="primary", compact=True)
        yield Footer()

    def _widget(self, field: FormField) -> Widget:
        value = value_at(self.config, field.key)
        if field.choices:
            return Select([(c, c) for c in field.choices], value=value, allow_blank=False,
                          id=field.widget_id, compact=True)
        if field.is_bool:
            return Switch(value, id=field.widget_id, animate=False)
        placeholder = "null = automatic" if field.nullable else ('""' if field.is_text else "")
        return Input(shown(value), placeholder=placeholder, id=field.widget_id, compact=True)

    def _load_error_text(self) -> str:
        if self.load_error is None:
            return ""
        try:
            refuse_foreign_config(self.config_path)
        except ConfigError as exc:
            # What does not load comes first (its line); then why Save is refused.
            return (f"{self.load_error} — {exc} — Save is refused: hermes-tui never rewrites a file "
                    "that is not its own.")
        return (f"{self.load_error} — the form shows the defaults; Save replaces the file "
                f"(the old one is kept beside it as {self.config_path.name}.<time>.bak).")

    def on_mount(self) -> None:
        self.set_class(self.load_error is not None, "-load-error")
        self.query_one(f"#{FIELDS[0].widget_id}").focus()

    # --- reading the form --------------------------------------------------------------
    def form_value(self, field: FormField) -> Any:
        widget = self.query_one(f"#{field.widget_id}")
        if isinstance(widget, Input):
            return parsed(field, widget.value)
        assert isinstance(widget, (Select, Switch))  # the other controls _widget makes
        return widget.value

    def changes(self) -> dict[str, Any]:
        """Dotted keys whose form value differs from the loaded config."""
        out = {}
        for field in FIELDS:
            value = self.form_value(field)
            before = value_at(self.config, field.key)
            if value != before:
                out[field.key] = value
        out.update(self.query_one(McpServersForm).changes())
        return out

    @property
    def dirty(self) -> bool:
        return bool(self.changes())

    # --- events --------------------------------------------------------------------
    def on_descendant_focus(self, event: events.DescendantFocus) -> None:
        widget_id = getattr(event.widget, "id", None) or ""
        field = _BY_KEY.get(widget_id.replace("--", "."))
        if field is not None:
            self.query_one("#help", Static).update(f"{field.key}: {field.help}")

    @on(Input.Changed)
    @on(Switch.Changed)
    @on(Select.Changed)
    @on(McpServersForm.Changed)
    def _edited(self) -> None:
        self.query_one("#heading", Static).update(
            f"Settings · {self.config_path}" + ("  · modified" if self.dirty else "")
        )

    @on(Button.Pressed, "#save")
    def _save_pressed(self) -> None:
        self.action_save()

    @on(Button.Pressed, "#cancel")
    def _cancel_pressed(self) -> None:
        self.action_cancel()

    # --- actions ---------------------------------------------------------------------
    def action_save(self) -> None:
        self._clear_errors()
        changes = self.changes()
        existed = self.config_path.exists()
        try:
            apply_changes(self.config, changes)  # the same rules as loading the file
            result = save_changes(self.config_path, changes, base=self.config)
        except ConfigError as exc:
            self._show_errors(exc)
            return
        if result.backup is not None:
            self.notify(f"The old file is kept as {result.backup}", title="config.yaml replaced")
        elif not result.kept_layout and existed and changes:
            self.notify(
                "config.yaml was rewritten from the commented template; comments of your own in it were not kept.",
                title="Saved",
            )
        self.dismiss(result.config)

    def action_cancel(self) -> None:
        changes = self.changes()
        if not changes:
            self.dismiss(None)
            return

        def answered(discard: bool | None) -> None:
            if discard:
                self.dismiss(None)

        keys = ", ".join(changes)
        self.app.push_screen(
            ConfirmDialog(
                "Discard your unsaved changes?", f"Changed: {keys}",
                confirm="Discard", cancel="Keep editing", title="Unsaved changes", danger=True,
            ),
            answered,
        )

    # --- errors --------------------------------------------------------------------
    def _clear_errors(self) -> None:
        for error in self.query(".error"):
            error.remove_class("-shown")
        for row in self.query(".field.-invalid"):
            row.remove_class("-invalid")
        self.query_one("#outcome", Static).update("")

    def _show_errors(self, exc: ConfigError) -> None:
        first: Widget | None = None
        for problem in exc.problems:
            field = _BY_KEY.get(problem.key or "")
            if field is None:
                continue
            error = self.query_one(f"#error-{field.widget_id}", Static)
            error.update(problem.message)
            error.add_class("-shown")
            self.query_one(f"#row-{field.widget_id}").add_class("-invalid")
            if first is None:
                first = self.query_one(f"#{field.widget_id}")
        self.query_one("#outcome", Static).update(f"Not saved: {exc}")
        self.notify(str(exc), title="Not saved", severity="error")
        if first is not None:
            first.focus()
            self.query_one("#form", VerticalScroll).scroll_to_widget(first)


def open_screen(host: ScreenHost) -> SettingsScreen:
    """What ``/settings`` opens (``commands.SlashCommand.screen``)."""
    return SettingsScreen(host.config_path)
