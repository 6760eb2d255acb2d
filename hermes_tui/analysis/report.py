"""``hermes-tui report`` (and ``scripts/micro_compaction_report.py``): telemetry in a log, as an answer.

It reads the telemetry lines (``telemetry_log``) of one or more logs and reports what
the spec says matters (``report_figures``, as text by ``report_text``): passes, outcome
mix, net tokens saved, pass durations, occupancy, batch compactions fired and failed,
where a pass's time goes, and what the chat model had to prefill per turn and how much
its prefix cache served. ``--per-session`` adds each session's figures, its trajectory
table and its occupancy chart, because a session is judged on its trajectory, not on
one pass.
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

# The parts, importable from here as before.
from hermes_tui.analysis.report_figures import (  # noqa: F401 - re-exported
    COST_FIELDS,
    MICRO_OUTCOMES,
    NO_MODEL_CALL,
    NO_SESSION,
    chat_figures,
    pass_cost,
    percentile,
    session_of,
    summarize,
    summarize_sessions,
    trajectory,
)
from hermes_tui.analysis.report_text import (  # noqa: F401 - re-exported
    batch_text,
    format_cost,
    format_figures,
    format_report,
    format_trajectory,
    skipped_line,
)
from hermes_tui.analysis.telemetry_log import (  # noqa: F401 - re-exported
    BATCH_MARKER,
    CHAT_MARKER,
    MICRO_MARKER,
    MalformedTelemetry,
    Scan,
    parse_line,
    read_logs,
    scan_lines,
)

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
    from hermes_tui.util import paths

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
    if overall["passes"] == 0 and not overall["chat"]:
        print(f"no micro-compaction telemetry found in {', '.join(sources)}")
        b = overall["batch_compactions"]
        if b["fired"] or b["failed"]:
            print(f"batch compactions: {batch_text(b)}")
        if scan.malformed:
            print(skipped_line(scan.malformed))
        return 0
    print(format_report(overall, sessions, sources=sources, malformed=scan.malformed))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
