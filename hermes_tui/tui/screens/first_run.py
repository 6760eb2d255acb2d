"""The first-run screen: what stops hermes-tui from starting, and the one step that fixes it.

Shown instead of the chat when there is no usable model, the endpoint is down, the
model is not downloaded, or the config or the session database cannot be read. It
never shows a traceback: ``first_run_problem`` turns the exception into two plain
sentences. Each button dismisses the screen with its action (``"settings"``,
``"models"``, ``"retry"``, ``"quit"``); the app decides what that means.
"""

from __future__ import annotations

import re

from textual import on
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical
from textual.screen import Screen
from textual.widgets import Button, Static

from hermes_tui.chat.client import CANCELLED, ChatError
from hermes_tui.config import ConfigError
from hermes_tui.mlx_runtime import ModelUnavailable
from hermes_tui.store import SessionBusy, StoreError
from hermes_tui.summarizers.base import HTTP_4XX, HTTP_5XX, MALFORMED, REFUSED, TIMEOUT, UNAVAILABLE, SummarizerError
from hermes_tui.summarizers.select import ProviderError

__all__ = ["FirstRunScreen", "first_run_actions", "first_run_problem"]

SETTINGS = ("Open settings", "settings")
MODELS = ("Open models", "models")
RETRY = ("Try again", "retry")
QUIT = ("Quit", "quit")

_URL = re.compile(r"https?://[^\s,;()]+")
_MISSING_MODEL = re.compile(r"model (\S+) is not in the local Hugging Face cache")
_NO_FOLDER = re.compile(r"^(.+?): (no such model folder|not an MLX model folder)")


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
    def for_error(cls, exc: BaseException) -> "FirstRunScreen":
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


def first_run_problem(exc: BaseException) -> tuple[str, str]:
    """``(problem, fix)``: what is wrong and the one step that fixes it, as plain sentences."""
    message = _one_line(str(exc))
    if isinstance(exc, ConfigError):
        where = exc.path or "config.yaml"
        return (
            f"The settings file has a problem: {message}",
            f"Fix that line in {where} with a text editor, or open settings to replace the file "
            "with valid values (the old one is kept as a backup copy).",
        )
    if isinstance(exc, SessionBusy):  # before StoreError: the database is fine
        return _sentence(exc.problem), _sentence(exc.advice) + "."
    if isinstance(exc, StoreError):
        return _store_problem(message)
    if isinstance(exc, ModelUnavailable):
        return _missing_model(message)
    if isinstance(exc, ProviderError):
        return _provider_problem(message)
    if isinstance(exc, (ChatError, SummarizerError)):
        return _call_problem(exc.kind, message, compression=isinstance(exc, SummarizerError))
    what = f"{type(exc).__name__}: {message}" if message else type(exc).__name__
    return (
        f"Something went wrong: {what}",
        "Try again; if it keeps happening, the log (hermes-tui report) says more.",
    )


def first_run_actions(exc: BaseException) -> list[tuple[str, str]]:
    """The buttons that make sense for ``exc``; the first one is the likely fix."""
    kind = getattr(exc, "kind", None)
    if isinstance(exc, StoreError):
        return [QUIT]
    if isinstance(exc, ModelUnavailable) or kind == UNAVAILABLE or _is_missing_model(str(exc)):
        return [MODELS, SETTINGS, QUIT]
    if isinstance(exc, ProviderError):
        return [SETTINGS, MODELS, QUIT]
    if kind in (REFUSED, TIMEOUT, HTTP_5XX, CANCELLED):
        return [RETRY, SETTINGS, QUIT]
    return [SETTINGS, QUIT]


# --------------------------------------------------------------------------- internals


def _one_line(text: str) -> str:
    return " ".join(text.split())


def _endpoint(message: str) -> str:
    match = _URL.search(message)
    return match.group(0).rstrip(".:") if match else ""


