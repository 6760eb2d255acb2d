"""Choose the compression backend from config: ``auxiliary.compression.provider``.

``auto``: MLX where MLX has a GPU and a model is set; else an OpenAI-compatible
endpoint when a base URL is configured; else a message saying what to configure.
"""

from __future__ import annotations

from hermes_tui.config import AuxiliaryCompressionConfig, ModelConfig
from hermes_tui.mlx_runtime import ModelUnavailable, gpu_available, resolve_model_path
from hermes_tui.summarizers.base import Summarizer


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


def make_summarizer(cfg: AuxiliaryCompressionConfig) -> Summarizer:
    provider = resolve_provider(cfg)
    if provider == "extractive":
        from hermes_tui.summarizers.extractive import ExtractiveSummarizer

        return ExtractiveSummarizer()
    if provider == "openai-api":
        from hermes_tui.summarizers.openai_api import OpenAISummarizer, resolve_api_key

        if not cfg.base_url:
            raise ProviderError("provider openai-api needs auxiliary.compression.base_url (e.g. http://127.0.0.1:8080/v1)")
        if not cfg.model:
            raise ProviderError("provider openai-api needs auxiliary.compression.model (the model name the server serves)")
        return OpenAISummarizer(cfg.base_url, cfg.model, api_key=resolve_api_key(cfg.api_key_env), timeout=cfg.timeout)
    if not cfg.model:
        raise ProviderError("provider mlx needs auxiliary.compression.model (a local MLX folder or a cached HF repo id)")
    from hermes_tui.summarizers.mlx import MlxSummarizer

    try:
        resolve_model_path(cfg.model)
    except ModelUnavailable as exc:
        raise ProviderError(str(exc)) from None
    return MlxSummarizer(cfg.model, timeout=cfg.timeout)
