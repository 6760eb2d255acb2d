"""``/model`` without a name: pick the chat model from a list.

Two groups: the MLX models on this machine (they run in-process) and the models the
configured endpoint (``model.base_url``) lists. Both are read in thread workers: the
local scan walks the Hugging Face cache, and an endpoint may take its time to answer
(or never), so the dialog opens at once and fills in. The model in use is marked.
Enter chooses (dismisses with the ``ModelChoice``); Escape dismisses with None.
"""

from __future__ import annotations

from pathlib import Path

from rich.text import Text
from textual import on, work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical
from textual.message import Message as UIMessage
from textual.screen import ModalScreen
from textual.widgets import OptionList, Static
from textual.widgets.option_list import Option

from hermes_tui import hub
from hermes_tui.config import ModelConfig
from hermes_tui.providers.choices import ChoiceError, ModelChoice, endpoint_choices, local_choices
from hermes_tui.providers.selection import resolve_provider
from hermes_tui.util.terminal_text import visible_controls

__all__ = ["ModelPicker"]

IN_USE = "●"


class _Listed(UIMessage):
    """One group arrived: its choices, or why there are none."""

    def __init__(self, group: str, choices: list[ModelChoice], problem: str | None = None):
        super().__init__()
        self.group, self.choices, self.problem = group, choices, problem


class ModelPicker(ModalScreen[ModelChoice | None]):
    DEFAULT_CSS = """
    ModelPicker {
        align: center middle;
        #dialog {
            width: 90;
            max-width: 95%;
            height: auto;
            max-height: 90%;
            padding: 0 1;
            background: $surface;
            border: round $primary;
            border-title-color: $text;
        }
        #now { color: $text-muted; margin-bottom: 1; }
        #choices { height: auto; max-height: 20; }
        #hint { color: $text-muted; }
    }
    """

    BINDINGS = [Binding("escape", "cancel", "Cancel")]

    def __init__(self, cfg: ModelConfig, config_path: Path | None, now: str = "") -> None:
        super().__init__()
        self.cfg = cfg
        self.config_path = config_path
        self.now = now
        self.groups: dict[str, list[ModelChoice] | str | None] = {"local": None, "endpoint": None}
        self._by_id: dict[str, ModelChoice] = {}
        try:  # where the model in use runs: mlx_lm.server lists a local folder under its path too
            self._runs_on = resolve_provider(cfg, role="model") if cfg.model else None
        except Exception:  # noqa: BLE001 - a provider that cannot run marks nothing
            self._runs_on = None

    def compose(self) -> ComposeResult:
        with Vertical(id="dialog") as dialog:
            dialog.border_title = "Chat model"
            if self.now:
                yield Static(self.now, id="now", markup=False)
            yield OptionList(id="choices")
            yield Static("Enter uses the highlighted model (written to config.yaml) · Escape cancels",
                         id="hint", markup=False)

    def on_mount(self) -> None:
        self._fill()
        self.query_one(OptionList).focus()
        self._list_local()
        if self.cfg.base_url:
            self._list_endpoint()
        else:
            self.groups["endpoint"] = "no endpoint configured (model.base_url in /settings)"
            self._fill()

    # --- the two lists ---------------------------------------------------------------------
    @work(thread=True, group="model-picker", exit_on_error=False)
    def _list_local(self) -> None:
        try:
            self.post_message(_Listed("local", local_choices(self.config_path)))
        except (hub.HubError, OSError) as exc:
            self.post_message(_Listed("local", [], f"cannot list the local models: {exc}"))

    @work(thread=True, group="model-picker", exit_on_error=False)
    def _list_endpoint(self) -> None:
        try:
            self.post_message(_Listed("endpoint", endpoint_choices(self.cfg)))
        except ChoiceError as exc:
            self.post_message(_Listed("endpoint", [], str(exc)))

    @on(_Listed)
    def _listed(self, event: _Listed) -> None:
        self.groups[event.group] = event.problem if event.problem is not None else event.choices
        self._fill()

    def _fill(self) -> None:
        """Rebuild the list from what has arrived, keeping the highlighted model."""
        option_list = self.query_one(OptionList)
        keep = option_list.highlighted_option.id if option_list.highlighted_option else None
        self._by_id = {}
        options: list[Option | None] = []
        headings = {
            "local": "On this machine (MLX, in-process)",
            "endpoint": f"At {self.cfg.base_url}" if self.cfg.base_url else "At an endpoint",
        }
        for group, heading in headings.items():
            if options:
                options.append(None)
            options.append(Option(Text(heading, style="bold"), disabled=True))
            listed = self.groups[group]
            if listed is None:
                options.append(Option(Text("  looking…", style="italic"), disabled=True))
            elif isinstance(listed, str):
                options.append(Option(Text(visible_controls(f"  {listed}")), disabled=True))  # why listing failed: the server's words
            elif not listed:
                empty = "nothing here yet: /models downloads MLX models" if group == "local" else "no models listed"
                options.append(Option(Text(f"  {empty}"), disabled=True))
            for index, choice in enumerate(listed if isinstance(listed, list) else []):
                option_id = f"{group}-{index}"
                self._by_id[option_id] = choice
                options.append(Option(self._prompt(choice), id=option_id))
        option_list.set_options(options)
        target = keep if keep in self._by_id else self._current_id()
        if target is None and self._by_id:
            target = next(iter(self._by_id))
        if target is not None:
            option_list.highlighted = option_list.get_option_index(target)

    def _in_use(self, choice: ModelChoice) -> bool:
        return self.cfg.model in (choice.value, choice.label) and choice.provider == self._runs_on

    def _current_id(self) -> str | None:
        return next((i for i, c in self._by_id.items() if self._in_use(c)), None)

    def _prompt(self, choice: ModelChoice) -> Text:
        text = Text(f"{IN_USE} " if self._in_use(choice) else "  ")
        text.append(visible_controls(choice.label))  # a model's name, as the server lists it
        if choice.detail and choice.detail != self.cfg.base_url:
            text.append(f"  {visible_controls(choice.detail)}", style="dim")
        return text

    # --- choosing --------------------------------------------------------------------------
    @on(OptionList.OptionSelected)
    def _chosen(self, event: OptionList.OptionSelected) -> None:
        event.stop()
        choice = self._by_id.get(event.option_id or "")
        if choice is not None:
            self.dismiss(choice)

    def action_cancel(self) -> None:
        self.dismiss(None)
