"""Which provider serves a model role, and its API key: shared by chat clients and summarizers.

``auto``: MLX where MLX has a GPU and a model is set; else an OpenAI-compatible
endpoint when a base URL is configured; else a message saying what to configure.
"""

from __future__ import annotations

import os

from hermes_tui.config import AuxiliaryCompressionConfig, ModelConfig
from hermes_tui.hub.resolve import ModelUnavailable, resolve_model_path
from hermes_tui.providers.mlx.runtime import gpu_available


class ProviderError(Exception):
    """No usable compression backend: the message says what to configure."""


def _model_present(name: str) -> bool:
    try:
        resolve_model_path(name)
        return True
    except ModelUnavailable:
        return False


# A role in words, for messages: the chat model's config section is called "model".
ROLE_NAMES = {"model": "chat", "auxiliary.compression": "compression"}


def resolve_provider(cfg: AuxiliaryCompressionConfig | ModelConfig, *, role: str = "auxiliary.compression") -> str:
    """``auto``: MLX when MLX has a GPU and the model is here; else openai-api when a URL is set."""
    if cfg.provider != "auto":
        return cfg.provider
    if cfg.model and gpu_available() and _model_present(cfg.model):
        return "mlx"
    if cfg.base_url:
        return "openai-api"
    if cfg.model and gpu_available():
        resolve_model_path(cfg.model)  # raises the message that says how to get it
    where = "MLX has no GPU on this machine, so " if cfg.model and not gpu_available() else ""
    hint = " or use provider 'extractive' (no model; --provider extractive)" if role == "auxiliary.compression" else ""
    raise ProviderError(
        f"no usable {ROLE_NAMES.get(role, role)} model: {where}set {role}.base_url (any OpenAI-compatible "
        f"endpoint, e.g. mlx_lm.server, llama.cpp, Ollama) and {role}.model in config.yaml, or set "
        f"{role}.provider: mlx to run MLX on the CPU{hint}"
    )


def resolve_api_key(env_var: str) -> str | None:
    """The API key from environment variable ``env_var``; None when unset or blank."""
    if not env_var:
        return None
    value = os.environ.get(env_var, "").strip()
    return value or None
