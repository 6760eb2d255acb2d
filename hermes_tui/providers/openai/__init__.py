"""The OpenAI-compatible backend: any server that speaks ``POST /v1/chat/completions``
(llama.cpp's server, Ollama, LM Studio, vLLM, ``mlx_lm.server``, a hosted API).

The package offers the backend's factories (``providers.backend``). Its pieces: the chat client
(``chat``, reading the event stream with ``stream`` and assembling calls with ``tool_calls``)
and the summarizer (``summarizer``); the HTTP client under the openai SDK and the bounds it
enforces (``call_limits``, ``transport``); the request and the mapping of its failures
(``errors``); the servers' words for a request too large for the window (``overflow``); asking
a server for the window (``context_probe``); finding servers on this machine
(``local_servers``); importing the SDK ahead of the first call (``warm_sdk``).

The factories import their client when called: the SDK and everything under it stay off the
app's first frame.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from hermes_tui.providers.backend import ProviderError, resolve_api_key

if TYPE_CHECKING:
    import threading

    from hermes_tui.chat.client import ChatClient
    from hermes_tui.compaction.summarizer import Summarizer
    from hermes_tui.config import AuxiliaryCompressionConfig, ModelConfig


def make_chat_client(cfg: ModelConfig) -> ChatClient:
    from hermes_tui.providers.openai.chat import OpenAIChatClient

    if not cfg.base_url or not cfg.model:
        raise ProviderError(
            "provider openai-api needs model.base_url and model.model in config.yaml",
            key="model.base_url" if not cfg.base_url else "model.model",
        )
    return OpenAIChatClient(
        cfg.base_url, cfg.model, api_key=resolve_api_key(cfg.api_key_env), max_tokens=cfg.max_tokens,
        temperature=cfg.temperature,
    )


def make_summarizer(cfg: AuxiliaryCompressionConfig) -> Summarizer:
    from hermes_tui.providers.openai.summarizer import OpenAISummarizer

    if not cfg.base_url:
        raise ProviderError(
            "provider openai-api needs auxiliary.compression.base_url (e.g. http://127.0.0.1:8080/v1)",
            key="auxiliary.compression.base_url",
        )
    if not cfg.model:
        raise ProviderError(
            "provider openai-api needs auxiliary.compression.model (the model name the server serves)",
            key="auxiliary.compression.model",
        )
    return OpenAISummarizer(cfg.base_url, cfg.model, api_key=resolve_api_key(cfg.api_key_env), timeout=cfg.timeout)


def warm() -> threading.Thread:
    """Import the SDK (seconds on a slow machine) on a thread, before the first call needs it."""
    from hermes_tui.providers.openai.warm_sdk import warm_openai_sdk

    return warm_openai_sdk()
