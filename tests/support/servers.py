"""Real servers for tests: a free local port, waiting for ``mlx_lm.server``, stopping it."""

from __future__ import annotations

import json
import socket
import subprocess
import time
import urllib.error
import urllib.request
from pathlib import Path

SERVER_START_TIMEOUT_S = 90.0
SERVER_STOP_TIMEOUT_S = 10.0


def free_port() -> int:
    """A TCP port nothing listens on right now (the OS picks it)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def read_log(log_path: Path) -> str:
    try:
        return log_path.read_text(errors="replace")
    except OSError:
        return ""


def server_log_tail(log_path: Path, limit: int = 6000) -> str:
    """The end of the server log without the /health polling lines."""
    lines = [line for line in read_log(log_path).splitlines() if '"GET /health' not in line]
    return "\n".join(lines)[-limit:] or "(empty server log)"


def wait_until_serving(
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
        if "generation thread died" in read_log(log_path):
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


def stop_server(process: subprocess.Popen) -> None:
    if process.poll() is not None:
        return
    process.terminate()
    try:
        process.wait(timeout=SERVER_STOP_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait(timeout=SERVER_STOP_TIMEOUT_S)


SCRIPTED_SERVER = Path(__file__).resolve().parent / "scripted_openai_server.py"


class ScriptedServer:
    """``scripted_openai_server.py`` in a subprocess: replies from ``script``, requests logged."""

    def __init__(self, script: list[dict] | dict, folder: Path) -> None:
        import sys

        folder.mkdir(parents=True, exist_ok=True)
        self.requests_path = folder / "requests.jsonl"
        script_path = folder / "script.json"
        script_path.write_text(json.dumps(script))
        self.process = subprocess.Popen(
            [sys.executable, str(SCRIPTED_SERVER), str(script_path), str(self.requests_path)],
            stdout=subprocess.PIPE, stdin=subprocess.DEVNULL, text=True,
        )
        line = self.process.stdout.readline()  # "PORT n" once serving; "" if it died
        if not line.startswith("PORT "):
            stop_server(self.process)
            raise RuntimeError(f"scripted server did not start: {line!r}")
        self.port = int(line.split()[1])
        self.base_url = f"http://127.0.0.1:{self.port}/v1"

    def served(self) -> list[dict]:
        """Every chat request: ``body``, the ``status`` served and the ``prompt_tokens`` it counted."""
        if not self.requests_path.exists():
            return []
        return [json.loads(line) for line in self.requests_path.read_text().splitlines()]

    def requests(self) -> list[dict]:
        return [line["body"] for line in self.served()]

    def stop(self) -> None:
        stop_server(self.process)
