"""Which chat models ``/model`` offers, and what choosing one changes in config.yaml.

Chat models live in two places: on this machine (MLX models in the Hugging Face cache
and the models folder, :mod:`hermes_tui.hub`; they run in-process) and at the configured
endpoint (whatever ``GET {model.base_url}/models`` lists). Choosing one sets
``model.model``, and ``model.provider`` only when the provider as configured would not
run the choice where it lives (a local model under ``openai-api``, an endpoint model
under ``mlx``, or ``auto`` resolving to the other side).

Nothing here writes or touches the UI: the app writes the changes through
``config.edit`` and rebuilds its clients.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from hermes_tui import hub
from hermes_tui.chat.client import ChatError
from hermes_tui.config import ModelConfig
from hermes_tui.hub.resolve import ModelUnavailable, resolve_model_path
from hermes_tui.providers.selection import ProviderError, resolve_provider

LOCAL, ENDPOINT = "local", "endpoint"
LIST_TIMEOUT_S = 5.0  # asking an endpoint for its models: a picker must not hang on it


class ChoiceError(Exception):
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
    from hermes_tui.chat.openai_chat import list_models
    from hermes_tui.providers.selection import resolve_api_key

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
