"""Choosing a model for a role, and what choosing it changes in config.yaml.

``use_model`` makes a model on this machine the chat or the compression model (the models
screen, the first-run screen, ``hermes-tui models use``), switching the role's provider when
the one configured could not run it.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from hermes_tui.hub.catalog import ROLES
from hermes_tui.hub.errors import HubError
from hermes_tui.hub.resolve import ModelUnavailable, imported_model, resolve_model_path
from hermes_tui.providers import selection
from hermes_tui.util import paths


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
    provider, note = section.provider, ""
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
