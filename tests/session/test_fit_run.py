"""The guard before every request on the headless path: ``hermes-tui run --resume`` of an
imported session larger than the endpoint's window, in a subprocess, against the scripted
server (a real window, reported by ``/v1/models``, enforced with llama.cpp's HTTP 400)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from support.scripted import answer, long_agent_session

from hermes_tui.config import Config
from hermes_tui.session.wiring import import_transcript
from hermes_tui.store import Store
from hermes_tui.util import paths

ROOT = Path(__file__).resolve().parents[2]
WINDOW = 16_384


def run(home: Path, config: Path, *args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "HERMES_TUI_HOME": str(home), "PYTHONUNBUFFERED": "1"}
    env.pop("OPENAI_API_KEY", None)
    return subprocess.run([sys.executable, "-m", "hermes_tui.cli", "--config", str(config), "run", *args],
                          env=env, cwd=ROOT, stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=180)


def imported_session(tmp_path: Path, exchanges: int) -> str:
    path = tmp_path / "imported.json"
    path.write_text(json.dumps([m.to_openai() for m in long_agent_session(exchanges, 1060)]))
    with Store(paths.state_db_path()) as store:
        return import_transcript(store, Config(), path).id


def test_run_resumes_an_over_window_session_compacted_and_says_so(servers, hermes_home, tmp_path):
    server = servers.start({"window": WINDOW, "replies": [answer("All twenty modules read.")]})
    config = tmp_path / "config.yaml"  # no context_length: the server's /v1/models says it
    config.write_text(f"model:\n  provider: openai-api\n  model: scripted\n  base_url: {server.base_url}\n"
                      "  max_tokens: 512\nauxiliary:\n  compression:\n    provider: extractive\n")
    session_id = imported_session(tmp_path, 20)  # ~50K tokens
    proc = run(hermes_home, config, "--resume", session_id, "Summarize what you read.")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == "All twenty modules read.\n"
    served = server.served()
    assert [line["status"] for line in served] == [200], proc.stderr
    assert served[0]["prompt_tokens"] + 512 <= WINDOW
    compacting = [line for line in proc.stderr.splitlines() if line.startswith("compact")]
    assert len(compacting) == 2, proc.stderr
    assert compacting[0].startswith("compacting: the conversation is ") and f"{WINDOW:,}" in compacting[0]
    # The trim stage (no model) is enough here: batch compaction is not needed.
    assert compacting[1].startswith("compacted (trimmed): ") and "the request fits" in compacting[1]


def test_run_sends_nothing_when_even_compaction_cannot_make_it_fit(servers, hermes_home, tmp_path):
    server = servers.start({"window": 2048, "replies": [answer("never")]})
    config = tmp_path / "config.yaml"
    config.write_text(f"model:\n  provider: openai-api\n  model: scripted\n  base_url: {server.base_url}\n"
                      "  max_tokens: 512\nauxiliary:\n  compression:\n    provider: extractive\n")
    session_id = imported_session(tmp_path, 20)
    proc = run(hermes_home, config, "--resume", session_id, "Go on.")
    assert proc.returncode != 0
    assert server.served() == []
    error = proc.stderr.strip().splitlines()[-1]
    assert error.startswith("hermes-tui: Nothing was sent: even after compaction"), proc.stderr
    assert "2,048 tokens" in error and "512" in error and "new session" in error
    assert "Traceback" not in proc.stderr
