"""llama.cpp's ``llama-server`` on a real model, for the real-model tests and benchmarks.

``../shared/realmodels/setup`` assembles the models and builds the server under
``$REALMODELS_DIR`` (default ``~/.cache/hermes-realmodels``); this starts the server on a
free loopback port the way ``../shared/realmodels/serve`` does (the model's own chat
template, a 32,768-token window in two slots, prompt caching on) and stops it.
"""

from __future__ import annotations

import json
import os
import subprocess
import time
import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path

from support.servers import free_port, read_log, stop_server

SMALL_MODEL = "qwen2.5-coder-0.5b-instruct-q4_k_m"
LARGE_MODEL = "qwen2.5-coder-1.5b-instruct-q4_k_m"
# Loading a model from a cold disk and reading its first prompt on two busy cores.
START_TIMEOUT_S = 180.0


class RealModelsMissing(RuntimeError):
    """The models or the server are not there: ``../shared/realmodels/setup`` was not run."""


def realmodels_dir() -> Path:
    return Path(os.environ.get("REALMODELS_DIR") or Path.home() / ".cache" / "hermes-realmodels")


@dataclass
class LlamaServer:
    base_url: str  # "http://127.0.0.1:PORT/v1"
    model: str  # the alias it serves under: the model's file name without .gguf
    process: subprocess.Popen
    log_path: Path

    def stop(self) -> None:
        stop_server(self.process)


def start_llama_server(model: str, log_dir: Path, *, port: int | None = None,
                       extra: tuple[str, ...] = ()) -> LlamaServer:
    """Start ``llama-server`` on ``model`` (a name under models/) and wait for one completion;
    ``extra``: more of its arguments (``--temp 0`` for a reply that does not vary)."""
    root_dir = realmodels_dir()
    server = root_dir / "llama.cpp" / "build" / "bin" / "llama-server"
    gguf = root_dir / "models" / f"{model}.gguf"
    missing = [str(p) for p in (server, gguf) if not p.exists()]
    if missing:
        raise RealModelsMissing(f"missing {', '.join(missing)}: run ../shared/realmodels/setup first")
    port = port or free_port()
    log_path = log_dir / f"llama-server-{port}.log"
    command = [
        str(server), "-m", str(gguf), "--host", "127.0.0.1", "--port", str(port), "-c", "32768", "-np", "2",
        "--jinja", "-t", str(os.cpu_count() or 2), "--alias", model, *extra,
    ]
    with open(log_path, "wb") as log:
        process = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
    root = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + START_TIMEOUT_S
    try:
        _wait(process, root, model, log_path, deadline)
    except BaseException:
        stop_server(process)
        raise
    return LlamaServer(base_url=f"{root}/v1", model=model, process=process, log_path=log_path)


def _wait(process: subprocess.Popen, root: str, model: str, log_path: Path, deadline: float) -> None:
    body = json.dumps({"model": model, "messages": [{"role": "user", "content": "hi"}], "max_tokens": 1}).encode()
    while True:
        if process.poll() is not None:
            raise RuntimeError(f"llama-server exited with code {process.returncode}:\n{read_log(log_path)[-3000:]}")
        try:
            request = urllib.request.Request(
                f"{root}/v1/chat/completions", data=body, headers={"Content-Type": "application/json"}
            )
            with urllib.request.urlopen(request, timeout=30) as resp:
                if resp.status == 200:
                    return
        except (urllib.error.URLError, OSError):
            pass
        if time.monotonic() > deadline:
            raise TimeoutError(f"llama-server did not answer in {START_TIMEOUT_S:.0f} s:\n{read_log(log_path)[-3000:]}")
        time.sleep(0.5)
