"""The first-run screen: what stops hermes-tui from starting, and the one step that fixes it.

Shown instead of the chat when there is no usable model, the endpoint is down, the
model is not downloaded, or the config or the session database cannot be read. It
never shows a traceback: ``tui.problems.first_run_problem`` turns the exception into two
plain sentences. Each button dismisses the screen with its action (``"settings"``,
``"models"``, ``"retry"``, ``"quit"``); the app decides what that means.

With a ``Setup`` (no usable chat model yet) it also offers the ways to one
(``first_run_setup``): where MLX has a GPU, the catalog's recommended chat and
compression models to download; elsewhere, the model servers answering on this machine
and an MLX model on the CPU; on both, MLX models already on disk; and, when Hermes Agent's config is found, its compression
settings. Choosing one saves the settings and dismisses with ``"reload"``: the app reads
config.yaml again.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from textual import on
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, VerticalScroll
from textual.screen import Screen
from textual.widgets import Button, Static

from hermes_tui.config import Config, ConfigError
from hermes_tui.tui.problems import QUIT, SETTINGS, first_run_actions, first_run_problem
from hermes_tui.tui.screens.first_run_setup import HermesSettings, SetupChosen, SetupDone
from hermes_tui.util.logs import get_logger

__all__ = ["FirstRunScreen", "Setup", "first_run_actions", "first_run_problem"]

log = get_logger("tui")
RELOAD = "reload"


@dataclass(frozen=True)
class Setup:
    """What the setup offers need: where our config is, what it holds now, which ports to probe."""

    config_path: Path
    config: Config
    server_ports: tuple[int, ...] | None = None  # None: the usual ports of the usual servers


class FirstRunScreen(Screen[str]):
    """A calm full screen: the problem, the fix, and buttons that dismiss with an action.

    ``actions`` are ``(label, action)`` pairs; default: Open settings, Quit.
    """

    DEFAULT_CSS = """
    FirstRunScreen {
        align: center middle;
        background: $background;
        &.-setup #panel { width: 100; }
        #panel {
            width: 76;
            max-width: 100%;
            height: auto;
            max-height: 100%;
            padding: 1 3;
            background: $surface;
            border: round $primary 50%;
            border-title-color: $text-muted;
        }
        #problem {
            text-style: bold;
            color: $text;
            padding-left: 1;
            border-left: thick $warning;
        }
        #fix-label { margin-top: 1; color: $text-muted; }
        #fix { color: $text; }
        #actions { height: auto; margin-top: 1; }
        #actions Button { margin-right: 2; }
        #hint { margin-top: 1; color: $text-muted; }
        .setup-section { height: auto; margin-top: 1; padding: 0 1; border-left: thick $primary 50%; }
        .setup-title { text-style: bold; color: $text; }
        .setup-line, #hermes-lines, #hermes-skipped, #download-figures { color: $text-muted; }
        .setup-buttons, #server-list, #disk-list { height: auto; }
        .setup-buttons Button, #server-list Button, #disk-list Button { margin-right: 2; }
        #download-row { height: 1; }
        #download-bar { width: auto; margin-right: 2; }
        .setup-status { color: $text-muted; }
        .setup-status.-error { color: $text-error; }
    }
    """

    BINDINGS = [
        Binding("left", "app.focus_previous", "Previous", show=False),
        Binding("right", "app.focus_next", "Next", show=False),
        Binding("escape", "choose('quit')", "Quit", show=False),
    ]

    def __init__(self, problem: str, fix: str, actions: list[tuple[str, str]] | None = None, *,
                 setup: Setup | None = None) -> None:
        super().__init__()
        self.problem, self.fix = problem, fix
        self.actions = list(actions) if actions else [SETTINGS, QUIT]
        self.setup = setup
        self.set_class(setup is not None, "-setup")

    @classmethod
    def for_error(cls, exc: BaseException, setup: Setup | None = None) -> FirstRunScreen:
        """The screen for an exception, with the actions that can fix it (and the setup offers)."""
        problem, fix = first_run_problem(exc)
        return cls(problem, fix, first_run_actions(exc), setup=setup)

    def compose(self) -> ComposeResult:
        with VerticalScroll(id="panel") as panel:
            panel.border_title = "hermes-tui"
            yield Static(self.problem, id="problem", markup=False)
            yield Static("To fix it", id="fix-label")
            yield Static(self.fix, id="fix", markup=False)
            if self.setup is not None:
                yield from setup_sections(self.setup)
            with Horizontal(id="actions"):
                for index, (label, _) in enumerate(self.actions):
                    yield Button(label, id=f"action-{index}", variant="primary" if index == 0 else "default")
            yield Static("Tab or ←/→ to move, Enter to choose.", id="hint")

    def on_mount(self) -> None:
        buttons = [b for b in self.query(Button) if not b.disabled and b.display]
        (buttons[0] if buttons else self.query_one("#action-0", Button)).focus()

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        if action == "choose":
            return parameters[0] in {value for _, value in self.actions}
        return True

    @on(Button.Pressed, "#actions Button")
    def _pressed(self, event: Button.Pressed) -> None:
        index = int((event.button.id or "action-0").removeprefix("action-"))
        self.dismiss(self.actions[index][1])

    def action_choose(self, action: str) -> None:
        self.dismiss(action)

    @on(SetupChosen)
    def _save(self, event: SetupChosen) -> None:
        from hermes_tui.config.edit import save_changes

        assert self.setup is not None
        try:
            save_changes(self.setup.config_path, event.changes, base=self.setup.config)
        except ConfigError as exc:
            self.notify(str(exc), title="Settings not saved", severity="error", timeout=15)
            return
        log.info("first run: %s", event.note)
        if not event.done:  # more to choose here (Hermes' settings do not choose a chat model)
            for section in self.query(HermesSettings):
                section.taken(f"Saved: {event.note}.")
            return
        self.notify(event.note, title="Ready")
        self.dismiss(RELOAD)

    @on(SetupDone)
    def _done(self, event: SetupDone) -> None:
        log.info("first run: %s", event.note)
        self.notify(event.note, title="Ready", timeout=10)
        self.dismiss(RELOAD)


def setup_sections(setup: Setup) -> ComposeResult:
    """The ways to a working chat on this machine, most likely first."""
    from hermes_tui import hub
    from hermes_tui.hermes_agent.config import read_hermes_offer
    from hermes_tui.hub.hf import offline as hub_offline
    from hermes_tui.providers import selection
    from hermes_tui.tui.screens.first_run_setup import LocalServers, ModelsOnDisk, RecommendedModels

    offer = read_hermes_offer(setup.config)
    if offer is not None:
        yield HermesSettings(offer, id="hermes")
    chat: hub.CatalogModel | None
    compression: hub.CatalogModel | None
    try:
        catalog = hub.load_catalog()
        chat, compression = hub.default_chat_model(catalog), hub.default_compression_model(catalog)
    except hub.CatalogError as exc:
        log.warning("no recommended models: %s", exc)
        chat = compression = None
    offline = hub_offline()
    aux = setup.config.auxiliary.compression
    compression_unset = aux.provider == "auto" and not aux.model and not aux.base_url
    if selection.gpu_available():
        if chat is not None and compression is not None:
            picks = [("chat", chat)] + ([("compression", compression)] if compression_unset else [])
            yield RecommendedModels(picks, setup.config_path, title="Recommended for this Mac: run both in-process",
                                    offline=offline, id="recommended")
        yield ModelsOnDisk(setup.config_path, cpu=False, id="on-disk")
        yield LocalServers(setup.server_ports, setup.config_path, offer_passes=False, id="servers")
        return
    yield LocalServers(setup.server_ports, setup.config_path, offer_passes=True, id="servers")
    yield ModelsOnDisk(setup.config_path, cpu=True, id="on-disk")
    if chat is not None:
        yield RecommendedModels([("chat", chat)], setup.config_path, offline=offline, id="cpu",
                                title="Or run an MLX model on this CPU: it works, slowly (a few words a second)")
