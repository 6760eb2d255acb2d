"""Ask a model server how large a model's window is: ``GET /models`` metadata, then llama.cpp's
``/props``, LM Studio's ``/api/v0/models/{id}``, Ollama's ``/api/show`` (+ ``/api/ps``).

Nothing here raises on a bad server: a probe that learns nothing answers None.
"""

from __future__ import annotations

import ipaddress
import json
import logging
import os
import re
import urllib.parse
from collections.abc import Callable, Mapping
from typing import Any

from hermes_tui.providers.context_limit import ContextLimit, as_tokens
from hermes_tui.util.untrusted import InputError, load_json

log = logging.getLogger("hermes_tui.providers.context_resolution")

class _Unreachable(Exception):
    """No server answers at all (refused, timed out, DNS): asking again is pointless."""


def _is_loopback(url: str) -> bool:
    host = urllib.parse.urlsplit(url).hostname or ""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def _http_json(
    url: str,
    *,
    api_key: str | None,
    timeout: float,
    body: Mapping[str, Any] | None = None,
) -> Any:
    """The decoded JSON at ``url``; None on an HTTP error or a non-JSON answer.

    Raises :class:`_Unreachable` when nothing answers.
    """
    # Imported here: http.client and email under it are start-up time the app need not spend.
    import urllib.error
    import urllib.request

    headers = {"Accept": "application/json", "User-Agent": "hermes-tui"}
    if api_key:
        headers["Authorization"] = f"Bearer {api_key}"
    data = None
    if body is not None:
        data = json.dumps(body).encode()
        headers["Content-Type"] = "application/json"
    request = urllib.request.Request(url, data=data, headers=headers, method="POST" if body is not None else "GET")
    # A local server is never behind the user's HTTP proxy.
    handlers = [urllib.request.ProxyHandler({})] if _is_loopback(url) else []
    opener = urllib.request.build_opener(*handlers)
    try:
        with opener.open(request, timeout=timeout) as response:
            raw = response.read(8 * 1024 * 1024)  # a model list, not a download
    except urllib.error.HTTPError as exc:
        exc.close()
        return None
    except (urllib.error.URLError, OSError) as exc:  # refused, timeout, DNS, reset
        raise _Unreachable(str(exc)) from None
    except Exception:  # noqa: BLE001 - http.client's odder failures (bad status line, ...)
        return None
    try:
        return load_json(raw.decode("utf-8"))
    except InputError as exc:
        log.warning("context limit probe: the answer of %s ignored: %s", url, exc)
        return None
    except UnicodeDecodeError:
        return None


def _root_url(base_url: str) -> str:
    """The server root: ``base_url`` without a trailing ``/v1``."""
    root = base_url.rstrip("/")
    return root[: -len("/v1")] if root.endswith("/v1") else root


def _dig(obj: Any, *keys: str) -> Any:
    for key in keys:
        if not isinstance(obj, Mapping):
            return None
        obj = obj.get(key)
    return obj


def _same_model(a: str, b: str) -> bool:
    if a == b or a.lower() == b.lower():
        return True
    # Ollama: "llama3.2" is "llama3.2:latest".
    if a.removesuffix(":latest").lower() == b.removesuffix(":latest").lower():
        return True
    # mlx_lm.server lists a local model by its resolved path.
    if os.sep in a or os.sep in b:
        try:
            return os.path.realpath(os.path.expanduser(a)) == os.path.realpath(os.path.expanduser(b))
        except (OSError, ValueError):
            return False
    return False


def _find_entry(
    entries: Any, model: str, id_keys: tuple[str, ...] = ("id", "name", "model", "key"),
) -> Mapping[str, Any] | None:
    """The entry for ``model``; the only entry when there is one and no name matches."""
    if not isinstance(entries, list):
        return None
    dicts = [e for e in entries if isinstance(e, Mapping)]
    if model:
        for entry in dicts:
            for key in id_keys:
                value = entry.get(key)
                if isinstance(value, str) and _same_model(value, model):
                    return entry
    return dicts[0] if len(dicts) == 1 else None


# /models entry fields that hold the window the server will actually honor, best first.
_ENTRY_FIELDS: tuple[tuple[str, ...], ...] = (
    ("loaded_context_length",),  # LM Studio (REST v0, loaded models)
    ("max_model_len",),  # vLLM, SGLang
    ("meta", "n_ctx"),  # llama.cpp builds that report the loaded size
    ("context_length",),  # OpenRouter, Together, Fireworks
    ("context_window",),  # Groq
    ("max_context_length",),  # LM Studio REST, Mistral
    ("max_position_embeddings",),
    ("n_ctx",),
    ("top_provider", "context_length"),  # OpenRouter's serving provider
)


def _limit_from_entry(entry: Mapping[str, Any]) -> tuple[int | None, int | None]:
    """(served window, training-time window) read from one /models entry."""
    # LM Studio's REST v1 list: the window a loaded instance was loaded with.
    instances = entry.get("loaded_instances")
    if isinstance(instances, list):
        for instance in instances:
            tokens = as_tokens(_dig(instance, "config", "context_length"))
            if tokens:
                return tokens, None
    for path in _ENTRY_FIELDS:
        tokens = as_tokens(_dig(entry, *path))
        if tokens:
            return tokens, None
    # llama.cpp's n_ctx_train is what the model was trained with, not the -c the server
    # runs with; /props knows the latter.
    return None, as_tokens(_dig(entry, "meta", "n_ctx_train"))


