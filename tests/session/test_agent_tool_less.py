"""A model that cannot take tools: the turn runs without them and says so once.

Through ``hermes-tui run`` in a subprocess against the scripted OpenAI-compatible server
(tests/support/scripted_openai_server.py) that refuses requests with tools, as
``llama-server`` without ``--jinja`` does; and in-process with the tiny MLX model, whose
chat template has no tools."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
from pathlib import Path

from support.servers import ScriptedServer

from hermes_tui.config import Config
from hermes_tui.providers.extractive.summarizer import ExtractiveSummarizer
from hermes_tui.providers.mlx.chat import MlxChatClient
from hermes_tui.providers.mlx.runtime import MlxRuntime
from hermes_tui.session.agent import COMPLETED, AgentListener, AgentTurn, Tools
from hermes_tui.session.wiring import open_session
from hermes_tui.store import Store
from hermes_tui.tools.builtin import builtin_registry
from hermes_tui.tools.workspace import Workspace

ROOT = Path(__file__).resolve().parents[2]
CLI_TIMEOUT_S = 120


def test_run_against_a_server_refusing_tools_goes_on_without_them_and_says_so(hermes_home, tmp_path):
    workspace = tmp_path / "ws"
    workspace.mkdir()
    server = ScriptedServer([
        {"status": 400, "error": "tools param requires --jinja flag"},
        {"text": ["Plain ", "answer."], "finish_reason": "stop"},
    ], tmp_path / "model")
    try:
        config = tmp_path / "config.yaml"
        config.write_text(
            "model:\n  provider: openai-api\n  model: scripted\n"
            f"  base_url: {server.base_url}\n  context_length: 32768\n"
            "auxiliary:\n  compression:\n    provider: extractive\n")
        env = {**os.environ, "HERMES_TUI_HOME": str(hermes_home), "PYTHONUNBUFFERED": "1"}
        env.pop("OPENAI_API_KEY", None)
        proc = subprocess.run(
            [sys.executable, "-m", "hermes_tui.cli", "--config", str(config), "run", "hi",
             "--workspace", str(workspace)],
            env=env, cwd=ROOT, stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=CLI_TIMEOUT_S)
        requests = server.requests()
    finally:
        server.stop()
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert proc.stdout == "Plain answer.\n"
    notes = [line for line in proc.stderr.splitlines() if "without tools" in line]
    assert len(notes) == 1 and "--jinja" in notes[0], proc.stderr
    assert len(requests) == 2
    assert requests[0]["tools"] and "tools" not in requests[1]
    assert requests[1]["messages"] == requests[0]["messages"]  # the same request, less the tools


class Notes(AgentListener):
    def __init__(self) -> None:
        self.notices: list[str] = []

    def notice(self, text: str) -> None:
        self.notices.append(text)


def test_the_tiny_mlx_model_runs_tool_less_with_one_notice_per_session(tiny_model, hermes_home, tmp_path):
    chat = MlxChatClient(str(tiny_model.fp32), runtime=MlxRuntime())
    config = Config().with_overrides({
        "model.context_length": 32768, "auxiliary.compression.provider": "extractive"})
    notes = Notes()
    with Store(hermes_home / "state.db") as store:
        session = open_session(config, store, title="tiny", chat=chat, summarizer=ExtractiveSummarizer())
        tools = Tools(registry=builtin_registry(), workspace=Workspace(tmp_path))
        outcomes = []
        for prompt in ("list the files", "and again"):
            session.add_user_message(prompt)
            result = AgentTurn(session, tools, listener=notes, max_tokens=4).run(threading.Event())
            outcomes.append((result.outcome, result.steps, result.calls))
        session.close()
    assert outcomes == [(COMPLETED, 1, 0), (COMPLETED, 1, 0)]
    tool_less = [n for n in notes.notices if "has no tool support" in n]
    assert len(tool_less) == 1, notes.notices
    # each reply ran into its cap of 4 tokens, and each says so
    assert sum("cut off at its cap of 4 tokens" in n for n in notes.notices) == 2, notes.notices
    assert "no tool support" in notes.notices[0] and "without tools" in notes.notices[0]
