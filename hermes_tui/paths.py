"""Where hermes-tui keeps its files.

``HERMES_HOME`` moves every location under one directory (handy for tests, demos and
portable installs). Without it, each kind of file goes where the platform expects it,
via platformdirs for the app name ``hermes-tui``.

These functions only compute paths; nothing here touches the disk except
:func:`ensure_dir`, which callers use right before they write.
"""

from __future__ import annotations

import os
from pathlib import Path

import platformdirs

APP_NAME = "hermes-tui"
HOME_ENV = "HERMES_HOME"

CONFIG_FILE = "config.yaml"
STATE_DB_FILE = "state.db"
LOG_FILE = "agent.log"


def hermes_home() -> Path | None:
    """The directory named by ``HERMES_HOME`` (``~`` and ``$VARS`` expanded), or None.

    An empty value counts as unset. A relative value is made absolute against the
    current directory now, so paths do not drift if the process changes directory.
    """
    raw = os.environ.get(HOME_ENV, "").strip()
    if not raw:
        return None
    return Path(os.path.expandvars(os.path.expanduser(raw))).absolute()


def _config_dir() -> Path:
    home = hermes_home()
    return home if home else platformdirs.user_config_path(APP_NAME, appauthor=False)


def _data_dir() -> Path:
    home = hermes_home()
    return home if home else platformdirs.user_data_path(APP_NAME, appauthor=False)


def config_path() -> Path:
    """``config.yaml``: HERMES_HOME, else the user config dir."""
    return _config_dir() / CONFIG_FILE


def state_db_path() -> Path:
    """The SQLite session store: HERMES_HOME, else the user data dir."""
    return _data_dir() / STATE_DB_FILE


def models_dir() -> Path:
    """Downloaded and imported MLX models: HERMES_HOME/models, else the user data dir."""
    return _data_dir() / "models"


def logs_dir() -> Path:
    """HERMES_HOME/logs, else the user log dir."""
    home = hermes_home()
    return home / "logs" if home else platformdirs.user_log_path(APP_NAME, appauthor=False)


def log_path() -> Path:
    """``agent.log``, where telemetry lines go (and ``hermes-tui report`` reads)."""
    return logs_dir() / LOG_FILE


def cache_dir() -> Path:
    """Disposable files (safe to delete): HERMES_HOME/cache, else the user cache dir."""
    home = hermes_home()
    return home / "cache" if home else platformdirs.user_cache_path(APP_NAME, appauthor=False)


def ensure_dir(path: Path) -> Path:
    """Create ``path`` (and missing parents) if needed and return it.

    A directory this creates is private to the user (0o700): it holds conversations.
    An existing directory keeps the permissions it has.
    """
    path = Path(path)
    path.mkdir(mode=0o700, parents=True, exist_ok=True)
    return path
