"""Choose the compression backend from config: ``auxiliary.compression.provider``.

``auto``: MLX where MLX has a GPU and a model is set; else an OpenAI-compatible
endpoint when a base URL is configured; else a message saying what to configure.
"""

from __future__ import annotations

from hermes_tui.config import AuxiliaryCompressionConfig
from hermes_tui.summarizers.base import Summarizer


class ProviderError(Exception):
    """No usable compression backend: the message says what to configure."""


def mlx_has_gpu() -> bool:
    try:
        import mlx.core as mx
    except Exception:  # noqa: BLE001 - no MLX at all is simply "no GPU"
        return False
    try:
        return bool(mx.metal.is_available())
    except Exception:  # noqa: BLE001
        return False


def resolve_provider(cfg: AuxiliaryCompressionConfig) -> str:
    if cfg.provider != "auto":
        return cfg.provider
    if cfg.model and not cfg.base_url and mlx_has_gpu():
        return "mlx"
    if cfg.base_url:
        return "openai-api"
    raise ProviderError(
        "no compression model configured: set auxiliary.compression.base_url (any OpenAI-compatible "
        "endpoint) and auxiliary.compression.model in config.yaml, or use provider 'extractive' "
        "(no model; --provider extractive on the command line)"
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
    raise ProviderError(
        "the in-process MLX compression backend is not available in this version: "
        "use provider openai-api (e.g. an mlx_lm.server) or extractive"
    )
