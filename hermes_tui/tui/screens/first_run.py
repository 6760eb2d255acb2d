"""The first-run screen: what stops hermes-tui from starting, and the one step that fixes it.

Shown instead of the chat when there is no usable model, the endpoint is down, the
model is not downloaded, or the config or the session database cannot be read. It
never shows a traceback: ``tui.problems.first_run_problem`` turns the exception into two
plain sentences. Each button dismisses the screen with its action (``"settings"``,
``"models"``, ``"retry"``, ``"quit"``); the app decides what that means.
"""

from __future__ import annotations

from textual import on
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical
from textual.screen import Screen
from textual.widgets import Button, Static

from hermes_tui.tui.problems import QUIT, SETTINGS, first_run_actions, first_run_problem

__all__ = ["FirstRunScreen", "first_run_actions", "first_run_problem"]


class FirstRunScreen(Screen[str]):
    """A calm full screen: the problem, the fix, and buttons that dismiss with an action.

    ``actions`` are ``(label, action)`` pairs; default: Open settings, Quit.
    """

    DEFAULT_CSS = """
    FirstRunScreen {
        align: center middle;
        background: $background;
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
    }
    """

    BINDINGS = [
        Binding("left", "app.focus_previous", "Previous", show=False),
        Binding("right", "app.focus_next", "Next", show=False),
        Binding("escape", "choose('quit')", "Quit", show=False),
    ]

    def __init__(self, problem: str, fix: str, actions: list[tuple[str, str]] | None = None) -> None:
        super().__init__()
        self.problem, self.fix = problem, fix
        self.actions = list(actions) if actions else [SETTINGS, QUIT]

    @classmethod
    def for_error(cls, exc: BaseException) -> FirstRunScreen:
        """The screen for an exception, with the actions that can fix it."""
        problem, fix = first_run_problem(exc)
        return cls(problem, fix, first_run_actions(exc))

    def compose(self) -> ComposeResult:
        with Vertical(id="panel") as panel:
            panel.border_title = "hermes-tui"
            yield Static(self.problem, id="problem", markup=False)
            yield Static("To fix it", id="fix-label")
            yield Static(self.fix, id="fix", markup=False)
            with Horizontal(id="actions"):
                for index, (label, _) in enumerate(self.actions):
                    yield Button(label, id=f"action-{index}", variant="primary" if index == 0 else "default")
            yield Static("Tab or ←/→ to move, Enter to choose.", id="hint")

    def on_mount(self) -> None:
        self.query_one("#action-0", Button).focus()

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
