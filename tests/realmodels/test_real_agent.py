"""The agent with the first-run screen's model (Qwen2.5-Coder-1.5B-Instruct under llama-server):
asked where a class is defined in a small workspace, it looks with a tool and names the file.

What the scripted server could not show: that a real small model, through ``hermes-tui run``
(the command users run), calls a tool the app runs (natively or written as text) and ends
the turn with an answer drawn from what it found.
"""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = [pytest.mark.realmodels, pytest.mark.timeout(600)]

ROOT = Path(__file__).resolve().parents[2]
RUN_TIMEOUT_S = 480

FILES = {
    "README.md": "# stockroom\n\nKeeps track of what the shop holds.\n",
    "pyproject.toml": '[project]\nname = "stockroom"\nversion = "0.2.0"\n',
    "stockroom/__init__.py": "",
    "stockroom/cart.py": "from stockroom.pricing import total\n\n\nclass Cart:\n    def __init__(self):\n"
                         "        self.items = []\n\n    def total(self):\n        return total(self.items)\n",
    "stockroom/pricing.py": "def total(items):\n    return sum(price * qty for price, qty in items)\n",
    "stockroom/ledger.py": "class InventoryLedger:\n    \"\"\"Counts what comes in and goes out.\"\"\"\n\n"
                           "    def __init__(self):\n        self.counts = {}\n\n    def add(self, sku, n):\n"
                           "        self.counts[sku] = self.counts.get(sku, 0) + n\n",
    "tests/test_cart.py": "from stockroom.cart import Cart\n\n\ndef test_empty():\n    assert Cart().total() == 0\n",
}


def test_the_model_looks_and_names_the_file_that_defines_a_class(coder_model_server, tmp_path):
    workspace = tmp_path / "ws"
    for name, text in FILES.items():
        (workspace / name).parent.mkdir(parents=True, exist_ok=True)
        (workspace / name).write_text(text)
    home = tmp_path / "home"
    config = tmp_path / "config.yaml"
    config.write_text(
        "model:\n  provider: openai-api\n"
        f"  model: {coder_model_server.model}\n  base_url: {coder_model_server.base_url}\n"
        "  context_length: 16384\n"
        "auxiliary:\n  compression:\n    provider: extractive\n")
    env = {**os.environ, "HERMES_TUI_HOME": str(home), "PYTHONUNBUFFERED": "1"}
    env.pop("OPENAI_API_KEY", None)
    proc = subprocess.run(
        [sys.executable, "-m", "hermes_tui.cli", "--config", str(config), "run",
         "Which file in this repository defines the class InventoryLedger? Answer with the file's path.",
         "--workspace", str(workspace), "--approve", "full"],
        env=env, cwd=ROOT, stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=RUN_TIMEOUT_S)
    assert proc.returncode == 0, proc.stderr[-3000:]

    with sqlite3.connect(home / "state.db") as db:
        rows = db.execute("SELECT role, content, tool_calls FROM messages ORDER BY position, rowid").fetchall()
    calls = [call for role, _, tool_calls in rows if role == "assistant" and tool_calls
             for call in json.loads(tool_calls)]
    results = [content for role, content, _ in rows if role == "tool"]
    assert calls and len(results) == len(calls), rows  # it looked, and every call was answered
    assert any("stockroom/ledger.py" in result or "class InventoryLedger" in result for result in results), results
    assert "stockroom/ledger.py" in proc.stdout, (proc.stdout, rows)
