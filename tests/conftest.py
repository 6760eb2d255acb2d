"""Shared fixtures: the tiny MLX model, an offline Hugging Face environment, a real
``mlx_lm.server`` serving the tiny model, and a throwaway HERMES_TUI_HOME.

The Hugging Face hub is unreachable from tests and CI, so everything that touches
mlx_lm/transformers runs with HF_HUB_OFFLINE=1 and an HF_HOME whose ``hub`` folder
exists (``mlx_lm.server``'s /v1/models fails without it).
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import NamedTuple

import pytest
from support.scripted import ScriptedServers
from support.servers import (
    SERVER_START_TIMEOUT_S,
    free_port,
    server_log_tail,
    stop_server,
    wait_until_serving,
)
from support.tiny_model import load_build_tiny
from support.tmux import tmux  # noqa: F401 - a fixture, for every test that drives a real terminal


class TinyModel(NamedTuple):
    fp32: Path
    q4: Path


class MlxServer(NamedTuple):
    base_url: str  # "http://127.0.0.1:PORT/v1"
    model: str  # the --model path: the only model name the server accepts
    process: subprocess.Popen
    log_path: Path


@pytest.fixture(scope="session")
def tiny_model(tmp_path_factory) -> TinyModel:
    """The tiny random-weight Llama (fp32 and 4-bit), built once per test run."""
    out_dir = tmp_path_factory.mktemp("tiny_model")
    paths = load_build_tiny().build(out_dir)
    return TinyModel(fp32=paths["fp32"], q4=paths["q4"])


@pytest.fixture(scope="session")
def hf_offline_env(tmp_path_factory) -> Iterator[dict[str, str]]:
    """Set HF_HUB_OFFLINE=1 and a temp HF_HOME (with ``hub/``) for the whole session.

    Returns the variables, to pass on to subprocesses.
    """
    hf_home = tmp_path_factory.mktemp("hf_home")
    (hf_home / "hub").mkdir()
    env = {"HF_HUB_OFFLINE": "1", "HF_HOME": str(hf_home)}
    with pytest.MonkeyPatch.context() as mp:
        for key, value in env.items():
            mp.setenv(key, value)
        yield env


@pytest.fixture(scope="session")
def mlx_server(tiny_model, hf_offline_env, tmp_path_factory) -> Iterator[MlxServer]:
    """A real ``mlx_lm.server`` serving the tiny fp32 model on a free local port."""
    port = free_port()
    model = str(tiny_model.fp32)
    log_path = tmp_path_factory.mktemp("mlx_server") / "server.log"
    env = {**os.environ, **hf_offline_env, "PYTHONUNBUFFERED": "1"}
    command = [
        sys.executable, "-m", "mlx_lm", "server",
        "--model", model,
        "--host", "127.0.0.1",
        "--port", str(port),
    ]
    root = f"http://127.0.0.1:{port}"
    with open(log_path, "wb") as log:
        process = subprocess.Popen(
            command, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, env=env
        )
    started = time.monotonic()
    startup_error = None
    try:
        wait_until_serving(process, root, model, log_path, started + SERVER_START_TIMEOUT_S)
    except Exception as exc:  # noqa: BLE001 - reported below, with the server's log
        startup_error = exc
    if startup_error is not None:
        stop_server(process)
        pytest.fail(
            f"could not start {' '.join(command)}: {startup_error}\n"
            f"--- server log ({log_path}) ---\n{server_log_tail(log_path)}",
            pytrace=False,
        )
    # Visible with -s / in the report's captured setup output.
    print(f"mlx_lm.server ready on {root} in {time.monotonic() - started:.1f} s")
    try:
        yield MlxServer(base_url=f"{root}/v1", model=model, process=process, log_path=log_path)
    finally:
        stop_server(process)


@pytest.fixture
def hermes_home(tmp_path, monkeypatch) -> Path:
    """A fresh hermes-tui home (HERMES_TUI_HOME) for one test; Hermes Agent's home (HERMES_HOME) points
    at a folder of its own that does not exist, so no test reads or writes the real ~/.hermes."""
    home = tmp_path / "hermes_home"
    home.mkdir()
    monkeypatch.setenv("HERMES_TUI_HOME", str(home))
    monkeypatch.setenv("HERMES_HOME", str(tmp_path / "hermes_agent_home"))
    return home


@pytest.fixture
def servers(tmp_path) -> Iterator[ScriptedServers]:
    """This test's scripted OpenAI-compatible servers (``servers.start(script)``), stopped at its end."""
    started = ScriptedServers(tmp_path)
    yield started
    started.stop()


@pytest.fixture
def scripted(servers: ScriptedServers):
    """``servers.start``: a scripted server answering with ``script``."""
    return servers.start
