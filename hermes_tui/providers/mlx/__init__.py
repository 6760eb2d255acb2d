"""The MLX backend: models run in-process, on this machine's GPU (Apple silicon) or its CPU.

The package offers the backend's factories (``providers.backend``). Its pieces: the chat client
(``chat``, with the tool calls split from the output by ``tool_calls``) and the summarizer
(``summarizer``); the runtime that loads each model once and runs one generation at a time
(``runtime``); the one thread all MLX work runs on (``thread``); and the KV prefix cache that
lets a call read only what changed since the last one (``prefix``).

The factories import their client when called: mlx_lm stays off the app's first frame.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from hermes_tui.hub.resolve import ModelUnavailable, resolve_model_path
from hermes_tui.providers.backend import ProviderError

if TYPE_CHECKING:
    from hermes_tui.chat.client import ChatClient
    from hermes_tui.compaction.summarizer import Summarizer
    from hermes_tui.config import AuxiliaryCompressionConfig, ModelConfig


def make_chat_client(cfg: ModelConfig) -> ChatClient:
    _check_model(cfg.model, "model.model")
    from hermes_tui.providers.mlx.chat import MlxChatClient

    return MlxChatClient(cfg.model, max_tokens=cfg.max_tokens)


def make_summarizer(cfg: AuxiliaryCompressionConfig) -> Summarizer:
    _check_model(cfg.model, "auxiliary.compression.model")
    from hermes_tui.providers.mlx.summarizer import MlxSummarizer

    return MlxSummarizer(cfg.model, timeout=cfg.timeout)


def _check_model(name: str, key: str) -> None:
    """A model is named, and it is on this machine (the message says how to get it)."""
    if not name:
        raise ProviderError(f"provider mlx needs {key} (a local MLX folder or a cached HF repo id)", key=key)
    try:
        resolve_model_path(name)
    except ModelUnavailable as exc:
        raise ProviderError(str(exc), key=key, model=exc.model) from exc
