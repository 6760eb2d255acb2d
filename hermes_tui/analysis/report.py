"""Turn compaction telemetry in a log into an answer.

The engine logs one content-free JSON line per micro-compaction pass
(``micro compaction telemetry: {...}``) and per batch compaction
(``context compression attempt telemetry: {...}``). This module finds those lines
in one or more log files, whatever prefix the log format put in front of them, and
reports what the spec says matters: passes, outcome mix, net tokens saved, mean
absorbed-exchange size, pass durations, occupancy, and how many batch compactions
fired, then where a pass's time goes (prefill, cached and generated tokens, model
time against the engine's own). ``--per-session`` adds each session's figures and its trajectory table,
because a session is judged on its trajectory, not on one pass.

Everything here is stdlib; ``summarize`` and the parsing helpers are pure so the
figures can be checked without a log file.
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import sys
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from hermes_tui.untrusted import InputError, decode_json_at

MICRO_MARKER = "micro compaction telemetry:"
BATCH_MARKER = "context compression attempt telemetry:"
MICRO_EVENT = "micro_compaction"
BATCH_EVENT = "batch_compaction"
# Hermes Agent's batch line (same marker, its own fields): an attempt and its commit status.
HERMES_BATCH_EVENT = "compression_attempt"
_EVENT_BY_MARKER = {MICRO_MARKER: MICRO_EVENT, BATCH_MARKER: BATCH_EVENT}

# Report order for the outcome mix; anything else a newer engine logs follows, sorted.
MICRO_OUTCOMES = (
    "absorbed",
    "defrag",
    "defrag_failed",
    "summarize_failed",
    "exchange_skipped",
    "nothing_to_absorb",
    "store_failed",
)
# Passes that changed the transcript, shown in the trajectory table.
TRAJECTORY_OUTCOMES = ("absorbed", "defrag")
# The one outcome that never called the summarizer, so it says nothing about cost.
NO_MODEL_CALL = "nothing_to_absorb"

NO_SESSION = "(no session id)"


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


# --- figures -----------------------------------------------------------------


def _number(value: Any) -> float | None:
    """``value`` if it is a finite real number (not a bool, NaN or infinity), else None."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value


def _tokens_delta(record: dict[str, Any]) -> float | None:
    delta = _number(record.get("tokens_delta"))
    if delta is None:
        before, after = _number(record.get("tokens_before")), _number(record.get("tokens_after"))
        if before is not None and after is not None:
            delta = after - before
    return delta


def percentile(values: Sequence[float], pct: float) -> float | None:
    """Nearest-rank percentile: the smallest value with at least ``pct``% of values at or below it."""
    if not values:
        return None
    ordered = sorted(values)
    rank = max(1, math.ceil(pct / 100 * len(ordered)))
    return ordered[rank - 1]


def _spread(values: list[float], *, p90: bool) -> dict[str, Any]:
    if not values:
        figures: dict[str, Any] = {"count": 0, "min": None, "median": None, "max": None}
    else:
        figures = {
            "count": len(values),
            "min": min(values),
            "median": statistics.median(values),
            "max": max(values),
        }
    if p90:
        figures["p90"] = percentile(values, 90)
    return figures


def _is_micro(record: dict[str, Any]) -> bool:
    return record.get("event") == MICRO_EVENT


def _is_batch(record: dict[str, Any]) -> bool:
    return record.get("event") in (BATCH_EVENT, HERMES_BATCH_EVENT)


def _batch_fired(record: dict[str, Any]) -> bool:
    return record.get("outcome") == "compressed" or record.get("commit_status") == "committed"


def _batch_failed(record: dict[str, Any]) -> bool:
    return record.get("outcome") == "failed" or record.get("commit_status") == "aborted"


def session_of(record: dict[str, Any]) -> str:
    session = record.get("session_id")
    return str(session) if session not in (None, "") else NO_SESSION


