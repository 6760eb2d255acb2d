"""``hermes-tui run`` with MCP servers: the real binary in a subprocess, a real stdio MCP server
(tests/support/mcp_server.py) and one that dies at start (tests/support/mcp_faulty_server.py),
the scripted OpenAI-compatible model (tests/support/scripted_openai_server.py) calling a tool."""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest
from support.servers import stop_server as _stop

ROOT = Path(__file__).resolve().parents[2]
SUPPORT = ROOT / "tests" / "support"
CLI_TIMEOUT_S = 180


@pytest.fixture
def scripted_url(tmp_path):
    script = [
        {"tool_calls": [{"id": "e1", "name": "notes__environment", "arguments": ["{}"]},
                        {"id": "p1", "name": "notes__picture", "arguments": ["{}"]}],
         "finish_reason": "tool_calls"},
        {"text": ["the server told me"], "finish_reason": "stop"},
    ]
    (tmp_path / "script.json").write_text(json.dumps(script))
    process = subprocess.Popen(
        [sys.executable, str(SUPPORT / "scripted_openai_server.py"), str(tmp_path / "script.json"),
         str(tmp_path / "requests.jsonl")], stdout=subprocess.PIPE, stdin=subprocess.DEVNULL, text=True)
    line = process.stdout.readline()
    assert line.startswith("PORT "), line
    yield f"http://127.0.0.1:{int(line.split()[1])}/v1"
    _stop(process)


def test_a_headless_run_calls_an_mcp_tool_reports_a_failed_server_and_leaves_no_server_behind(
        scripted_url, hermes_home, tmp_path):
    config = tmp_path / "config.yaml"
    config.write_text(f"""\
model:
  provider: openai-api
  model: scripted
  base_url: {scripted_url}
  context_length: 32768
auxiliary:
  compression:
    provider: extractive
mcp_servers:
  notes:
    command: {sys.executable}
    args: [{SUPPORT / "mcp_server.py"}, stdio]
    env: [NAMED_VARIABLE]
    trust: trusted
  broken:
    command: {sys.executable}
    args: [{SUPPORT / "mcp_faulty_server.py"}, exit]
""")
    env = {**os.environ, "HERMES_TUI_HOME": str(hermes_home), "PYTHONUNBUFFERED": "1",
           "NAMED_VARIABLE": "passed on", "UNNAMED_SECRET": "kept from the server"}
    proc = subprocess.run([sys.executable, "-m", "hermes_tui.cli", "--config", str(config), "run", "what env?"],
                          env=env, cwd=ROOT, stdin=subprocess.DEVNULL, capture_output=True, text=True,
                          timeout=CLI_TIMEOUT_S)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert proc.stdout.strip() == "the server told me"
    lines = proc.stderr.splitlines()
    assert any(line.startswith("mcp broken: failed: exited during startup: faulty server: cannot start")
               for line in lines), proc.stderr
    assert any(line.startswith("tool notes__environment ") and "-> ok" in line for line in lines), proc.stderr

    conn = sqlite3.connect(hermes_home / "state.db")
    try:
        results = dict(conn.execute("SELECT tool_call_id, content FROM messages WHERE role = 'tool'"))
    finally:
        conn.close()
    # An image is a placeholder in the transcript, beside the text that came with it.
    assert results["p1"] == "a red pixel\n[image: image/png, 70 B]"
    reported = json.loads(results["e1"])
    assert reported["env"].get("NAMED_VARIABLE") == "passed on"
    assert "UNNAMED_SECRET" not in reported["env"]
    # The run stopped its server before it exited (no orphan left running under init).
    assert not Path(f"/proc/{reported['pid']}").exists()
