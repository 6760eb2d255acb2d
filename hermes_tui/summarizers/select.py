"""Make the compression backend that ``auxiliary.compression.provider`` names.

Which provider ``auto`` means is ``providers.selection.resolve_provider`` (shared with the chat model).
With nothing configured on a machine where MLX has a GPU, passes use the catalog's default
compression model once it is downloaded: in-process MLX is what passes are for.
"""

from __future__ import annotations

from hermes_tui import hub
from hermes_tui.compaction.summarizer import Summarizer
from hermes_tui.config import AuxiliaryCompressionConfig
from hermes_tui.hub.resolve import ModelUnavailable, resolve_model_path
from hermes_tui.providers import selection
from hermes_tui.providers.selection import ProviderError, resolve_api_key, resolve_provider


def default_mlx_model(cfg: AuxiliaryCompressionConfig) -> str | None:
    """The catalog's default compression model, when nothing is configured, MLX has a GPU and
    the model is downloaded; else None."""
    if cfg.provider != "auto" or cfg.model or cfg.base_url or not selection.gpu_available():
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
    if not selection.gpu_available():
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
        from hermes_tui.summarizers.extractive import ExtractiveSummarizer

        return ExtractiveSummarizer()
    if provider == "openai-api":
        from hermes_tui.summarizers.openai_api import OpenAISummarizer

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
