"""One rule for what runs after an exchange, used by every path.

The same transcript goes through the app (``App.run_test``, replies from a scripted
OpenAI-compatible server in a subprocess), ``hermes-tui compact``, ``hermes-tui eval``
and ``hermes-tui demo`` (subprocesses); each logs the compaction policy's decisions
(``compaction policy: exchange N (...) -> ...``) and the lists must be equal.
"""

from __future__ import annotations

import json
import logging
import os
import re
import subprocess
import sys
from pathlib import Path

from support.chat_app import app_test, settle, type_and_send
from support.servers import ScriptedServer

from hermes_tui.config import Config
from hermes_tui.providers.openai.chat import OpenAIChatClient
from hermes_tui.store import Store
from hermes_tui.tui.app import HermesApp
from hermes_tui.tui.screens.chat import ChatScreen

ROOT = Path(__file__).resolve().parents[1]
DEMO = ROOT / "hermes_tui" / "assets" / "demo_session.json"
CLI_TIMEOUT_S = 300
DECISION = re.compile(r"compaction policy: (exchange \d+ \(\w+, \d+ tokens\) -> [\w ]+)")
LIMIT = 2048
TURNS = 14
WORDS = ("parser", "token", "branch", "schema", "cursor", "window", "fixture", "buffer", "socket", "report")


def chat_transcript() -> list[dict]:
    """Plain chat: each reply about 300 tokens, so a 2,048-token window fills every few turns."""
    messages = []
    for n in range(TURNS):
        messages.append({"role": "user", "content": f"Question {n}: what about the {WORDS[n % 10]}?"})
        body = " ".join(f"{WORDS[(n + k) % 10]}{k}" for k in range(160))
        messages.append({"role": "assistant", "content": f"Answer {n}: {body}."})
    return messages


def decisions(text: str) -> list[str]:
    return DECISION.findall(text)


def write_config(home: Path) -> None:
    """The app's settings for the CLI (its chat model is never called there)."""
    (home / "config.yaml").write_text(
        "model:\n  provider: openai-api\n  model: scripted\n"
        f"  base_url: http://127.0.0.1:9/v1\n  context_length: {LIMIT}\n"
        "auxiliary:\n  compression:\n    provider: extractive\n",
        encoding="utf-8",
    )


def run_cli(home: Path, *args: str) -> str:
    """Run a command with a fresh log; the decisions it logged."""
    log = home / "logs" / "agent.log"
    if log.exists():
        log.unlink()
    env = {**os.environ, "HERMES_TUI_HOME": str(home)}
    proc = subprocess.run([sys.executable, "-m", "hermes_tui.cli", *args], env=env, capture_output=True,
                          text=True, stdin=subprocess.DEVNULL, timeout=CLI_TIMEOUT_S)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return log.read_text(encoding="utf-8")


def test_compact_and_eval_decide_as_the_app_does(hermes_home, tmp_path):
    transcript = chat_transcript()
    app, system_prompt = app_decisions(tmp_path, transcript)
    # The app's turns begin with its system prompt: compact and eval read the same transcript.
    path = tmp_path / "chat.json"
    path.write_text(json.dumps([{"role": "system", "content": system_prompt}, *transcript]), encoding="utf-8")
    write_config(hermes_home)

    compact = decisions(run_cli(hermes_home, "compact", str(path), "--out", str(tmp_path / "out.json")))
    evaluated = decisions(run_cli(hermes_home, "eval", str(path), "--turns", "user", "--plant-every", "0",
                                  "--context-limit", str(LIMIT)))

    # The watermark policy: several passes, each when the context passed the high mark.
    assert len(compact) >= 2 and all("micro down to" in d for d in compact), compact
    assert [int(d.split()[1]) for d in compact] == sorted({int(d.split()[1]) for d in compact})
    assert evaluated == compact
    assert app == compact
    print("\n".join(compact))


def app_decisions(tmp_path: Path, transcript: list[dict]) -> tuple[list[str], str]:
    """What the app decided over the transcript's turns, and the system prompt it began with."""
    script = [{"text": [m["content"]], "finish_reason": "stop"} for m in transcript if m["role"] == "assistant"]
    server = ScriptedServer(script, tmp_path)
    try:
        config = Config().with_overrides({
            "model.provider": "openai-api", "model.model": "scripted",
            "model.base_url": server.base_url,
            "model.context_length": LIMIT, "auxiliary.compression.provider": "extractive",
        })
        return _drive_app(config, tmp_path, [m["content"] for m in transcript if m["role"] == "user"])
    finally:
        server.stop()


class Lines(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.INFO)
        self.lines: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(record.getMessage())


def _drive_app(config: Config, tmp_path: Path, user_texts: list[str]) -> tuple[list[str], str]:
    lines = Lines()
    logger = logging.getLogger("hermes_tui.compaction")
    level = logger.level
    logger.addHandler(lines)
    logger.setLevel(logging.INFO)
    prompts: list[str] = []
    try:
        _run_app(config, tmp_path, user_texts, prompts)
    finally:
        logger.removeHandler(lines)
        logger.setLevel(level)
    (system_prompt,) = prompts
    return decisions("\n".join(lines.lines)), system_prompt


@app_test
async def _run_app(config: Config, tmp_path: Path, user_texts: list[str], prompts: list[str]) -> None:
    with Store(tmp_path / "app.db") as store:
        # A chat model without tools, as compact's replay has none: the requests then hold the
        # conversation alone (tool definitions would not fit this 2,048-token window).
        chat = OpenAIChatClient(config.model.base_url, config.model.model)
        chat.supports_tools = False
        app = HermesApp(config, store, chat=chat, reply_tokens=64)
        async with app.run_test(size=(100, 30)) as pilot:
            screen = app.screen
            assert isinstance(screen, ChatScreen)
            for text in user_texts:
                await type_and_send(pilot, text)
                await settle(pilot, screen)  # the reply and any pass it made due have landed
            first = screen.session.conv.messages[0]
            assert first.is_system_prompt
            prompts.append(first.content)


def test_demo_decides_as_compact_does(hermes_home):
    (hermes_home / "config.yaml").write_text("auxiliary:\n  compression:\n    provider: extractive\n")
    demo = decisions(run_cli(hermes_home, "demo"))
    compact = decisions(run_cli(hermes_home, "compact", str(DEMO), "--turns", "step", "--context-limit", "32768",
                                "--out", os.devnull))
    assert len(demo) >= 2, demo
    assert demo == compact
    print("\n".join(demo))
