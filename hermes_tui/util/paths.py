"""Where hermes-tui keeps its files, and where it must not.

``HERMES_TUI_HOME`` moves every location under one directory (handy for tests, demos and
portable installs). Without it, each kind of file goes where the platform expects it,
via platformdirs for the app name ``hermes-tui``.

``HERMES_HOME`` (default ``~/.hermes``) is Hermes Agent's home, with its own
``state.db`` and ``config.yaml``: hermes-tui only ever reads it (``report --hermes``)
and never writes there, even when it is the only home variable set. Every writer
creates its folder through :func:`ensure_dir` (or checks with :func:`refuse_hermes_agent_home`),
which refuses any location inside Hermes Agent's home.

These functions only compute paths; nothing here touches the disk except
:func:`ensure_dir`, which callers use right before they write.
"""

from __future__ import annotations

import errno
import os
from pathlib import Path

import platformdirs

from hermes_tui.util.errors import AppError

APP_NAME = "hermes-tui"
HOME_ENV = "HERMES_TUI_HOME"
HERMES_AGENT_HOME_ENV = "HERMES_HOME"  # Hermes Agent's home: read, never written (docs/architecture.md, "Homes")
HERMES_AGENT_DEFAULT_HOME = "~/.hermes"

CONFIG_FILE = "config.yaml"
STATE_DB_FILE = "state.db"
LOG_FILE = "agent.log"
USER_INSTRUCTIONS_FILE = "AGENTS.md"


class HermesAgentHomeError(AppError, PermissionError):
    """A hermes-tui file would land inside Hermes Agent's home."""

    kind = "hermes_agent_home"

    def __init__(self, path: Path, agent_home: Path):
        reason = (
            f"inside Hermes Agent's home {agent_home} ({HERMES_AGENT_HOME_ENV}), where hermes-tui never writes: "
            f"set {HOME_ENV} to another folder"
        )
        super().__init__(reason, fix=f"set {HOME_ENV} to another folder")
        # As the OSError it also is: errno, strerror, filename and their usual str().
        PermissionError.__init__(self, errno.EACCES, reason, str(path))


def _expanded(raw: str) -> Path:
    # Made absolute now, so paths do not drift if the process changes directory.
    return Path(os.path.expandvars(os.path.expanduser(raw))).absolute()


def home_override() -> Path | None:
    """The directory named by ``HERMES_TUI_HOME`` (``~`` and ``$VARS`` expanded), or None.

    An empty value counts as unset. A relative value is made absolute against the
    current directory.
    """
    raw = os.environ.get(HOME_ENV, "").strip()
    return _expanded(raw) if raw else None


def hermes_agent_home() -> Path:
    """Hermes Agent's home: ``HERMES_HOME``, else ``~/.hermes``. Read-only to us."""
    raw = os.environ.get(HERMES_AGENT_HOME_ENV, "").strip()
    return _expanded(raw or HERMES_AGENT_DEFAULT_HOME)


def hermes_agent_log_path() -> Path:
    """Hermes Agent's own ``logs/agent.log`` (``hermes-tui report --hermes`` reads it)."""
    return hermes_agent_home() / "logs" / LOG_FILE


def in_hermes_agent_home(path: Path) -> bool:
    """Is ``path`` Hermes Agent's home or anything under it (symlinks followed)?"""
    agent_home = Path(os.path.realpath(hermes_agent_home()))
    target = Path(os.path.realpath(Path(path).absolute()))
    return target == agent_home or agent_home in target.parents


def refuse_hermes_agent_home(path: Path) -> None:
    """Raise :class:`HermesAgentHomeError` if ``path`` lies inside Hermes Agent's home."""
    if in_hermes_agent_home(path):
        raise HermesAgentHomeError(Path(path), hermes_agent_home())


def _config_dir() -> Path:
    home = home_override()
    return home if home else platformdirs.user_config_path(APP_NAME, appauthor=False)


def _data_dir() -> Path:
    home = home_override()
    return home if home else platformdirs.user_data_path(APP_NAME, appauthor=False)


def config_path() -> Path:
    """``config.yaml``: HERMES_TUI_HOME, else the user config dir."""
    return _config_dir() / CONFIG_FILE


def user_instructions_path() -> Path:
    """The user's own ``AGENTS.md``, next to ``config.yaml``: instructions for every workspace
    (the system prompt reads it; nothing here writes it)."""
    return _config_dir() / USER_INSTRUCTIONS_FILE


def state_db_path() -> Path:
    """The SQLite session store: HERMES_TUI_HOME, else the user data dir."""
    return _data_dir() / STATE_DB_FILE


def models_dir() -> Path:
    """Downloaded and imported MLX models: HERMES_TUI_HOME/models, else the user data dir."""
    return _data_dir() / "models"


def logs_dir() -> Path:
    """HERMES_TUI_HOME/logs, else the user log dir."""
    home = home_override()
    return home / "logs" if home else platformdirs.user_log_path(APP_NAME, appauthor=False)


def log_path() -> Path:
    """``agent.log``, where telemetry lines go (and ``hermes-tui report`` reads)."""
    return logs_dir() / LOG_FILE


def cache_dir() -> Path:
    """Disposable files (safe to delete): HERMES_TUI_HOME/cache, else the user cache dir."""
    home = home_override()
    return home / "cache" if home else platformdirs.user_cache_path(APP_NAME, appauthor=False)


def private_file(path: Path) -> Path:
    """Create the file ``path`` if it is missing, private to the user (0o600) from the first
    byte; a file of ours that is already there loses any permission for group and others.

    Logs and the session database hold what tools printed, secrets included: whatever the
    umask, an older version or a home folder someone else created left, nobody else reads
    them. (The folder is ``ensure_dir``'s.)"""
    create_private(path)
    return make_private(path)


def create_private(path: Path) -> Path:
    """Create the file ``path`` (0o600) unless it exists; an existing one is left as it is."""
    path = Path(path)
    try:
        os.close(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600))
    except FileExistsError:
        pass
    return path


def make_private(path: Path) -> Path:
    """Take group's and others' permissions off the existing file ``path`` (ours)."""
    path = Path(path)
    mode = path.stat().st_mode
    if mode & 0o077 and path.is_file():
        os.chmod(path, mode & 0o700)
    return path


def ensure_dir(path: Path) -> Path:
    """Create ``path`` (and missing parents) if needed and return it.

    A directory this creates is private to the user (0o700): it holds conversations.
    An existing directory keeps the permissions it has. A folder inside Hermes Agent's
    home is refused (:class:`HermesAgentHomeError`) before anything is created.
    """
    path = Path(path)
    refuse_hermes_agent_home(path)
    path.mkdir(mode=0o700, parents=True, exist_ok=True)
    return path
