"""The agent log: one file, ``agent.log``, that telemetry lines and diagnostics go to.

Only a file handler is attached here. What reaches the terminal is the CLI's call
(a stray stderr line would tear through the Textual screen). The file is not rotated:
``hermes-tui report`` reads telemetry from it and a rotated-away half would be missed.
"""

from __future__ import annotations

import logging
from pathlib import Path

from hermes_tui.util import paths
from hermes_tui.util.errors import AppError
from hermes_tui.util.terminal_text import visible_controls

ROOT_LOGGER = "hermes_tui"
LOG_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"


class LogFileError(AppError, OSError):
    """The log file (or its directory) could not be created or opened."""

    def __init__(self, path: Path, reason: str, errno: int | None = None):
        super().__init__(f"cannot open log file {path}: {reason}")
        self.errno, self.strerror, self.filename = errno, reason, str(path)  # as OSError's own
        self.path = path
        self.reason = reason

    def __str__(self) -> str:
        return f"cannot open log file {self.path}: {self.reason}"


class _AgentLogHandler(logging.FileHandler):
    """Marks the handler this module owns, so setup is idempotent."""


class _VisibleControls(logging.Formatter):
    """Each line as ``terminal_text`` shows outside text: what lands in the log (an MCP
    server's stderr, a tool's failure, a model's words in an error) can carry escape
    sequences, and ``tail -f agent.log`` would hand them to the user's terminal."""

    def format(self, record: logging.LogRecord) -> str:
        return visible_controls(super().format(record))


def setup_logging(log_file: Path | None = None, *, level: int = logging.INFO) -> Path:
    """Send the ``hermes_tui`` loggers to ``log_file`` (default: :func:`paths.log_path`).

    Calling it again with the same file only updates the level; with another file it
    moves logging there. Returns the log file's path. Raises :class:`LogFileError`
    naming the path when the file cannot be opened for appending.
    """
    path = Path(log_file) if log_file is not None else paths.log_path()
    path = path.expanduser().absolute()
    logger = logging.getLogger(ROOT_LOGGER)
    logger.setLevel(level)

    for handler in list(logger.handlers):
        if isinstance(handler, _AgentLogHandler):
            if Path(handler.baseFilename) == path:
                handler.setLevel(level)
                return path
            logger.removeHandler(handler)
            handler.close()

    try:
        paths.ensure_dir(path.parent)
        paths.private_file(path)  # tool output (and what leaked into it) is logged: 0o600
        handler = _AgentLogHandler(path, mode="a", encoding="utf-8")
    except OSError as exc:
        reason = exc.strerror or str(exc)
        blocker = next((p for p in path.parents if p.exists() and not p.is_dir()), None)
        if blocker is not None:
            reason = f"{blocker} is a file, not a folder (move it aside or set HERMES_TUI_HOME elsewhere)"
        raise LogFileError(path, reason, exc.errno) from exc
    handler.setLevel(level)
    handler.setFormatter(_VisibleControls(LOG_FORMAT))
    logger.addHandler(handler)
    return path


def get_logger(name: str) -> logging.Logger:
    """A logger under ``hermes_tui`` (``get_logger(__name__)`` or a short name like ``"bench"``)."""
    if name == ROOT_LOGGER or name.startswith(ROOT_LOGGER + "."):
        return logging.getLogger(name)
    return logging.getLogger(f"{ROOT_LOGGER}.{name}")
