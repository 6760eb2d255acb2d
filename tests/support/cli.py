"""Running ``hermes-tui`` as users do: the real entry point in a subprocess."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

SCRIPT = Path(sys.executable).parent / "hermes-tui"
ENTRY_POINTS = {
    "module": [sys.executable, "-m", "hermes_tui.cli"],
    "script": [str(SCRIPT)],
}
CLI_TIMEOUT_S = 120


def run_cli(
    home: Path, *args: str, entry: str = "module", cwd: Path | None = None, timeout: float = CLI_TIMEOUT_S
) -> subprocess.CompletedProcess:
    env = {**os.environ, "HERMES_TUI_HOME": str(home), "PYTHONUNBUFFERED": "1"}
    env.pop("OPENAI_API_KEY", None)
    return subprocess.run(
        [*ENTRY_POINTS[entry], *args],
        env=env,
        cwd=cwd or home,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def explain(proc: subprocess.CompletedProcess) -> str:
    return f"exit {proc.returncode}\n--- stdout ---\n{proc.stdout[-3000:]}\n--- stderr ---\n{proc.stderr[-3000:]}"


def write_json(path: Path, messages: list[dict]) -> Path:
    path.write_text(json.dumps(messages, indent=2), encoding="utf-8")
    return path


# A pass after every turn: these tests watch what passes do, not when the policy runs them.
COMPACT = ("--provider", "extractive", "--context-limit", "4096", "--policy", "per_exchange")
