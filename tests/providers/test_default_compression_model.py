"""With nothing configured, passes use the catalog's default compression model in-process where
MLX has a GPU and the model is downloaded (the product: an on-device model performs passes)."""

from __future__ import annotations

import pytest
from support.fake_hub import FakeHub, FakeRepo, point_hub_at

from hermes_tui import hub
from hermes_tui.config import Config
from hermes_tui.providers import selection
from hermes_tui.providers.mlx.summarizer import MlxSummarizer
from hermes_tui.providers.selection import make_summarizer


@pytest.fixture
def default_model_downloaded(tiny_model, hermes_home, tmp_path, monkeypatch) -> str:
    """The tiny model downloaded (through a local stand-in for the hub) under the default's repo id."""
    repo = hub.default_compression_model().repo
    server = FakeHub([FakeRepo.from_folder(repo, tiny_model.q4)]).start()
    try:
        point_hub_at(server, tmp_path / "hf_cache", monkeypatch)
        hub.download(repo)
    finally:
        server.stop()
    return repo


def test_nothing_configured_with_a_gpu_passes_run_on_the_default_model(default_model_downloaded, monkeypatch):
    monkeypatch.setattr(selection, "gpu_available", lambda: True)
    summarizer = make_summarizer(Config().auxiliary.compression)
    assert isinstance(summarizer, MlxSummarizer)
    assert summarizer.model_name == default_model_downloaded


def test_without_a_gpu_or_with_a_model_configured_the_default_is_not_used(default_model_downloaded, monkeypatch):
    with pytest.raises(selection.ProviderError):  # no GPU: auto never means MLX on the CPU
        make_summarizer(Config().auxiliary.compression)
    monkeypatch.setattr(selection, "gpu_available", lambda: True)
    chosen = Config().with_overrides({"auxiliary.compression.provider": "extractive"}).auxiliary.compression
    assert not isinstance(make_summarizer(chosen), MlxSummarizer)
