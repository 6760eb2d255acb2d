"""Every chat request logs what the chat model prefilled; ``report`` adds it up per turn.

A real ``hermes-tui run`` against the scripted OpenAI-compatible server (a subprocess
on 127.0.0.1) whose usage chunks report prompt and cached tokens, then a real
``hermes-tui report --per-session`` on the log it wrote.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from support.servers import ScriptedServer

from hermes_tui.analysis.telemetry_log import CHAT_MARKER, read_logs

ROOT = Path(__file__).resolve().parents[2]
TIMEOUT_S = 120


def usage(prompt: int, cached: int | None, completion: int = 7) -> dict:
    out: dict = {"prompt_tokens": prompt, "completion_tokens": completion, "total_tokens": prompt + completion}
    if cached is not None:
        out["prompt_tokens_details"] = {"cached_tokens": cached}
    return out


@pytest.fixture
def server(tmp_path):
    script = [
        {"tool_calls": [{"id": "c1", "name": "read_file", "arguments": [json.dumps({"path": "notes.txt"})]}],
         "finish_reason": "tool_calls", "usage": usage(900, None)},
        {"text": ["It says hello."], "finish_reason": "stop", "usage": usage(1000, 800)},
    ]
    server = ScriptedServer(script, tmp_path)
    yield server.base_url
    server.stop()


def cli(home: Path, *args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "HERMES_TUI_HOME": str(home), "PYTHONUNBUFFERED": "1"}
    env.pop("OPENAI_API_KEY", None)
    return subprocess.run([sys.executable, "-m", "hermes_tui.cli", *args], env=env, cwd=ROOT,
                          stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=TIMEOUT_S)


@pytest.mark.integration
def test_chat_requests_log_prompt_cached_and_prefill_and_report_adds_them_up(server, hermes_home, tmp_path):
    workspace = tmp_path / "ws"
    workspace.mkdir()
    (workspace / "notes.txt").write_text("hello\n")
    config = tmp_path / "config.yaml"
    config.write_text("\n".join([
        "model:", "  provider: openai-api", "  model: scripted", f"  base_url: {server}", "  context_length: 8192",
        "auxiliary:", "  compression:", "    provider: extractive", "",
    ]))
    proc = cli(hermes_home, "--config", str(config), "run", "What does notes.txt say?", "--workspace", str(workspace))
    assert proc.returncode == 0, proc.stderr[-2000:]

    log = hermes_home / "logs" / "agent.log"
    chat = [r for r in read_logs([log]).records if r["event"] == "chat_request"]
    assert len(chat) == 2, log.read_text()[-2000:]
    first, second = chat
    assert (first["prompt_tokens"], first["cached_tokens"], first["prefill_tokens"]) == (900, None, 900)
    assert (second["prompt_tokens"], second["cached_tokens"], second["prefill_tokens"]) == (1000, 800, 200)
    assert first["turn"] == second["turn"] == 1
    # Our own count of what was sent: the second request carries the first reply and its result.
    assert 0 < first["context_tokens"] < second["context_tokens"]
    assert first["occupancy_pct"] == round(100 * first["context_tokens"] / int(8192 * 0.8), 1)
    assert CHAT_MARKER in log.read_text()
    assert "notes.txt" not in "".join(line for line in log.read_text().splitlines() if CHAT_MARKER in line)

    report = cli(hermes_home, "report", "--per-session", str(log))
    assert report.returncode == 0, report.stderr
    out = report.stdout
    assert "chat model  (2 requests, 2 with the provider's usage)" in out
    assert "total 1,900" in out.split("prompt tokens", 1)[1].splitlines()[0]
    assert "total 800  (42.1% of prompt tokens reused)" in out
    assert "prefill per turn" in out and "median 1,100, max 1,100  (1 turn)" in out
    # The session's occupancy over its requests, as a chart with the threshold drawn across.
    chart = out.split("occupancy over the session", 1)[1]
    assert "per request" in chart.splitlines()[0]
    assert "100% ┼" in chart and "└" in chart and "2 requests" in chart
