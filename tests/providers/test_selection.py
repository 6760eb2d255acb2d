"""Provider selection for both roles: auto, mlx, openai-api, extractive."""

from __future__ import annotations

import importlib

import pytest

from hermes_tui.config import Config
from hermes_tui.config.provider_registry import CHAT, COMPRESSION, PROVIDERS
from hermes_tui.providers import selection
from hermes_tui.providers.extractive.summarizer import ExtractiveSummarizer
from hermes_tui.providers.mlx.chat import MlxChatClient
from hermes_tui.providers.mlx.summarizer import MlxSummarizer
from hermes_tui.providers.openai.chat import OpenAIChatClient
from hermes_tui.providers.openai.summarizer import OpenAISummarizer
from hermes_tui.providers.selection import make_chat_client, make_summarizer


def cfg(**dotted):
    return Config().with_overrides(dotted)


def test_auto_without_gpu_uses_the_endpoint_when_configured(tiny_model):
    config = cfg(**{"auxiliary.compression.model": str(tiny_model.fp32), "auxiliary.compression.base_url": "http://127.0.0.1:9/v1"})
    assert not selection.gpu_available()  # this machine: MLX on the CPU backend
    assert isinstance(make_summarizer(config.auxiliary.compression), OpenAISummarizer)


def test_auto_with_gpu_and_a_present_model_uses_mlx(tiny_model, monkeypatch):
    monkeypatch.setattr(selection, "gpu_available", lambda: True)
    config = cfg(**{"auxiliary.compression.model": str(tiny_model.fp32), "auxiliary.compression.base_url": "http://x/v1"})
    assert selection.resolve_provider(config.auxiliary.compression) == "mlx"
    assert isinstance(make_summarizer(config.auxiliary.compression), MlxSummarizer)


def test_auto_with_gpu_but_missing_model_falls_back_or_says_how_to_get_it(tmp_path, monkeypatch, hf_offline_env):
    monkeypatch.setattr(selection, "gpu_available", lambda: True)
    missing = "mlx-community/Missing-Model-4bit"
    config = cfg(**{"auxiliary.compression.model": missing, "auxiliary.compression.base_url": "http://x/v1"})
    assert selection.resolve_provider(config.auxiliary.compression) == "openai-api"
    config = cfg(**{"auxiliary.compression.model": missing})
    with pytest.raises(Exception) as info:
        make_summarizer(config.auxiliary.compression)
    assert missing in str(info.value) and "download" in str(info.value)


def test_auto_with_nothing_says_what_to_configure():
    with pytest.raises(selection.ProviderError) as info:
        make_summarizer(Config().auxiliary.compression)
    assert "auxiliary.compression.base_url" in str(info.value) and "extractive" in str(info.value)
    with pytest.raises(selection.ProviderError) as info:
        make_chat_client(Config().model)
    assert "model.base_url" in str(info.value) and "extractive" not in str(info.value)


def test_forced_mlx_runs_on_the_cpu(tiny_model):
    config = cfg(**{"model.provider": "mlx", "model.model": str(tiny_model.fp32)})
    assert isinstance(make_chat_client(config.model), MlxChatClient)
    config = cfg(**{"auxiliary.compression.provider": "mlx", "auxiliary.compression.model": str(tiny_model.fp32)})
    assert isinstance(make_summarizer(config.auxiliary.compression), MlxSummarizer)


def test_openai_chat_and_extractive():
    config = cfg(**{"model.base_url": "http://127.0.0.1:9/v1", "model.model": "m"})
    assert isinstance(make_chat_client(config.model), OpenAIChatClient)
    config = cfg(**{"auxiliary.compression.provider": "extractive"})
    assert isinstance(make_summarizer(config.auxiliary.compression), ExtractiveSummarizer)


def test_no_usable_model_names_the_role_in_words(tiny_model):
    from hermes_tui.tui.problems import first_run_problem

    with pytest.raises(selection.ProviderError) as chat:
        make_chat_client(Config().model)
    assert str(chat.value).startswith("no usable chat model: set model.base_url ")
    assert first_run_problem(chat.value)[0] == "No chat model is configured"
    with pytest.raises(selection.ProviderError) as compression:
        make_summarizer(Config().auxiliary.compression)
    assert str(compression.value).startswith("no usable compression model: set auxiliary.compression.base_url ")
    assert first_run_problem(compression.value)[0] == "No compression model is configured"
    # a model is named but MLX has no GPU here: the reason comes first
    with pytest.raises(selection.ProviderError) as no_gpu:
        make_chat_client(cfg(**{"model.model": str(tiny_model.fp32)}).model)
    assert str(no_gpu.value).startswith("no usable chat model: MLX has no GPU on this machine, so set model.base_url ")


def test_every_provider_in_the_registry_has_a_backend_for_its_roles():
    """The registry names each backend's package rather than importing it: each must offer the
    factory of every role the registry gives it, and no other."""
    for entry in PROVIDERS:
        package = importlib.import_module(entry.package)
        assert callable(getattr(package, "make_chat_client", None)) == (CHAT in entry.roles), entry.name
        assert callable(getattr(package, "make_summarizer", None)) == (COMPRESSION in entry.roles), entry.name
    with pytest.raises(selection.ProviderError):
        selection.backend("extractive", CHAT)
