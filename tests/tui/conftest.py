"""Fixtures for the chat app: a config that runs the tiny model in-process, a real store."""

from __future__ import annotations

from pathlib import Path

import pytest
from support.chat_app import make_config

from hermes_tui.store import Store


@pytest.fixture
def config(tiny_model, hf_offline_env, hermes_home):
    return make_config(tiny_model)


@pytest.fixture
def db_path(tmp_path) -> Path:
    return tmp_path / "state.db"


@pytest.fixture
def store(db_path):
    with Store(db_path) as store:
        yield store
