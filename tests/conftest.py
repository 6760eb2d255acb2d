"""Shared fixtures: the tiny MLX model, an offline Hugging Face environment, a real
``mlx_lm.server`` serving the tiny model, and a throwaway HERMES_TUI_HOME.

The Hugging Face hub is unreachable from tests and CI, so everything that touches
mlx_lm/transformers runs with HF_HUB_OFFLINE=1 and an HF_HOME whose ``hub`` folder
exists (``mlx_lm.server``'s /v1/models fails without it).
"""

from __future__ import annotations

import importlib.util
import json
import os
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path
from collections.abc import Iterator
from typing import NamedTuple

import pytest

REPO_ROOT = Path(__file__).resolve().parents[1]
BUILD_TINY = REPO_ROOT / "models" / "build_tiny.py"

SERVER_START_TIMEOUT_S = 90.0
SERVER_STOP_TIMEOUT_S = 10.0


def load_build_tiny():
    """Import models/build_tiny.py by path (models/ is not a package)."""
    spec = importlib.util.spec_from_file_location("build_tiny", BUILD_TINY)
    module = importlib.util.module_from_spec(spec)
    assert spec.loader is not None
    spec.loader.exec_module(module)
    return module


def free_port() -> int:
    """A TCP port nothing listens on right now (the OS picks it)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


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


def _read_log(log_path: Path) -> str:
    try:
        return log_path.read_text(errors="replace")
    except OSError:
        return ""


def _server_log_tail(log_path: Path, limit: int = 6000) -> str:
    """The end of the server log without the /health polling lines."""
    lines = [line for line in _read_log(log_path).splitlines() if '"GET /health' not in line]
    return "\n".join(lines)[-limit:] or "(empty server log)"


def _wait_until_serving(
    process: subprocess.Popen, root: str, model: str, log_path: Path, deadline: float
) -> None:
    """Wait for /health, then for one real completion.

    mlx_lm 0.32 loads the model in a generation thread at startup and answers /health
    with 503 until it is loaded; if loading fails the thread dies, the process lives on
    and /health stays 503, so the log is checked too. The completion proves the whole
    path works (older versions load the model lazily on the first request).
    """

    def check_alive() -> None:
        if process.poll() is not None:
            raise RuntimeError(f"mlx_lm.server exited with code {process.returncode}")
        if "generation thread died" in _read_log(log_path):
            raise RuntimeError("mlx_lm.server could not load the model")

    while True:
        check_alive()
        try:
            with urllib.request.urlopen(f"{root}/health", timeout=2) as resp:
                if resp.status == 200:
                    break
        except (urllib.error.URLError, OSError):
            pass
        if time.monotonic() > deadline:
            raise TimeoutError("mlx_lm.server did not answer /health in time")
        time.sleep(0.1)

    body = json.dumps(
        {"model": model, "messages": [{"role": "user", "content": "hi"}], "max_tokens": 1}
    ).encode()
    while True:
        check_alive()
        request = urllib.request.Request(
            f"{root}/v1/chat/completions",
            data=body,
            headers={"Content-Type": "application/json"},
        )
        try:
            with urllib.request.urlopen(request, timeout=30) as resp:
                if resp.status == 200 and json.loads(resp.read()).get("choices"):
                    return
        except urllib.error.HTTPError as exc:
            # The server answered with an error (e.g. 404 when the model fails to
            # load): waiting will not fix that.
            detail = exc.read().decode(errors="replace")[:500]
            raise RuntimeError(f"first completion failed with HTTP {exc.code}: {detail}") from exc
        except (urllib.error.URLError, OSError, ValueError):
            pass
        if time.monotonic() > deadline:
            raise TimeoutError("mlx_lm.server did not complete a first request in time")
        time.sleep(0.2)


def _stop(process: subprocess.Popen) -> None:
    if process.poll() is not None:
        return
    process.terminate()
    try:
        process.wait(timeout=SERVER_STOP_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait(timeout=SERVER_STOP_TIMEOUT_S)


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
        _wait_until_serving(process, root, model, log_path, started + SERVER_START_TIMEOUT_S)
    except Exception as exc:  # reported below, with the server's log
        startup_error = exc
    if startup_error is not None:
        _stop(process)
        pytest.fail(
            f"could not start {' '.join(command)}: {startup_error}\n"
            f"--- server log ({log_path}) ---\n{_server_log_tail(log_path)}",
            pytrace=False,
        )
    # Visible with -s / in the report's captured setup output.
    print(f"mlx_lm.server ready on {root} in {time.monotonic() - started:.1f} s")
    try:
        yield MlxServer(base_url=f"{root}/v1", model=model, process=process, log_path=log_path)
    finally:
        _stop(process)


@pytest.fixture
def hermes_home(tmp_path, monkeypatch) -> Path:
    """A fresh hermes-tui home (HERMES_TUI_HOME) for one test; Hermes Agent's home (HERMES_HOME) points
    at a folder of its own that does not exist, so no test reads or writes the real ~/.hermes."""
    home = tmp_path / "hermes_home"
    home.mkdir()
    monkeypatch.setenv("HERMES_TUI_HOME", str(home))
    monkeypatch.setenv("HERMES_HOME", str(tmp_path / "hermes_agent_home"))
    return home
