"""The agent doing a real task with a real small model (Qwen2.5-Coder-1.5B-Instruct under
llama-server), through the command users run: ``hermes-tui run`` in a small Python project.

What the scripted servers could not show: that a real model, told what it needs by the system
prompt, calls a tool (natively or in a text form the app recovers) and ends the turn naming
the right file.
"""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from hermes_tui.store import Store

pytestmark = [pytest.mark.realmodels, pytest.mark.timeout(900)]

BENCH = Path(__file__).resolve().parents[2] / "benchmarks"


def _bench_module(name: str):
    spec = importlib.util.spec_from_file_location(name, BENCH / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def test_the_model_finds_a_definition_with_a_tool(large_model_server, tmp_path):
    project = _bench_module("agent_task_project")
    workspace = project.make_project(tmp_path / "ws")
    home = tmp_path / "home"
    home.mkdir()
    (home / "config.yaml").write_text(json.dumps({
        "model": {"provider": "openai-api", "base_url": large_model_server.base_url,
                  "model": large_model_server.model},
        "agent": {"max_steps": 8},
        "auxiliary": {"compression": {"provider": "extractive"}},
    }), encoding="utf-8")
    env = {**os.environ, "HERMES_TUI_HOME": str(home), "HF_HUB_OFFLINE": "1"}
    env.pop("OPENAI_API_KEY", None)
    proc = subprocess.run(
        [sys.executable, "-m", "hermes_tui.cli", "run", "--workspace", str(workspace), "--approve", "full",
         "Which file in this repository defines the class InventoryLedger? Answer with the file's path."],
        cwd=workspace, env=env, capture_output=True, text=True, timeout=840, stdin=subprocess.DEVNULL)
    with Store(home / "state.db") as store:
        (info,) = store.list_sessions()
        messages = store.load_active(info.id)
    explain = f"exit {proc.returncode}\nstdout: {proc.stdout[-1500:]}\nstderr: {proc.stderr[-3000:]}\n" + "\n".join(
        f"{m.role}: {m.content[:300]!r} {m.tool_calls}" for m in messages)
    assert proc.returncode == 0, explain
    calls = [call for m in messages if m.role == "assistant" for call in m.tool_calls or []]
    assert calls, explain  # it looked, instead of guessing
    assert project.LEDGER_FILE in proc.stdout, explain