def _is_missing_model(message: str) -> bool:
    return bool(_MISSING_MODEL.search(message) or _NO_FOLDER.search(message))


def _missing_model(message: str) -> tuple[str, str]:
    fix = "Open the models screen to download it, or choose a model you have in settings."
    if match := _MISSING_MODEL.search(message):
        return f"Model {match.group(1)} is not downloaded", fix
    if match := _NO_FOLDER.search(message):
        return f"The model folder {match.group(1)} is not an MLX model", fix
    return f"The model cannot be loaded: {message}", fix


def _provider_problem(message: str) -> tuple[str, str]:
    if _is_missing_model(message):
        return _missing_model(message)
    if "auxiliary.compression" in message:
        return (
            "No compression model is configured",
            "Open settings and set the compression model: the base URL and model name of an "
            "OpenAI-compatible server, or an MLX model. Provider extractive needs no model at all.",
        )
    if "model." in message or "usable chat model" in message:
        return (
            "No chat model is configured",
            "Open settings and choose the chat model: the base URL and model name of an "
            "OpenAI-compatible server (llama.cpp, Ollama, LM Studio, mlx_lm.server), or an MLX model.",
        )
    return "The model setup is incomplete", message[:1].upper() + message[1:]


def _call_problem(kind: str, message: str, *, compression: bool) -> tuple[str, str]:
    url = _endpoint(message)
    section = "auxiliary.compression" if compression else "model"
    server = f"The endpoint {url}" if url else ("The compression model" if compression else "The chat model")
    if kind == REFUSED:
        what = "refused the connection" if "refused" in message else "could not be reached"
        return (
            f"{server} {what}",
            f"Start the model server (mlx_lm.server, llama-server, ollama serve, ...) and try again, "
            f"or point {section}.base_url at a running one in settings.",
        )
    if kind == TIMEOUT:
        return (
            f"{server} did not answer in time",
            "Check that the server is running and not busy, then try again; a smaller model answers faster.",
        )
    if kind == HTTP_4XX:
        hint = re.search(r"\((check [^()]*(?:\([^()]*\)[^()]*)*|rate limited[^()]*)\)\s*$", message)
        fix = hint.group(1) if hint else f"check {section}.model and {section}.api_key_env"
        return f"{server} rejected the request", f"{fix[:1].upper()}{fix[1:]} in settings."
    if kind == HTTP_5XX:
        return f"{server} failed with a server error", "Check the server's log, restart it, and try again."
    if kind == MALFORMED:
        return (
            f"{server} did not answer like an OpenAI-compatible server",
            f"Check {section}.base_url in settings: it usually ends in /v1.",
        )
    if kind == UNAVAILABLE:
        if _is_missing_model(message):
            return _missing_model(message)
        return (
            f"The {'compression' if compression else 'chat'} model cannot run here: {message}",
            "Choose another model in settings, or download one in the models screen.",
        )
    if kind == CANCELLED:
        return "The request was cancelled", "Try again."
    return f"{server} failed: {message}", "Try again, or check the settings."


def _sentence(text: str) -> str:
    return text[:1].upper() + text[1:]


def _store_problem(message: str) -> tuple[str, str]:
    if "locked" in message:
        return (
            "The session database is in use by another hermes-tui",
            "Close the other hermes-tui, then start this one again.",
        )
    if "not a hermes-tui database" in message or "Hermes Agent's home" in message:
        return (
            f"The session database belongs to another program: {message}",
            "It was left untouched. Set HERMES_TUI_HOME to a folder of hermes-tui's own and start again.",
        )
    if "cannot create" in message:
        return (
            f"The session database cannot be created: {message}",
            "Make the folder writable, or set HERMES_TUI_HOME to another folder.",
        )
    detail = message.split(". It was left untouched")[0]
    return (
        f"The session database is unreadable: {detail}",
        "It was left untouched. Move it aside (or restore a backup) and start again, "
        "or set HERMES_TUI_HOME to use another folder.",
    )
