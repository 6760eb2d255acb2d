"""Which backend serves a role, and the chat client or summarizer the config asks for.

``model.provider`` and ``auxiliary.compression.provider`` name a provider of
``config.provider_registry``, or ``auto``. ``auto`` is resolved here and only here
(``resolve_provider``): MLX where MLX has a GPU and the model is on this machine; else an
OpenAI-compatible endpoint when a base URL is set; else a message saying what to configure.
With nothing configured for compression where MLX has a GPU, passes use the catalog's default
compression model once it is downloaded (``default_mlx_model``): in-process MLX is what passes
are for.

The backend is the package the registry names (``providers.backend`` says what it offers),
imported on first use (``backend``): the backends, and the SDKs under them, stay off the app's
first frame.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, cast

from hermes_tui import hub
from hermes_tui.config import AuxiliaryCompressionConfig, Config, ModelConfig
from hermes_tui.config.provider_registry import (
    AUTO,
    CHAT,
    COMPRESSION,
    SECTIONS,
    provider,
    providers,
)
from hermes_tui.hub.resolve import ModelUnavailable, resolve_model_path
from hermes_tui.providers.backend import Backend, ProviderError

# Read through this module (``selection.gpu_available()``) by every rule that asks whether MLX
# has a GPU, so that a test sets it in one place.
from hermes_tui.providers.mlx.runtime import gpu_available as gpu_available

if TYPE_CHECKING:
    import threading

    from hermes_tui.chat.client import ChatClient
    from hermes_tui.compaction.summarizer import Summarizer

# A role in words, for messages, by the config section that sets it up ("model" is the chat's).
ROLE_NAMES = {section: role for role, section in SECTIONS.items()}


# --------------------------------------------------------------------------- auto


def _model_present(name: str) -> bool:
    try:
        resolve_model_path(name)
        return True
    except ModelUnavailable:
        return False


def resolve_provider(cfg: AuxiliaryCompressionConfig | ModelConfig, *, role: str = "auxiliary.compression") -> str:
    """``auto``: MLX when MLX has a GPU and the model is here; else openai-api when a URL is set.

    ``role``: the config section (``model`` or ``auxiliary.compression``)."""
    if cfg.provider != AUTO:
        return cfg.provider
    if cfg.model and gpu_available() and _model_present(cfg.model):
        return "mlx"
    if cfg.base_url:
        return "openai-api"
    if cfg.model and gpu_available():
        resolve_model_path(cfg.model)  # raises the message that says how to get it
    where = "MLX has no GPU on this machine, so " if cfg.model and not gpu_available() else ""
    # A provider that needs no model always works: the message names it where the role has one.
    hint = "".join(
        f" or use provider '{p.name}' (no model; --provider {p.name})"
        for p in (providers(ROLE_NAMES[role]) if role in ROLE_NAMES else ()) if not p.needs_model
    )
    raise ProviderError(
        f"no usable {ROLE_NAMES.get(role, role)} model: {where}set {role}.base_url (any OpenAI-compatible "
        f"endpoint, e.g. mlx_lm.server, llama.cpp, Ollama) and {role}.model in config.yaml, or set "
        f"{role}.provider: mlx to run MLX on the CPU{hint}",
        key=f"{role}.base_url",
    )


def default_mlx_model(cfg: AuxiliaryCompressionConfig) -> str | None:
    """The catalog's default compression model, when nothing is configured, MLX has a GPU and
    the model is downloaded; else None."""
    if cfg.provider != AUTO or cfg.model or cfg.base_url or not gpu_available():
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
    unset = cfg.provider == AUTO and not cfg.model and not cfg.base_url
    use = f"hermes-tui models use {model.repo} --role compression"
    try:
        resolve_model_path(model.repo)
    except ModelUnavailable:
        then = "passes use it once it is downloaded" if unset else f"then {use}"
        return (f"Recommended for this Mac: {model.repo} ({model.disk_gb:.2f} GB download, {model.memory_gb:.1f} GB "
                f"memory): get it on the models screen (/models) or with hermes-tui models pull {model.repo}; {then}.")
    return f"{model.repo}, recommended for this Mac, is downloaded: make it the compression model with {use}."


# --------------------------------------------------------------------------- the backend


def backend(name: str, role: str) -> Backend:
    """The backend package of provider ``name`` (the registry's), to serve ``role`` (CHAT or
    COMPRESSION); imported by the first call that needs it."""
    entry = provider(name)
    if entry is None or role not in entry.roles:  # config.yaml's validation lets neither through
        raise ProviderError(f"provider {name!r} cannot serve the {role} model", key=f"{SECTIONS[role]}.provider")
    return cast(Backend, importlib.import_module(entry.package))


def make_chat_client(cfg: ModelConfig) -> ChatClient:
    """The conversation model ``model.provider`` names. Raises ProviderError."""
    return backend(resolve_provider(cfg, role=SECTIONS[CHAT]), CHAT).make_chat_client(cfg)


def make_summarizer(cfg: AuxiliaryCompressionConfig) -> Summarizer:
    """The compression model ``auxiliary.compression.provider`` names. Raises ProviderError."""
    if (default := default_mlx_model(cfg)) is not None:
        cfg = cfg.model_copy(update={"provider": "mlx", "model": default})
    return backend(resolve_provider(cfg), COMPRESSION).make_summarizer(cfg)


def warm_up(config: Config) -> list[threading.Thread]:
    """Start what the configured models' backends would load on their first call (the openai
    SDK), each on a thread of its own; the app calls this right after its first frame. The
    threads started: none when no backend in use has anything to load."""
    used: list[tuple[str, str]] = []
    for role, cfg in ((CHAT, config.model), (COMPRESSION, config.auxiliary.compression)):
        try:
            name = resolve_provider(cfg, role=SECTIONS[role])
        except (ProviderError, ModelUnavailable):
            continue  # nothing usable configured: nothing to warm for it
        if name not in (n for n, _ in used):
            used.append((name, role))
    threads = []
    for name, role in used:
        warm = getattr(backend(name, role), "warm", None)
        if warm is not None:
            threads.append(warm())
    return threads
