"""Choosing a model for a role, and what choosing it changes in config.yaml.

Chat models live in two places: on this machine (MLX models in the Hugging Face cache
and the models folder, :mod:`hermes_tui.hub`; they run in-process) and at the configured
endpoint (whatever ``GET {model.base_url}/models`` lists). ``/model`` offers both
(``local_choices``, ``endpoint_choices``, ``find_choice``); choosing one sets ``model.model``,
and ``model.provider`` only when the provider as configured would not run the choice where it
lives (a local model under ``openai-api``, an endpoint model under ``mlx``, or ``auto``
resolving to the other side): ``changes_for``. It writes nothing: the app writes the changes
through ``config.edit`` and rebuilds its clients.

``use_model`` makes a model on this machine the chat or the compression model (the models
screen, the first-run screen, ``hermes-tui models use``) and writes config.yaml, switching the
role's provider when the one configured could not run it.

Nothing here touches the UI.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from hermes_tui import hub
from hermes_tui.chat.client import ChatError
from hermes_tui.config import ModelConfig
from hermes_tui.hub.catalog import ROLES
from hermes_tui.hub.errors import HubError
from hermes_tui.hub.resolve import ModelUnavailable, imported_model, resolve_model_path
from hermes_tui.providers import selection
from hermes_tui.providers.backend import ProviderError, resolve_api_key
from hermes_tui.providers.selection import resolve_provider
from hermes_tui.util import paths
from hermes_tui.util.errors import AppError

LOCAL, ENDPOINT = "local", "endpoint"
LIST_TIMEOUT_S = 5.0  # asking an endpoint for its models: a picker must not hang on it


class ChoiceError(AppError):
    """The model asked for is not one that can be chosen; the message says why and what to do."""


@dataclass(frozen=True)
class ModelChoice:
    value: str      # what model.model becomes
    where: str      # LOCAL (in-process MLX) or ENDPOINT (model.base_url)
    label: str      # how the picker names it
    detail: str = ""

    @property
    def provider(self) -> str:
        """The provider that runs this choice where it lives."""
        return "mlx" if self.where == LOCAL else "openai-api"


def local_choices(config_path: Path | None = None) -> list[ModelChoice]:
    """The complete MLX models on this machine (partial downloads cannot run)."""
    from hermes_tui.hub.units import format_bytes

    choices = []
    for model in hub.local_models(config_path):
        if not model.complete:
            continue
        where = "HF cache" if model.source == "hf-cache" else "models folder"
        value = model.name if model.source == "hf-cache" else str(model.path)
        choices.append(ModelChoice(value, LOCAL, model.name, f"{format_bytes(model.size_bytes)} · {where}"))
    return choices


def endpoint_choices(cfg: ModelConfig, *, timeout: float = LIST_TIMEOUT_S) -> list[ModelChoice]:
    """What the configured endpoint serves. Raises ChoiceError (no endpoint, or it failed)."""
    if not cfg.base_url:
        raise ChoiceError("no endpoint is configured (model.base_url)")
    from hermes_tui.providers.openai.chat import list_models

    try:
        names = list_models(cfg.base_url, api_key=resolve_api_key(cfg.api_key_env), timeout=timeout)
    except ChatError as exc:
        raise ChoiceError(str(exc)) from None
    return [ModelChoice(name, ENDPOINT, name, cfg.base_url) for name in names]


def find_choice(name: str, cfg: ModelConfig, config_path: Path | None = None) -> ModelChoice:
    """``/model NAME``: a model on this machine first (by its name, repo id or folder), else
    one the endpoint lists. Raises ChoiceError saying where it looked."""
    name = name.strip()
    try:
        local = local_choices(config_path)
    except (hub.HubError, OSError):
        local = []  # the folder below still resolves a model named by its path or repo id
    for choice in local:
        if name in (choice.label, choice.value):
            return choice
    try:
        path = resolve_model_path(name)  # a folder anywhere, or a repo id in the HF cache
    except ModelUnavailable as exc:
        local_problem = str(exc)
    else:
        value = str(path.resolve()) if Path(name).expanduser().exists() else name
        return ModelChoice(value, LOCAL, name, str(path))
    if not cfg.base_url:
        raise ChoiceError(f"{local_problem}; /models downloads MLX models, or set model.base_url to use an endpoint's")
    try:
        served = endpoint_choices(cfg)
    except ChoiceError as exc:
        raise ChoiceError(f"{name} is not a model on this machine, and {exc}") from None
    for choice in served:
        if choice.value == name:
            return choice
    listed = ", ".join(c.value for c in served[:5]) + (", …" if len(served) > 5 else "")
    raise ChoiceError(
        f"{name} is not a model on this machine, and {cfg.base_url} does not serve it "
        f"(it serves: {listed or 'nothing'})"
    )


def changes_for(choice: ModelChoice, cfg: ModelConfig) -> dict[str, Any]:
    """The dotted config changes that make ``choice`` the chat model."""
    changes: dict[str, Any] = {"model.model": choice.value}
    try:
        runs_on = resolve_provider(cfg.model_copy(update={"model": choice.value}), role="model")
    except (ProviderError, ModelUnavailable):
        runs_on = None
    if runs_on != choice.provider:
        changes["model.provider"] = choice.provider
    return changes


# --------------------------------------------------------------------------- use


@dataclass(frozen=True)
class UseResult:
    name: str
    role: str
    value: str                 # what config.yaml now holds as the role's model
    provider: str              # the role's provider after the change
    provider_changed: bool
    note: str = ""             # one line for the user, e.g. why the provider stays


def _config_value(name: str) -> str:
    """What to write in config for ``name``: repo ids stay; folders become absolute paths."""
    imported = imported_model(name)
    if imported is not None:
        return str(imported)
    candidate = Path(name).expanduser()
    if candidate.exists():
        return str(candidate.resolve())
    return name


def use_model(name: str, role: str, config_path: Path | None = None) -> UseResult:
    """Make ``name`` the compression or chat model in config.yaml.

    The model must resolve here (a local MLX folder, or a repo id in the HF cache).
    The provider: ``mlx`` stays. ``extractive`` (compression) and ``openai-api`` with no
    ``base_url`` become ``auto`` — the user picked a local model and there is nowhere else
    it could run — and ``auto`` becomes ``mlx`` where MLX has no GPU (``auto`` would not
    run it there; the note says it will be slow). ``openai-api`` with a ``base_url`` stays: the
    endpoint (e.g. mlx_lm.server) may serve this very model; the note says how to run it
    in-process instead.

    Only the changed keys are written (``config.edit.save_changes``, as the settings
    screen does): the user's comments and layout stay. A config.yaml that does not load
    is an error here (ConfigError), never replaced.
    """
    from hermes_tui.config import load_config
    from hermes_tui.config.edit import save_changes

    if role not in ROLES:
        raise HubError(f"role must be {' or '.join(ROLES)}, got {role!r}")
    value = _config_value(name)
    try:
        resolve_model_path(value)
    except ModelUnavailable as exc:
        raise HubError(str(exc)) from None
    path = Path(config_path) if config_path is not None else paths.config_path()
    config = load_config(path)
    prefix = "model" if role == "chat" else "auxiliary.compression"
    section = config.model if role == "chat" else config.auxiliary.compression
    provider: str = section.provider
    note = ""
    if provider == "extractive" or (provider == "openai-api" and not section.base_url):
        provider = "auto"
    if provider == "auto" and not selection.gpu_available():
        # ``auto`` only picks MLX where it has a GPU: left as it is, the model just chosen
        # would never run here, and the app would ask for a model again.
        provider = "mlx"
        note = (
            f"MLX has no GPU on this machine, so {prefix}.provider is now mlx: the model runs on the CPU, "
            "slowly; a model server (Ollama, LM Studio, llama.cpp) is faster"
        )
    elif provider == "openai-api":
        note = (
            f"{prefix}.provider stays openai-api ({section.base_url}): that endpoint must serve this model; "
            f"to run it in-process set {prefix}.provider to auto"
        )
    save_changes(path, {f"{prefix}.model": value, f"{prefix}.provider": provider}, base=config)
    return UseResult(name, role, value, provider, provider != section.provider, note)
