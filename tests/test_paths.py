"""HERMES_HOME moves every location; without it, platformdirs decides."""

from __future__ import annotations

import sys
from pathlib import Path

import platformdirs
import pytest

from hermes_tui import paths

ALL_PATHS = {
    "config_path": "config.yaml",
    "state_db_path": "state.db",
    "log_path": "logs/agent.log",
    "logs_dir": "logs",
    "models_dir": "models",
    "cache_dir": "cache",
}


@pytest.fixture
def no_home(monkeypatch):
    monkeypatch.delenv("HERMES_HOME", raising=False)


def test_hermes_home_unset_or_empty_is_none(monkeypatch):
    monkeypatch.delenv("HERMES_HOME", raising=False)
    assert paths.hermes_home() is None
    monkeypatch.setenv("HERMES_HOME", "  ")
    assert paths.hermes_home() is None


def test_hermes_home_moves_every_path(tmp_path, monkeypatch):
    monkeypatch.setenv("HERMES_HOME", str(tmp_path))
    assert paths.hermes_home() == tmp_path
    for name, relative in ALL_PATHS.items():
        assert getattr(paths, name)() == tmp_path / relative, name


def test_hermes_home_is_expanded(tmp_path, monkeypatch):
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.setenv("HERMES_TEST_DIR", "hermes")
    monkeypatch.setenv("HERMES_HOME", "~/$HERMES_TEST_DIR")
    assert paths.hermes_home() == tmp_path / "hermes"
    assert paths.config_path() == tmp_path / "hermes" / "config.yaml"


def test_relative_hermes_home_is_made_absolute(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("HERMES_HOME", "rel")
    assert paths.hermes_home() == tmp_path / "rel"
    assert paths.hermes_home().is_absolute()


def test_platformdirs_without_hermes_home(no_home):
    app = "hermes-tui"
    assert paths.config_path() == platformdirs.user_config_path(app, appauthor=False) / "config.yaml"
    assert paths.state_db_path() == platformdirs.user_data_path(app, appauthor=False) / "state.db"
    assert paths.models_dir() == platformdirs.user_data_path(app, appauthor=False) / "models"
    assert paths.logs_dir() == platformdirs.user_log_path(app, appauthor=False)
    assert paths.log_path() == platformdirs.user_log_path(app, appauthor=False) / "agent.log"
    assert paths.cache_dir() == platformdirs.user_cache_path(app, appauthor=False)


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="XDG variables apply on Linux")
def test_xdg_locations_on_linux(tmp_path, monkeypatch, no_home):
    for var in ("XDG_CONFIG_HOME", "XDG_DATA_HOME", "XDG_STATE_HOME", "XDG_CACHE_HOME"):
        monkeypatch.setenv(var, str(tmp_path / var.lower()))
    assert paths.config_path() == tmp_path / "xdg_config_home" / "hermes-tui" / "config.yaml"
    assert paths.state_db_path() == tmp_path / "xdg_data_home" / "hermes-tui" / "state.db"
    assert paths.models_dir() == tmp_path / "xdg_data_home" / "hermes-tui" / "models"
    assert paths.log_path().is_relative_to(tmp_path / "xdg_state_home" / "hermes-tui")
    assert paths.log_path().name == "agent.log"
    assert paths.cache_dir() == tmp_path / "xdg_cache_home" / "hermes-tui"


def test_computing_paths_creates_nothing(tmp_path, monkeypatch):
    home = tmp_path / "home"
    monkeypatch.setenv("HERMES_HOME", str(home))
    for name in ALL_PATHS:
        getattr(paths, name)()
    assert not home.exists()


def test_ensure_dir_creates_private_dirs_and_is_idempotent(tmp_path):
    target = tmp_path / "a" / "b"
    assert paths.ensure_dir(target) == target
    assert target.is_dir()
    assert (target.stat().st_mode & 0o777) == 0o700
    assert paths.ensure_dir(target) == target  # exists: fine


def test_ensure_dir_keeps_existing_permissions(tmp_path):
    target = tmp_path / "shared"
    target.mkdir(mode=0o755)
    target.chmod(0o755)
    paths.ensure_dir(target)
    assert (target.stat().st_mode & 0o777) == 0o755


def test_ensure_dir_on_a_file_fails(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("x")
    with pytest.raises(OSError):
        paths.ensure_dir(blocker / "sub")
    assert isinstance(paths.ensure_dir(Path(tmp_path)), Path)
