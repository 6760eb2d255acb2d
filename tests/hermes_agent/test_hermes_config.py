"""Hermes Agent's compression settings mapped to ours, key by key; its file is only read."""

from __future__ import annotations

import hashlib
from pathlib import Path

from support.hermes_home import EXPECTED_FROM_HERMES_CONFIG as EXPECTED
from support.hermes_home import HERMES_CONFIG, write_hermes_config

from hermes_tui.config import Config
from hermes_tui.hermes_agent.config import hermes_config_path, read_hermes_offer


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def test_the_shared_keys_map_one_by_one_and_the_file_is_untouched(hermes_home):
    path = write_hermes_config(hermes_config_path().parent, HERMES_CONFIG)
    before = sha256(path)
    offer = read_hermes_offer(Config())
    assert offer is not None and offer.path == path
    # compression.enabled and micro_compact are true in both: nothing to change, nothing offered.
    assert offer.changes == EXPECTED
    assert "auxiliary.compression.api_key: OLLAMA_API_KEY → auxiliary.compression.api_key_env" in offer.lines
    assert offer.skipped == []
    assert Config().with_overrides(offer.changes).compression.threshold == 0.6  # the changes validate
    assert sha256(path) == before


def test_what_cannot_be_taken_is_named_and_left_out(tmp_path):
    data = {
        "compression": {"threshold": 7, "micro_compact": False},
        "auxiliary": {"compression": {"provider": "openrouter", "model": "google/gemini-flash", "base_url": ""}},
    }
    offer = read_hermes_offer(Config(), write_hermes_config(tmp_path, data))
    assert offer is not None and offer.changes == {"compression.micro_compact": False}
    assert any("compression.threshold: 7" in line for line in offer.skipped)
    assert any("'openrouter'" in line and "google/gemini-flash" in line and "base_url" in line for line in offer.skipped)

    literal = {"auxiliary": {"compression": {"base_url": "http://127.0.0.1:8080/v1", "api_key": "sk-live-123"}}}
    offer = read_hermes_offer(Config(), write_hermes_config(tmp_path, literal))
    assert "auxiliary.compression.api_key_env" not in offer.changes
    assert "sk-live-123" not in repr(offer)  # a key in Hermes' file never travels
    assert any("not copied" in line for line in offer.skipped)


def test_nothing_to_offer_without_a_readable_hermes_config(tmp_path):
    assert read_hermes_offer(Config(), tmp_path / "missing.yaml") is None
    bad = tmp_path / "bad.yaml"
    bad.write_text("compression: [unclosed\n")
    assert read_hermes_offer(Config(), bad) is None
    same = write_hermes_config(tmp_path / "same", {"compression": {"threshold": 0.80, "micro_compact": True}})
    assert read_hermes_offer(Config(), same) is None  # already ours
