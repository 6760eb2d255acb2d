"""The agent log file handler."""

from __future__ import annotations

import logging
import os
import stat

import pytest

from hermes_tui.util import logs
from hermes_tui.util.logs import LOG_FORMAT, LogFileError, get_logger, setup_logging


def owned_handlers() -> list[logging.Handler]:
    return [h for h in logging.getLogger("hermes_tui").handlers if isinstance(h, logs._AgentLogHandler)]


@pytest.fixture(autouse=True)
def clean_logger():
    logger = logging.getLogger("hermes_tui")
    level = logger.level
    yield
    for handler in owned_handlers():
        logger.removeHandler(handler)
        handler.close()
    logger.setLevel(level)


def flush() -> None:
    for handler in owned_handlers():
        handler.flush()


def test_the_log_is_private_whatever_existed_before(tmp_path):
    """Our home already there (0755, as a user's mkdir leaves it) and a log an older version
    left 0644: the log is 0600 either way (tool output, and what leaked into it, is logged)."""
    home = tmp_path / "home"
    home.mkdir(mode=0o755)
    fresh = home / "agent.log"
    old_umask = os.umask(0o022)
    try:
        setup_logging(fresh)
        assert stat.S_IMODE(fresh.stat().st_mode) == 0o600
        older = home / "older.log"
        older.write_text("earlier lines\n", encoding="utf-8")
        os.chmod(older, 0o644)
        setup_logging(older)
        assert stat.S_IMODE(older.stat().st_mode) == 0o600
        assert older.read_text(encoding="utf-8") == "earlier lines\n"  # appended to, never truncated
    finally:
        os.umask(old_umask)
        setup_logging(tmp_path / "after.log")  # leave no handler on the test's files


def test_writes_formatted_lines_to_the_file(tmp_path):
    log_file = tmp_path / "logs" / "agent.log"
    assert setup_logging(log_file) == log_file
    assert (log_file.parent.stat().st_mode & 0o777) == 0o700
    get_logger("compaction.micro").info("micro compaction telemetry: %s", '{"outcome": "absorbed"}')
    get_logger("hermes_tui.store").debug("not at INFO")
    flush()
    lines = log_file.read_text(encoding="utf-8").splitlines()
    assert len(lines) == 1
    assert lines[0].endswith(' INFO hermes_tui.compaction.micro: micro compaction telemetry: {"outcome": "absorbed"}')
    assert LOG_FORMAT == "%(asctime)s %(levelname)s %(name)s: %(message)s"


def test_escape_sequences_reach_the_file_visible_not_raw(tmp_path):
    """An MCP server's stderr or a tool's error logged as it came would send its escape
    sequences to the terminal of whoever reads the log (OSC 52 writes the clipboard)."""
    log_file = tmp_path / "agent.log"
    setup_logging(log_file)
    get_logger("mcp").warning("server x exited: %s", "boom\x1b]52;c;ZWNobyBoaQ==\x07\x1b[2J\ttab")
    try:
        raise ValueError("bad\x1b[31m")
    except ValueError:
        get_logger("mcp").exception("call failed")
    flush()
    text = log_file.read_text(encoding="utf-8")
    assert "\x1b" not in text and "\x07" not in text
    assert "boom␛]52;c;ZWNobyBoaQ==␇␛[2J\ttab" in text
    assert "Traceback (most recent call last):\n" in text and "ValueError: bad␛[31m" in text  # lines kept


def test_default_file_is_under_hermes_home(hermes_home):
    path = setup_logging()
    assert path == hermes_home / "logs" / "agent.log"
    get_logger("x").warning("hello")
    flush()
    assert "WARNING hermes_tui.x: hello" in path.read_text()


def test_idempotent(tmp_path):
    log_file = tmp_path / "agent.log"
    setup_logging(log_file)
    setup_logging(log_file)
    assert len(owned_handlers()) == 1
    get_logger("x").info("once")
    flush()
    assert log_file.read_text().count("once") == 1


def test_level_is_applied_and_updated(tmp_path):
    log_file = tmp_path / "agent.log"
    setup_logging(log_file, level=logging.WARNING)
    get_logger("x").info("hidden")
    setup_logging(log_file, level=logging.DEBUG)
    get_logger("x").debug("shown")
    flush()
    text = log_file.read_text()
    assert "hidden" not in text and "shown" in text


def test_another_file_moves_logging(tmp_path):
    first, second = tmp_path / "one.log", tmp_path / "two.log"
    setup_logging(first)
    setup_logging(second)
    assert len(owned_handlers()) == 1
    get_logger("x").info("where")
    flush()
    assert "where" not in first.read_text() and "where" in second.read_text()


def test_appends_to_an_existing_log(tmp_path):
    log_file = tmp_path / "agent.log"
    log_file.write_text("earlier line\n")
    setup_logging(log_file)
    get_logger("x").info("later")
    flush()
    assert log_file.read_text().startswith("earlier line\n")


def test_no_console_handler_is_added(tmp_path):
    setup_logging(tmp_path / "agent.log")
    for handler in logging.getLogger("hermes_tui").handlers:
        assert isinstance(handler, logging.FileHandler)


def test_unopenable_file_raises_a_clear_oserror(tmp_path):
    blocker = tmp_path / "not-a-dir"
    blocker.write_text("x")
    target = blocker / "logs" / "agent.log"
    with pytest.raises(OSError) as info:
        setup_logging(target)
    assert isinstance(info.value, LogFileError)
    assert str(info.value).startswith(f"cannot open log file {target}: ")
    assert "\n" not in str(info.value)
    assert owned_handlers() == []


def test_log_path_is_a_directory(tmp_path):
    with pytest.raises(LogFileError) as info:
        setup_logging(tmp_path)
    assert str(tmp_path) in str(info.value)


def test_get_logger_names():
    assert get_logger("bench").name == "hermes_tui.bench"
    assert get_logger("hermes_tui.store.db").name == "hermes_tui.store.db"
    assert get_logger("hermes_tui").name == "hermes_tui"
    assert get_logger("hermes_tuix").name == "hermes_tui.hermes_tuix"
