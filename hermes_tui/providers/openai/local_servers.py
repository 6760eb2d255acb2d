"""OpenAI-compatible model servers already running on this machine, found by asking.

Each known server has a usual port; ``detect_servers`` asks ``GET /v1/models`` on
127.0.0.1 at each one, all at once, with a short timeout, so a first-run screen can
offer what answers (within about ``timeout`` seconds, whatever is listening). A port
where something else listens (a web server that does not answer with an OpenAI model
list) is not offered. Blocking: call it from a worker thread.
"""

from __future__ import annotations

import http.client
import json
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

PROBE_TIMEOUT_S = 0.5
HOST = "127.0.0.1"
# Loopback never goes through a proxy, whatever http_proxy says.
_OPENER = urllib.request.build_opener(urllib.request.ProxyHandler({}))


@dataclass(frozen=True)
class KnownServer:
    name: str
    port: int
    start: str  # the command that starts it, for a screen to suggest


# Two servers share 8080: whichever answers there is named by both.
USUAL_SERVERS = (
    KnownServer("Ollama", 11434, "ollama serve  (then: ollama pull llama3.2)"),
    KnownServer("LM Studio", 1234, "LM Studio → Developer → Start server, or: lms server start"),
    KnownServer("llama.cpp", 8080, "llama-server -m MODEL.gguf --port 8080"),
    KnownServer("mlx_lm.server", 8080, "mlx_lm.server --model mlx-community/Llama-3.2-3B-Instruct-4bit --port 8080"),
    KnownServer("vLLM", 8000, "vllm serve MODEL"),
)
USUAL_PORTS = tuple(dict.fromkeys(s.port for s in USUAL_SERVERS))


@dataclass(frozen=True)
class FoundServer:
    name: str          # what usually listens on this port ("llama.cpp or mlx_lm.server")
    base_url: str      # ends in /v1: what model.base_url becomes
    models: tuple[str, ...]


def server_names(port: int) -> str:
    names = [s.name for s in USUAL_SERVERS if s.port == port]
    return " or ".join(names) if names else f"a server on port {port}"


def probe(port: int, *, host: str = HOST, timeout: float = PROBE_TIMEOUT_S) -> FoundServer | None:
    """The server at ``host:port`` when it answers ``/v1/models`` with a model list; else None."""
    base_url = f"http://{host}:{port}/v1"
    try:
        with _OPENER.open(f"{base_url}/models", timeout=timeout) as response:
            body = json.loads(response.read(1_000_000))
    except (OSError, ValueError, http.client.HTTPException):  # refused, timed out, not HTTP, not JSON
        return None
    models = _model_ids(body)
    if models is None:
        return None
    return FoundServer(server_names(port), base_url, models)


def _model_ids(body: Any) -> tuple[str, ...] | None:
    data = body.get("data") if isinstance(body, dict) else None
    if not isinstance(data, list):
        return None
    ids = [item.get("id") for item in data if isinstance(item, dict)]
    return tuple(sorted({i for i in ids if isinstance(i, str) and i}))


def detect_servers(ports: tuple[int, ...] | list[int] | None = None, *, host: str = HOST,
                   timeout: float = PROBE_TIMEOUT_S) -> list[FoundServer]:
    """The servers answering on ``ports`` (default: the usual ones), in the order of ``ports``."""
    ports = list(dict.fromkeys(ports if ports is not None else USUAL_PORTS))
    if not ports:
        return []
    with ThreadPoolExecutor(max_workers=len(ports)) as pool:
        found = list(pool.map(lambda port: probe(port, host=host, timeout=timeout), ports))
    return [server for server in found if server is not None]


def chat_changes(server: FoundServer, model: str) -> dict[str, Any]:
    """The dotted config changes that make ``model`` at ``server`` the chat model."""
    return {"model.provider": "openai-api", "model.base_url": server.base_url, "model.model": model}


def compression_changes(server: FoundServer, model: str) -> dict[str, Any]:
    """The same server for passes (where MLX has no GPU, passes go to an endpoint)."""
    return {
        "auxiliary.compression.provider": "openai-api",
        "auxiliary.compression.base_url": server.base_url,
        "auxiliary.compression.model": model,
    }


__all__ = [
    "PROBE_TIMEOUT_S", "USUAL_PORTS", "USUAL_SERVERS", "FoundServer", "KnownServer", "chat_changes",
    "compression_changes", "detect_servers", "probe", "server_names",
]
