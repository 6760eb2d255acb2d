"""HERMES_TUI_HOME moves every location; without it, platformdirs decides. HERMES_HOME is Hermes
Agent's home: it never moves our files, and nothing of ours is written inside it."""

from __future__ import annotations

import sys
from pathlib import Path

import platformdirs
import pytest

from hermes_tui.util import paths

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
    monkeypatch.delenv("HERMES_TUI_HOME", raising=False)
    monkeypatch.delenv("HERMES_HOME", raising=False)


def test_home_override_unset_or_empty_is_none(monkeypatch):
    monkeypatch.delenv("HERMES_TUI_HOME", raising=False)
    assert paths.home_override() is None
    monkeypatch.setenv("HERMES_TUI_HOME", "  ")
    assert paths.home_override() is None


def test_hermes_tui_home_moves_every_path(tmp_path, monkeypatch):
    monkeypatch.setenv("HERMES_TUI_HOME", str(tmp_path))
    assert paths.home_override() == tmp_path
    for name, relative in ALL_PATHS.items():
        assert getattr(paths, name)() == tmp_path / relative, name


def test_hermes_tui_home_is_expanded(tmp_path, monkeypatch):
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.setenv("HERMES_TEST_DIR", "hermes")
    monkeypatch.setenv("HERMES_TUI_HOME", "~/$HERMES_TEST_DIR")
    assert paths.home_override() == tmp_path / "hermes"
    assert paths.config_path() == tmp_path / "hermes" / "config.yaml"


def test_relative_hermes_tui_home_is_made_absolute(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("HERMES_TUI_HOME", "rel")
    assert paths.home_override() == tmp_path / "rel"
    assert paths.home_override().is_absolute()


def test_platformdirs_without_hermes_tui_home(no_home):
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
    monkeypatch.setenv("HERMES_TUI_HOME", str(home))
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


@pytest.mark.parametrize("umask", [0o022, 0o000])
def test_a_file_of_ours_is_private_from_its_first_byte(tmp_path, umask):
    """Created 0600 (not made so by a chmod after it): between the two, the log or the index
    would already be readable by others, and SQLite may write into it before then."""
    import os
    import stat

    old = os.umask(umask)
    try:
        created = paths.create_private(tmp_path / "state.db")
    finally:
        os.umask(old)
    assert stat.S_IMODE(created.stat().st_mode) == 0o600
    shared = tmp_path / "theirs.txt"
    shared.write_text("x")
    shared.chmod(0o644)
    paths.create_private(shared)  # one already there is left as it is (make_private's work)
    assert stat.S_IMODE(shared.stat().st_mode) == 0o644


def test_ensure_dir_on_a_file_fails(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("x")
    with pytest.raises(OSError):
        paths.ensure_dir(blocker / "sub")
    assert isinstance(paths.ensure_dir(Path(tmp_path)), Path)


# --- Hermes Agent's home ---------------------------------------------------------------------


def test_hermes_home_alone_never_moves_our_files(tmp_path, monkeypatch, no_home):
    monkeypatch.setenv("HERMES_HOME", str(tmp_path / "agent"))
    app = "hermes-tui"
    assert paths.home_override() is None
    assert paths.config_path() == platformdirs.user_config_path(app, appauthor=False) / "config.yaml"
    assert paths.state_db_path() == platformdirs.user_data_path(app, appauthor=False) / "state.db"
    assert paths.log_path() == platformdirs.user_log_path(app, appauthor=False) / "agent.log"
    for name in ALL_PATHS:
        assert not getattr(paths, name)().is_relative_to(tmp_path / "agent"), name


def test_hermes_agent_home_is_hermes_home_else_dot_hermes(tmp_path, monkeypatch, no_home):
    monkeypatch.setenv("HOME", str(tmp_path))
    assert paths.hermes_agent_home() == tmp_path / ".hermes"
    assert paths.hermes_agent_log_path() == tmp_path / ".hermes" / "logs" / "agent.log"
    monkeypatch.setenv("HERMES_HOME", "~/agent")
    assert paths.hermes_agent_home() == tmp_path / "agent"


def test_ensure_dir_refuses_hermes_agent_home_and_creates_nothing(tmp_path, monkeypatch, no_home):
    agent = tmp_path / "agent"
    monkeypatch.setenv("HERMES_HOME", str(agent))
    for target in (agent, agent / "logs", agent / "hermes-tui" / "deeper"):
        with pytest.raises(paths.HermesAgentHomeError) as caught:
            paths.ensure_dir(target)
        assert "Hermes Agent's home" in str(caught.value) and "HERMES_TUI_HOME" in str(caught.value)
    assert not agent.exists()
    assert paths.ensure_dir(tmp_path / "agent-not") == tmp_path / "agent-not"  # a sibling is fine


def test_a_symlink_into_hermes_agent_home_is_inside_it(tmp_path, monkeypatch, no_home):
    agent = tmp_path / "agent"
    agent.mkdir()
    (tmp_path / "link").symlink_to(agent)
    monkeypatch.setenv("HERMES_HOME", str(agent))
    assert paths.in_hermes_agent_home(tmp_path / "link" / "state.db")


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="XDG variables apply on Linux")
def test_platformdirs_defaults_that_land_in_dot_hermes_are_refused(tmp_path, monkeypatch, no_home):
    """XDG_DATA_HOME=~/.hermes would put our state.db inside Hermes Agent's default home."""
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / ".hermes"))
    assert paths.state_db_path() == tmp_path / ".hermes" / "hermes-tui" / "state.db"
    assert paths.in_hermes_agent_home(paths.state_db_path())
    with pytest.raises(paths.HermesAgentHomeError):
        paths.ensure_dir(paths.state_db_path().parent)
    assert not (tmp_path / ".hermes").exists()
