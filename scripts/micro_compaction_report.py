#!/usr/bin/env python3
"""Summarise micro-compaction telemetry from hermes-tui logs.

    python scripts/micro_compaction_report.py [--per-session] [--json] [--hermes | LOGFILE ...]

Defaults to hermes-tui's own agent.log ($HERMES_TUI_HOME/logs, else the user log dir);
--hermes reads Hermes Agent's ($HERMES_HOME/logs/agent.log), read-only. The same report as ``hermes-tui report``;
the code lives in ``hermes_tui.report``.
"""

import sys
from pathlib import Path

try:
    from hermes_tui.report import main
except ImportError:
    # Run from a checkout without the package installed: use the repo root.
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
    from hermes_tui.report import main

if __name__ == "__main__":
    raise SystemExit(main())
