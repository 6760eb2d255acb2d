"""Finding compaction and chat telemetry lines in logs, whatever prefix the log format put
in front of them.

The engine logs one content-free JSON line per micro-compaction pass
(``micro compaction telemetry: {...}``) and per batch compaction
(``context compression attempt telemetry: {...}``); the session logs one per chat-model
request (``chat request telemetry: {...}``). Stdlib only, pure but for ``read_logs``.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from hermes_tui.util.untrusted import InputError, decode_json_at

MICRO_MARKER = "micro compaction telemetry:"
BATCH_MARKER = "context compression attempt telemetry:"
CHAT_MARKER = "chat request telemetry:"
MICRO_EVENT = "micro_compaction"
BATCH_EVENT = "batch_compaction"
CHAT_EVENT = "chat_request"
# Hermes Agent's batch line (same marker, its own fields): an attempt and its commit status.
HERMES_BATCH_EVENT = "compression_attempt"
_EVENT_BY_MARKER = {MICRO_MARKER: MICRO_EVENT, BATCH_MARKER: BATCH_EVENT, CHAT_MARKER: CHAT_EVENT}

class MalformedTelemetry(ValueError):
    """A line carrying a telemetry marker whose payload is not a JSON object we can read
    (not JSON, nested too deep, a number too long, a lone surrogate)."""


@dataclass
class Scan:
    """What reading some log lines produced: telemetry records and how many were unreadable."""

    records: list[dict[str, Any]] = field(default_factory=list)
    malformed: int = 0


def parse_line(line: str) -> dict[str, Any] | None:
    """The telemetry record on ``line``, or None when the line carries no marker.

    The marker may sit anywhere in the line (log formats differ); the JSON object
    right after it is the payload. The record's ``event`` defaults to the one the
    marker names. Raises ``MalformedTelemetry`` when the payload does not parse.
    """
    found = [(line.find(marker), marker) for marker in _EVENT_BY_MARKER]
    found = [(at, marker) for at, marker in found if at >= 0]
    if not found:
        return None
    at, marker = min(found)
    start = at + len(marker)
    while start < len(line) and line[start].isspace():
        start += 1
    try:
        payload, _ = decode_json_at(line, start)
    except InputError as exc:
        raise MalformedTelemetry(str(exc)) from None
    if not isinstance(payload, dict):
        raise MalformedTelemetry("telemetry payload is not a JSON object")
    payload.setdefault("event", _EVENT_BY_MARKER[marker])
    return payload


def scan_lines(lines: Iterable[str], scan: Scan | None = None) -> Scan:
    """Collect the telemetry records in ``lines``, counting malformed ones."""
    scan = scan if scan is not None else Scan()
    for line in lines:
        try:
            record = parse_line(line)
        except MalformedTelemetry:
            scan.malformed += 1
            continue
        if record is not None:
            scan.records.append(record)
    return scan


def read_logs(paths: Sequence[Path]) -> Scan:
    """Scan each log in order. Raises ``OSError`` for a log that cannot be read."""
    scan = Scan()
    for path in paths:
        with open(path, encoding="utf-8", errors="replace") as log:
            scan_lines(log, scan)
    return scan

