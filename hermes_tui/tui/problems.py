"""What went wrong, in two plain sentences, and the actions that fix it (plain data; no Textual).

``first_run_problem`` turns an exception (config, store, provider, a failed model call)
into ``(problem, fix)``; ``first_run_actions`` names the buttons that can fix it
(``"settings"``, ``"models"``, ``"retry"``, ``"quit"``). The first-run screen shows them,
and the chat screen uses the same sentences when a reply fails.
"""

from __future__ import annotations

from hermes_tui.chat.client import CANCELLED, ChatError
from hermes_tui.compaction.summarizer import SummarizerError
from hermes_tui.config import ConfigError
from hermes_tui.config.provider_registry import CHAT, COMPRESSION, SECTIONS, providers
from hermes_tui.core.failures import (
    CONTEXT_EXCEEDED,
    HTTP_4XX,
    HTTP_5XX,
    MALFORMED,
    REFUSED,
    TIMEOUT,
    UNAVAILABLE,
)
from hermes_tui.hub.resolve import NOT_A_MODEL_FOLDER, NOT_DOWNLOADED, ModelUnavailable
from hermes_tui.providers.backend import ProviderError
from hermes_tui.store import SessionBusy, StoreError
from hermes_tui.store import db as store_db

SETTINGS = ("Open settings", "settings")
MODELS = ("Open models", "models")
RETRY = ("Try again", "retry")
QUIT = ("Quit", "quit")


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
        return _store_problem(exc.kind, message)
    if (missing := _missing_model_of(exc)) is not None and not isinstance(exc, (ChatError, SummarizerError)):
        return _missing_model(missing)
    if isinstance(exc, ProviderError):
        return _provider_problem(exc, message)
    if isinstance(exc, (ChatError, SummarizerError)):
        return _call_problem(exc, message, compression=isinstance(exc, SummarizerError))
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
    if kind == UNAVAILABLE or _missing_model_of(exc) is not None:
        return [MODELS, SETTINGS, QUIT]
    if isinstance(exc, ProviderError):
        return [SETTINGS, MODELS, QUIT]
    if kind in (REFUSED, TIMEOUT, HTTP_5XX, CANCELLED):
        return [RETRY, SETTINGS, QUIT]
    return [SETTINGS, QUIT]


# --------------------------------------------------------------------------- internals


def _one_line(text: str) -> str:
    return " ".join(text.split())


def _missing_model_of(exc: BaseException) -> ModelUnavailable | None:
    """The model-not-here error ``exc`` is, or was raised from (a provider or a call that
    could not load its model), if any."""
    seen: BaseException | None = exc
    for _ in range(4):  # a short chain: a call, a provider, the model
        if seen is None:
            return None
        if isinstance(seen, ModelUnavailable):
            return seen
        seen = seen.__cause__
    return None


def _missing_model(exc: ModelUnavailable) -> tuple[str, str]:
    fix = "Open the models screen to download it, or choose a model you have in settings."
    if exc.kind == NOT_DOWNLOADED:
        return f"Model {exc.model} is not downloaded", fix
    if exc.kind == NOT_A_MODEL_FOLDER:
        return f"The model folder {exc.model} is not an MLX model", fix
    return f"The model cannot be loaded: {_one_line(str(exc))}", fix


def _provider_problem(exc: ProviderError, message: str) -> tuple[str, str]:
    if exc.key and exc.key.startswith(SECTIONS[COMPRESSION]):
        return "No compression model is configured", f"Open settings and set the compression model: {_ways(COMPRESSION)}"
    if exc.key and exc.key.startswith(SECTIONS[CHAT] + "."):
        return "No chat model is configured", f"Open settings and choose the chat model: {_ways(CHAT, servers=True)}"
    return "The model setup is incomplete", message[:1].upper() + message[1:]


def _ways(role: str, *, servers: bool = False) -> str:
    """What can be set up for ``role``, from the provider registry: an endpoint first (any machine
    can use one; MLX runs models well only on Apple silicon), then the providers needing no model.
    ``servers``: name the servers an endpoint provider is used with."""
    ways = sorted((p for p in providers(role) if p.needs_model), key=lambda p: not p.endpoint)
    text = ", or ".join(f"{p.setup} ({p.servers})" if servers and p.servers else p.setup for p in ways) + "."
    return text + "".join(f" Provider {p.name} needs no model at all." for p in providers(role) if not p.needs_model)


def _call_problem(exc: ChatError | SummarizerError, message: str, *, compression: bool) -> tuple[str, str]:
    kind, url = exc.kind, exc.endpoint
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
    if kind == CONTEXT_EXCEEDED:
        if not url:  # the guard's own: nothing was sent, and the message says what to do
            return message.rstrip("."), "Start a new session (Ctrl+N) or choose a model with a larger window (/model)."
        return (
            f"{server} refused the request as too large for the model's context window (a compacted retry "
            f"too, when compaction is on). The server said: {message.split('The server said: ', 1)[-1]}",
            "Start a new session (Ctrl+N), choose a model with a larger window (/model), or start the server "
            "with a larger context (llama-server -c, vLLM --max-model-len, Ollama num_ctx, LM Studio's context length).",
        )
    if kind == HTTP_4XX:
        fix = exc.fix or f"check {section}.model and {section}.api_key_env"
        return f"{server} rejected the request", f"{fix[:1].upper()}{fix[1:]} in settings."
    if kind == HTTP_5XX:
        return f"{server} failed with a server error", "Check the server's log, restart it, and try again."
    if kind == MALFORMED:
        return (
            f"{server} did not answer like an OpenAI-compatible server",
            f"Check {section}.base_url in settings: it usually ends in /v1.",
        )
    if kind == UNAVAILABLE:
        if (missing := _missing_model_of(exc)) is not None:
            return _missing_model(missing)
        return (
            f"The {'compression' if compression else 'chat'} model cannot run here: {message}",
            "Choose another model in settings, or download one in the models screen.",
        )
    if kind == CANCELLED:
        return "The request was cancelled", "Try again."
    return f"{server} failed: {message}", "Try again, or check the settings."


def _sentence(text: str) -> str:
    return text[:1].upper() + text[1:]


def _store_problem(kind: str, message: str) -> tuple[str, str]:
    if kind == store_db.LOCKED:
        return (
            "The session database is in use by another hermes-tui",
            "Close the other hermes-tui, then start this one again.",
        )
    if kind == store_db.FOREIGN:
        return (
            f"The session database belongs to another program: {message}",
            "It was left untouched. Set HERMES_TUI_HOME to a folder of hermes-tui's own and start again.",
        )
    if kind == store_db.CANNOT_CREATE:
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
