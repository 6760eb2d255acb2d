"""Choose the conversation model's client from config: ``model.provider``."""

from __future__ import annotations

from hermes_tui.chat.client import ChatClient
from hermes_tui.config import ModelConfig
from hermes_tui.hub.resolve import ModelUnavailable, resolve_model_path
from hermes_tui.providers.selection import ProviderError, resolve_provider


def make_chat_client(cfg: ModelConfig) -> ChatClient:
    provider = resolve_provider(cfg, role="model")
    if provider == "openai-api":
        from hermes_tui.chat.openai_chat import OpenAIChatClient
        from hermes_tui.providers.selection import resolve_api_key

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
    from hermes_tui.chat.mlx_chat import MlxChatClient

    return MlxChatClient(cfg.model, max_tokens=cfg.max_tokens)