def _probe_llama_cpp_props(root: str, *, api_key: str | None, timeout: float) -> int | None:
    # default_generation_settings.n_ctx is the per-slot window (-c divided by -np):
    # the largest prompt a request may send.
    props = _http_json(f"{root}/props", api_key=api_key, timeout=timeout)
    return as_tokens(_dig(props, "default_generation_settings", "n_ctx")) or as_tokens(_dig(props, "n_ctx"))


def _probe_lm_studio(root: str, model: str, *, api_key: str | None, timeout: float) -> int | None:
    # LM Studio's OpenAI-compatible /v1/models lists ids only; its REST API has the window.
    if not model:
        return None
    quoted = urllib.parse.quote(model, safe="")
    info = _http_json(f"{root}/api/v0/models/{quoted}", api_key=api_key, timeout=timeout)
    if not isinstance(info, Mapping) or "max_context_length" not in info and "loaded_context_length" not in info:
        return None
    return as_tokens(info.get("loaded_context_length")) or as_tokens(info.get("max_context_length"))


_NUM_CTX = re.compile(r"^\s*num_ctx\s+(\d+)\s*$", re.MULTILINE)


def _probe_ollama(root: str, model: str, *, api_key: str | None, timeout: float) -> int | None:
    if not model:
        return None
    show = _http_json(f"{root}/api/show", api_key=api_key, timeout=timeout, body={"model": model, "name": model})
    if not isinstance(show, Mapping):
        return None
    # A loaded model's real window (Ollama >= 0.6: /api/ps reports context_length).
    try:
        running = _http_json(f"{root}/api/ps", api_key=api_key, timeout=timeout)
    except _Unreachable:
        running = None
    entry = _find_entry(_dig(running, "models"), model, ("name", "model"))
    if entry is not None and any(_same_model(str(entry.get(k, "")), model) for k in ("name", "model")):
        tokens = as_tokens(entry.get("context_length"))
        if tokens:
            return tokens
    # num_ctx set in the Modelfile is what Ollama will run the model with.
    parameters = show.get("parameters")
    if isinstance(parameters, str):
        match = _NUM_CTX.search(parameters)
        if match:
            return as_tokens(match.group(1))
    # Else the model's trained window (Ollama itself may run it with less, from
    # OLLAMA_CONTEXT_LENGTH, which no endpoint reports until the model is loaded).
    info = show.get("model_info")
    if isinstance(info, Mapping):
        arch = info.get("general.architecture")
        if isinstance(arch, str):
            tokens = as_tokens(info.get(f"{arch}.context_length"))
            if tokens:
                return tokens
        for key, value in info.items():
            if isinstance(key, str) and key.endswith(".context_length"):
                tokens = as_tokens(value)
                if tokens:
                    return tokens
    return None


def probe_server(
    base_url: str, model: str, *, api_key: str | None = None, timeout: float = 5.0
) -> ContextLimit | None:
    """Ask an OpenAI-compatible server how large ``model``'s window is.

    ``GET {base_url}/models`` first (vLLM ``max_model_len``, OpenRouter
    ``context_length``, Groq ``context_window``, LM Studio / Mistral
    ``max_context_length``, llama.cpp ``meta``); then, only while nothing is known,
    llama.cpp's ``GET {root}/props``, LM Studio's ``GET {root}/api/v0/models/{id}`` and
    Ollama's ``POST {root}/api/show`` (``root``: ``base_url`` without ``/v1``).

    llama.cpp's ``meta.n_ctx_train`` is only the training window, so ``/props`` (the
    window the server runs with) is asked even then, and wins.

    Never raises: an unreachable server, an HTTP error or odd JSON gives None. A server
    that does not answer at all costs one ``timeout``, not one per endpoint.
    """
    if not base_url or not base_url.startswith(("http://", "https://")):
        return None
    base = base_url.rstrip("/")
    root = _root_url(base)
    trained: int | None = None
    try:
        listing = _http_json(f"{base}/models", api_key=api_key, timeout=timeout)
        entries = _dig(listing, "data")
        if entries is None and isinstance(listing, Mapping):
            entries = listing.get("models")  # LM Studio REST v1 / Ollama /api/tags shape
        entry = _find_entry(entries, model)
        if entry is not None:
            served, trained = _limit_from_entry(entry)
            if served:
                return ContextLimit(served, "server")
        probes: list[Callable[[], int | None]] = [
            lambda: _probe_llama_cpp_props(root, api_key=api_key, timeout=timeout),
        ]
        if not trained:  # n_ctx_train means llama.cpp: the other servers need not be asked
            probes += [
                lambda: _probe_lm_studio(root, model, api_key=api_key, timeout=timeout),
                lambda: _probe_ollama(root, model, api_key=api_key, timeout=timeout),
            ]
        for probe in probes:
            tokens = probe()
            if tokens:
                return ContextLimit(tokens, "server")
    except _Unreachable as exc:
        log.debug("context limit probe of %s: %s", base, exc)
    except Exception:
        log.debug("context limit probe of %s failed", base, exc_info=True)
    return ContextLimit(trained, "server") if trained else None