def summarize(records: Iterable[dict[str, Any]]) -> dict[str, Any]:
    """The report's figures over ``records`` (parsed telemetry payloads).

    - ``passes``: micro-compaction lines.
    - ``outcomes``: ``{outcome: {"count", "pct"}}``, pct of passes.
    - ``net_tokens_saved``: sum of ``-tokens_delta`` over passes (negative = cost).
    - ``mean_absorbed_exchange_tokens``: mean ``exchange_tokens`` over absorbed passes.
    - ``duration_ms``: count/min/median/p90/max over passes that called the model
      (everything but ``nothing_to_absorb``); p90 is nearest-rank.
    - ``occupancy_pct``: count/min/median/max over non-null values of micro passes.
    - ``batch_compactions``: ``{"fired": compressed, "failed": failed}`` (Hermes Agent's lines:
      ``commit_status`` committed / aborted).
    - ``sessions``: distinct session ids seen in either kind of line.
    - ``cost``: where the time goes (``pass_cost``); None when no pass logged it.
    """
    records = list(records)
    micro = [r for r in records if _is_micro(r)]
    batch = [r for r in records if _is_batch(r)]

    counts: dict[str, int] = {}
    for record in micro:
        outcome = str(record.get("outcome"))
        counts[outcome] = counts.get(outcome, 0) + 1
    order = [o for o in MICRO_OUTCOMES if o in counts] + sorted(o for o in counts if o not in MICRO_OUTCOMES)
    outcomes = {o: {"count": counts[o], "pct": 100.0 * counts[o] / len(micro)} for o in order}

    deltas = [d for d in (_tokens_delta(r) for r in micro) if d is not None]
    exchanges = [
        x for x in (_number(r.get("exchange_tokens")) for r in micro if r.get("outcome") == "absorbed") if x is not None
    ]
    durations = [
        d for d in (_number(r.get("duration_ms")) for r in micro if r.get("outcome") != NO_MODEL_CALL) if d is not None
    ]
    occupancy = [o for o in (_number(r.get("occupancy_pct")) for r in micro) if o is not None]

    return {
        "sessions": len({session_of(r) for r in micro + batch}),
        "passes": len(micro),
        "outcomes": outcomes,
        "net_tokens_saved": -sum(deltas),
        "mean_absorbed_exchange_tokens": statistics.fmean(exchanges) if exchanges else None,
        "duration_ms": _spread(durations, p90=True),
        "occupancy_pct": _spread(occupancy, p90=False),
        "batch_compactions": {
            "fired": sum(1 for r in batch if _batch_fired(r)),
            "failed": sum(1 for r in batch if _batch_failed(r)),
        },
        "cost": pass_cost(micro),
    }


# Per-pass cost fields (telemetry.MICRO_FIELDS) and how the report names them.
COST_FIELDS = ("prefill_tokens", "cached_tokens", "generated_tokens", "summarizer_ms", "overhead_ms")


def pass_cost(micro: Iterable[dict[str, Any]]) -> dict[str, Any] | None:
    """Where the passes' time went, over micro passes that called the model.

    Per field of ``COST_FIELDS``: ``{"count", "total", "median"}`` over the passes that
    logged it. ``split``: the model time of the passes whose backend reported its
    prompt and generation speeds (MLX), estimated as prefill ``prefill_tokens /
    prompt_tps`` and generation ``generated_tokens / generation_tps``:
    ``{"passes", "prefill_ms", "generation_ms", "summarizer_ms"}``. ``modes``: how many
    passes ran in each micro-compaction mode. None when no pass logged any of it.
    """
    called = [r for r in micro if r.get("outcome") != NO_MODEL_CALL]
    figures: dict[str, Any] = {}
    for name in COST_FIELDS:
        values = [v for v in (_number(r.get(name)) for r in called) if v is not None]
        figures[name] = {
            "count": len(values),
            "total": sum(values) if values else None,
            "median": statistics.median(values) if values else None,
        }
    if not any(figures[name]["count"] for name in COST_FIELDS):
        return None
    split = {"passes": 0, "prefill_ms": 0.0, "generation_ms": 0.0, "summarizer_ms": 0.0}
    for record in called:
        prefill, generated = _number(record.get("prefill_tokens")), _number(record.get("generated_tokens"))
        prompt_tps, generation_tps = _number(record.get("prompt_tps")), _number(record.get("generation_tps"))
        model_ms = _number(record.get("summarizer_ms"))
        if None in (prefill, generated, prompt_tps, generation_tps, model_ms) or not prompt_tps or not generation_tps:
            continue
        split["passes"] += 1
        split["prefill_ms"] += 1000 * prefill / prompt_tps
        split["generation_ms"] += 1000 * generated / generation_tps
        split["summarizer_ms"] += model_ms
    figures["split"] = split if split["passes"] else None
    modes: dict[str, int] = {}
    for record in called:
        if record.get("mode"):
            modes[str(record["mode"])] = modes.get(str(record["mode"]), 0) + 1
    figures["modes"] = modes
    return figures


