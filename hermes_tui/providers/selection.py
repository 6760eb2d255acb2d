"""Which provider serves a model role, its API key, and the chat client and summarizer the
config asks for.

``auto``: MLX where MLX has a GPU and a model is set; else an OpenAI-compatible
endpoint when a base URL is configured; else a message saying what to configure.
"""

from __future__ import annotations

import os
import threading

from hermes_tui import hub
from hermes_tui.chat.client import ChatClient
from hermes_tui.compaction.summarizer import Summarizer
from hermes_tui.config import AuxiliaryCompressionConfig, Config, ModelConfig
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


def make_chat_client(cfg: ModelConfig) -> ChatClient:
    """The conversation model ``model.provider`` names. Raises ProviderError."""
    provider = resolve_provider(cfg, role="model")
    if provider == "openai-api":
        from hermes_tui.providers.openai.chat import OpenAIChatClient

        if not cfg.base_url or not cfg.model:
            raise ProviderError("provider openai-api needs model.base_url and model.model in config.yaml")
        return OpenAIChatClient(
            cfg.base_url, cfg.model, api_key=resolve_api_key(cfg.api_key_env), max_tokens=cfg.max_tokens,
        )
    if not cfg.model:
        raise ProviderError("provider mlx needs model.model (a local MLX folder or a cached HF repo id)")
    try:
        resolve_model_path(cfg.model)
    except ModelUnavailable as exc:
        raise ProviderError(str(exc)) from None
    from hermes_tui.providers.mlx.chat import MlxChatClient

    return MlxChatClient(cfg.model, max_tokens=cfg.max_tokens)


def default_mlx_model(cfg: AuxiliaryCompressionConfig) -> str | None:
    """The catalog's default compression model, when nothing is configured, MLX has a GPU and
    the model is downloaded; else None."""
    if cfg.provider != "auto" or cfg.model or cfg.base_url or not gpu_available():
        return None
    try:
        name = hub.default_compression_model().repo
        resolve_model_path(name)
    except (hub.CatalogError, ModelUnavailable):
        return None
    return name


def recommended_compression_hint(cfg: AuxiliaryCompressionConfig) -> str:
    """Where MLX has a GPU: the catalog's default compression model and how to get it, for the
    notice that passes fall back to the extractive summarizer; elsewhere (or no catalog) ''."""
    if not gpu_available():
        return ""
    try:
        model = hub.default_compression_model()
    except hub.CatalogError:
        return ""
    unset = cfg.provider == "auto" and not cfg.model and not cfg.base_url
    use = f"hermes-tui models use {model.repo} --role compression"
    try:
        resolve_model_path(model.repo)
    except ModelUnavailable:
        then = "passes use it once it is downloaded" if unset else f"then {use}"
        return (f"Recommended for this Mac: {model.repo} ({model.disk_gb:.2f} GB download, {model.memory_gb:.1f} GB "
                f"memory): get it on the models screen (/models) or with hermes-tui models pull {model.repo}; {then}.")
    return f"{model.repo}, recommended for this Mac, is downloaded: make it the compression model with {use}."


def make_summarizer(cfg: AuxiliaryCompressionConfig) -> Summarizer:
    if (default := default_mlx_model(cfg)) is not None:
        cfg = cfg.model_copy(update={"provider": "mlx", "model": default})
    provider = resolve_provider(cfg)
    if provider == "extractive":
        from hermes_tui.providers.extractive.summarizer import ExtractiveSummarizer

        return ExtractiveSummarizer()
    if provider == "openai-api":
        from hermes_tui.providers.openai.summarizer import OpenAISummarizer

        if not cfg.base_url:
            raise ProviderError("provider openai-api needs auxiliary.compression.base_url (e.g. http://127.0.0.1:8080/v1)")
        if not cfg.model:
            raise ProviderError("provider openai-api needs auxiliary.compression.model (the model name the server serves)")
        return OpenAISummarizer(cfg.base_url, cfg.model, api_key=resolve_api_key(cfg.api_key_env), timeout=cfg.timeout)
    if not cfg.model:
        raise ProviderError("provider mlx needs auxiliary.compression.model (a local MLX folder or a cached HF repo id)")
    from hermes_tui.providers.mlx.summarizer import MlxSummarizer

    try:
        resolve_model_path(cfg.model)
    except ModelUnavailable as exc:
        raise ProviderError(str(exc)) from None
    return MlxSummarizer(cfg.model, timeout=cfg.timeout)


IN_PROCESS = ("mlx", "extractive")  # every other provider is an OpenAI-compatible endpoint


def uses_endpoint(config: Config) -> bool:
    """Whether the chat or the compression model is reached through the openai SDK."""
    for cfg, role in ((config.model, "model"), (config.auxiliary.compression, "auxiliary.compression")):
        try:
            if resolve_provider(cfg, role=role) not in IN_PROCESS:
                return True
        except (ProviderError, ModelUnavailable):
            pass  # nothing usable configured: nothing to warm for it
    return False


def warm_up(config: Config) -> threading.Thread | None:
    """Import the openai SDK on a background thread when a configured model needs it (the app
    calls this right after its first frame); the thread, or None."""
    if not uses_endpoint(config):
        return None
    from hermes_tui.providers.openai.warm_sdk import warm_openai_sdk

    return warm_openai_sdk()