def trajectory(records: Iterable[dict[str, Any]]) -> list[dict[str, Any]]:
    """One row per absorbed/defrag pass of one session, in log order.

    ``pass`` is the pass's position among all of the session's micro lines, so a gap
    in the numbering is a pass that changed nothing (or failed).
    """
    rows = []
    micro = [r for r in records if _is_micro(r)]
    for number, record in enumerate(micro, start=1):
        if record.get("outcome") not in TRAJECTORY_OUTCOMES:
            continue
        rows.append(
            {
                "pass": number,
                "outcome": record.get("outcome"),
                "messages_before": _number(record.get("messages_before")),
                "messages_after": _number(record.get("messages_after")),
                "tokens_before": _number(record.get("tokens_before")),
                "tokens_after": _number(record.get("tokens_after")),
                "tokens_delta": _tokens_delta(record),
                "occupancy_pct": _number(record.get("occupancy_pct")),
                "duration_ms": _number(record.get("duration_ms")),
            }
        )
    return rows


def summarize_sessions(records: Iterable[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """``summarize`` per session id (first-seen order), plus each session's trajectory.

    ``last_tokens_saved_total`` is the engine's own running total from the session's
    last micro line; it equals ``net_tokens_saved`` when the log holds every pass.
    """
    by_session: dict[str, list[dict[str, Any]]] = {}
    for record in records:
        if _is_micro(record) or _is_batch(record):
            by_session.setdefault(session_of(record), []).append(record)
    sessions = {}
    for session, own in by_session.items():
        figures = summarize(own)
        totals = [_number(r.get("tokens_saved_total")) for r in own if _is_micro(r)]
        totals = [t for t in totals if t is not None]
        figures["last_tokens_saved_total"] = totals[-1] if totals else None
        figures["trajectory"] = trajectory(own)
        sessions[session] = figures
    return sessions


# --- text --------------------------------------------------------------------


def _int(value: float | None) -> str:
    if value is None:
        return "-"
    return f"{round(value):,}"


def _signed(value: float | None) -> str:
    if value is None:
        return "-"
    return f"{round(value):+,}"


def _pct(value: float | None) -> str:
    return "-" if value is None else f"{value:.1f}%"


def _duration(ms: float | None) -> str:
    if ms is None:
        return "-"
    return f"{ms:.0f}ms" if ms < 1000 else f"{ms / 1000:.1f}s"


def _span(before: Any, after: Any, fmt=_int) -> str:
    return f"{fmt(before)} -> {fmt(after)}"


def format_figures(figures: dict[str, Any], indent: str = "  ") -> list[str]:
    """The figures of ``summarize`` as aligned text lines."""
    lines = []

    def row(label: str, text: str) -> None:
        lines.append(f"{indent}{label:<24}{text}")

    row("passes", _int(figures["passes"]))
    if figures["outcomes"]:
        width = max(len(o) for o in figures["outcomes"])
        for i, (outcome, mix) in enumerate(figures["outcomes"].items()):
            row("outcomes" if i == 0 else "", f"{outcome:<{width}}  {mix['count']:>5,}  {mix['pct']:5.1f}%")
    row("net tokens saved", _signed(figures["net_tokens_saved"]) if figures["net_tokens_saved"] else "0")
    mean = figures["mean_absorbed_exchange_tokens"]
    row("mean absorbed exchange", "-" if mean is None else f"{_int(mean)} tokens")
    d = figures["duration_ms"]
    if d["count"]:
        row(
            "pass duration",
            f"median {_duration(d['median'])}, p90 {_duration(d['p90'])}, max {_duration(d['max'])}"
            f"  ({d['count']:,} passes that called the model)",
        )
    else:
        row("pass duration", "- (no pass called the model)")
    o = figures["occupancy_pct"]
    if o["count"]:
        row("occupancy", f"min {_pct(o['min'])}, median {_pct(o['median'])}, max {_pct(o['max'])}  (of threshold)")
    else:
        row("occupancy", "- (no pass logged it)")
    b = figures["batch_compactions"]
    row("batch compactions", f"{b['fired']:,} fired, {b['failed']:,} failed")
    if figures.get("cost"):
        lines += format_cost(figures["cost"], indent)
    return lines


def format_cost(cost: dict[str, Any], indent: str = "  ") -> list[str]:
    """The "where the time goes" lines: tokens and time per pass, and the model-time split."""
    lines = [""]
    modes = ", ".join(f"{mode} {count:,}" for mode, count in sorted(cost["modes"].items()))
    lines.append(f"{indent}where the time goes" + (f"  (passes by mode: {modes})" if modes else ""))

    def row(label: str, text: str) -> None:
        lines.append(f"{indent}  {label:<22}{text}")

    def tokens(name: str) -> str:
        f = cost[name]
        if not f["count"]:
            return "- (not logged)"
        return f"total {_int(f['total'])}, median {_int(f['median'])} per pass  ({f['count']:,} passes)"

    def millis(name: str) -> str:
        f = cost[name]
        if not f["count"]:
            return "- (not logged)"
        return f"total {_duration(f['total'])}, median {_duration(f['median'])} per pass  ({f['count']:,} passes)"

    row("prefill tokens", tokens("prefill_tokens"))
    row("cached tokens", tokens("cached_tokens"))
    row("generated tokens", tokens("generated_tokens"))
    row("model time", millis("summarizer_ms"))
    row("engine overhead", millis("overhead_ms"))
    model, overhead = cost["summarizer_ms"]["total"], cost["overhead_ms"]["total"]
    if model is not None and overhead is not None and model + overhead > 0:
        row("", f"the model takes {100 * model / (model + overhead):.0f}% of pass time")
    split = cost["split"]
    if split:
        estimated = split["prefill_ms"] + split["generation_ms"]
        if estimated > 0:
            prefill_pct = 100 * split["prefill_ms"] / estimated
            row(
                "model time split",
                f"~{prefill_pct:.0f}% prefill, ~{100 - prefill_pct:.0f}% generation  (estimated from the "
                f"backend's tokens/s over {split['passes']:,} passes: {_duration(split['prefill_ms'])} + "
                f"{_duration(split['generation_ms'])} of {_duration(split['summarizer_ms'])})",
            )
    return lines


TRAJECTORY_HEADER = ("pass", "messages", "tokens", "delta", "occupancy", "duration")


def format_trajectory(rows: list[dict[str, Any]], indent: str = "  ") -> list[str]:
    """The trajectory as a table in the spec's shape: pass | messages | tokens | delta | occupancy | duration."""
    cells = [TRAJECTORY_HEADER] + [
        (
            str(r["pass"]) + (" (defrag)" if r["outcome"] == "defrag" else ""),
            _span(r["messages_before"], r["messages_after"]),
            _span(r["tokens_before"], r["tokens_after"]),
            _signed(r["tokens_delta"]),
            _pct(r["occupancy_pct"]),
            _duration(r["duration_ms"]),
        )
        for r in rows
    ]
    widths = [max(len(line[i]) for line in cells) for i in range(len(TRAJECTORY_HEADER))]

    def render(line: Sequence[str]) -> str:
        parts = [line[0].ljust(widths[0])] + [cell.rjust(width) for cell, width in zip(line[1:], widths[1:])]
        return indent + " | ".join(parts)

    out = [render(cells[0]), indent + "-+-".join("-" * w for w in widths)]
    out += [render(line) for line in cells[1:]]
    return out


def skipped_line(malformed: int) -> str:
    return f"({malformed:,} malformed telemetry line{'s' if malformed != 1 else ''} skipped)"


def format_report(
    overall: dict[str, Any],
    sessions: dict[str, dict[str, Any]] | None,
    *,
    sources: Sequence[str],
    malformed: int,
) -> str:
    lines = [f"Micro-compaction report: {', '.join(sources)}"]
    if malformed:
        lines.append(skipped_line(malformed))
    lines += ["", f"Overall ({overall['sessions']:,} session{'s' if overall['sessions'] != 1 else ''})"]
    lines += format_figures(overall)
    for session, figures in (sessions or {}).items():
        lines += ["", f"Session {session}"]
        lines += format_figures(figures)
        last = figures["last_tokens_saved_total"]
        if last is not None and last != figures["net_tokens_saved"]:
            lines.append(
                f"  (the engine's running total says {_signed(last)} saved: the log does not hold every pass)"
            )
        if figures["trajectory"]:
            lines += ["", "  trajectory (absorbed and defrag passes)"]
            lines += format_trajectory(figures["trajectory"])
        elif figures["passes"]:
            lines += ["", "  trajectory: no absorbed or defrag passes"]
    return "\n".join(lines)


# --- command line ------------------------------------------------------------


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="micro_compaction_report", description=DESCRIPTION)
    add_arguments(parser)
    return parser


DESCRIPTION = "Summarise micro-compaction and batch-compaction telemetry from hermes-tui logs."


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The report's options, on its own parser or on ``hermes-tui report``."""
    parser.add_argument(
        "--per-session",
        action="store_true",
        help="also report each session's figures and its pass trajectory",
    )
    parser.add_argument("--json", action="store_true", help="print the same figures as JSON")
    parser.add_argument(
        "--hermes",
        action="store_true",
        help="read Hermes Agent's log instead ($HERMES_HOME/logs/agent.log, default ~/.hermes/logs/agent.log); "
        "read-only",
    )
    parser.add_argument(
        "logfiles",
        nargs="*",
        metavar="LOGFILE",
        type=Path,
        help="log files to read, in order (default: hermes-tui's own agent.log, in $HERMES_TUI_HOME/logs "
        "or the user log dir)",
    )


def default_log_path(*, hermes_agent: bool = False) -> Path:
    """hermes-tui's own log, or (``hermes_agent``) Hermes Agent's, which is only ever read."""
    # Imported here: paths.py resolves the homes and platformdirs, which only main needs.
    from hermes_tui import paths

    return Path(paths.hermes_agent_log_path() if hermes_agent else paths.log_path())


def main(argv: list[str] | None = None) -> int:
    return run(build_parser().parse_args(argv))


def run(args: argparse.Namespace) -> int:
    if args.hermes and args.logfiles:
        print("micro_compaction_report: --hermes reads Hermes Agent's log; give LOGFILEs or --hermes, not both",
              file=sys.stderr)
        return 2
    paths: list[Path] = args.logfiles or [default_log_path(hermes_agent=args.hermes)]
    for path in paths:
        if not path.is_file():
            reason = "no such log file" if not path.exists() else "not a file"
            print(f"micro_compaction_report: {reason}: {path}", file=sys.stderr)
            return 2
    try:
        scan = read_logs(paths)
    except OSError as exc:
        print(f"micro_compaction_report: cannot read {exc.filename}: {exc.strerror}", file=sys.stderr)
        return 2

    sources = [str(p) for p in paths]
    overall = summarize(scan.records)
    sessions = summarize_sessions(scan.records) if args.per_session else None
    if args.json:
        document: dict[str, Any] = {"files": sources, "malformed_lines": scan.malformed, "overall": overall}
        if sessions is not None:
            document["sessions"] = sessions
        print(json.dumps(document, indent=2))
        return 0
    if overall["passes"] == 0:
        print(f"no micro-compaction telemetry found in {', '.join(sources)}")
        b = overall["batch_compactions"]
        if b["fired"] or b["failed"]:
            print(f"batch compactions: {b['fired']:,} fired, {b['failed']:,} failed")
        if scan.malformed:
            print(skipped_line(scan.malformed))
        return 0
    print(format_report(overall, sessions, sources=sources, malformed=scan.malformed))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
