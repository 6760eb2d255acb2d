"""How many tokens the conversation model's context window holds.

Sources, first answer wins (:func:`resolve`):

1. ``model.context_length`` in config.yaml: the user's word.
2. The model's own files: ``config.json`` (``max_position_embeddings`` and friends,
   or inside ``text_config`` for multimodal models), else ``tokenizer_config.json``'s
   ``model_max_length``. Used when the model is a local folder or an HF repo id that is
   already in the local Hugging Face cache (never downloads).
3. The server (``base_url``): ``GET /models`` metadata, then llama.cpp's ``/props``,
   LM Studio's ``/api/v0/models/{id}``, Ollama's ``/api/show`` (+ ``/api/ps``).
   With a server configured, it is asked before the model files (see :func:`resolve`).
4. A small table of known model families.
5. :data:`hermes_tui.config.FALLBACK_CONTEXT_LIMIT`.

Answers from 2 and 3 are cached on disk (``cache_dir()/context_limits.json``) per
provider, base URL and model. A probe takes a network round trip or more, so the app
runs it in the background (:class:`ContextLimitResolver`) and reports
``occupancy_pct`` as null until it is done; :meth:`ContextLimitResolver.cached`
answers instantly from the config or the disk cache.

Nothing here raises on a bad server, a bad file or a bad cache: each source answers
None and the next one is asked.
"""

from __future__ import annotations

import ipaddress
import json
import logging
import os
import re
import tempfile
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from hermes_tui import paths
from hermes_tui.config import FALLBACK_CONTEXT_LIMIT
from hermes_tui.untrusted import InputError, load_json

__all__ = [
    "CACHE_FILE",
    "ContextLimit",
    "ContextLimitResolver",
    "cache_key",
    "from_config",
    "from_model_dir",
    "from_table",
    "probe_server",
    "read_cache",
    "resolve",
]

log = logging.getLogger(__name__)

CACHE_FILE = "context_limits.json"
_CACHE_VERSION = 1

# A context length outside this range is a placeholder, not a fact: transformers
# writes model_max_length = int(1e30) ("VERY_LARGE_INTEGER") when a tokenizer has no
# limit. Llama 4 Scout's 10M window is the largest real one to date.
_MAX_PLAUSIBLE = 100_000_000

# config.json keys that hold the position limit, most common first.
_MODEL_CONFIG_KEYS = (
    "max_position_embeddings",  # llama, qwen, mistral, gemma, phi, ...
    "n_positions",  # gpt2, bloom-style
    "max_seq_len",  # mpt
    "seq_length",  # chatglm, qwen (v1)
    "max_sequence_length",
    "n_ctx",  # old gpt2 configs
)
# Multimodal configs keep the language model's settings in a nested section.
_NESTED_CONFIG_SECTIONS = ("text_config", "llm_config", "language_config", "text_model_config")


@dataclass(frozen=True)
class ContextLimit:
    """A context window size and where it came from.

    ``source``: "config", "model-config", "server", "table", "default", or
    "cache:<one of those>" when read back from the disk cache.
    """

    tokens: int
    source: str


def _as_tokens(value: Any) -> int | None:
    """A plausible positive token count from JSON (int, integral float, digit string), else None."""
    if isinstance(value, bool):
        return None
    if isinstance(value, float):
        if not value.is_integer():
            return None
        value = int(value)
    elif isinstance(value, str):
        text = value.strip()
        if not text.isdigit():
            return None
        value = int(text)
    if isinstance(value, int) and 0 < value <= _MAX_PLAUSIBLE:
        return value
    return None


# --------------------------------------------------------------------------- 1. config


def from_config(model_cfg: Any) -> ContextLimit | None:
    """``model.context_length`` from the config, if set."""
    tokens = _as_tokens(getattr(model_cfg, "context_length", None))
    return ContextLimit(tokens, "config") if tokens else None


# --------------------------------------------------------------------------- 2. model files


def _hf_hub_cache() -> Path:
    """The hub cache folder, read from the environment now.

    huggingface_hub computes its own at import time, which misses a later change of
    HF_HOME (tests set it per test; the app may load .env after importing).
    """
    for var in ("HF_HUB_CACHE", "HUGGINGFACE_HUB_CACHE"):
        if os.environ.get(var):
            return Path(os.path.expanduser(os.environ[var]))
    if os.environ.get("HF_HOME"):
        return Path(os.path.expanduser(os.environ["HF_HOME"])) / "hub"
    xdg = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(xdg) / "huggingface" / "hub"


def _looks_like_repo_id(name: str) -> bool:
    return name.count("/") == 1 and not name.startswith((".", "/", "~")) and all(name.split("/"))


def _cached_hub_file(repo_id: str, filename: str) -> Path | None:
    """``filename`` of ``repo_id`` if it is in the local HF cache. No network, ever."""
    try:
        from huggingface_hub import try_to_load_from_cache
    except ImportError:
        return None
    try:
        found = try_to_load_from_cache(repo_id, filename, cache_dir=_hf_hub_cache())
    except Exception:  # noqa: BLE001 - a bad repo id or cache layout means "not here"
        return None
    return Path(found) if isinstance(found, str) and os.path.isfile(found) else None


def _read_json(path: Path | None) -> dict[str, Any] | None:
    if path is None:
        return None
    try:
        data = load_json(Path(path).read_text(encoding="utf-8"))
    except InputError as exc:
        log.warning("context limit: %s ignored: %s", path, exc)
        return None
    except (OSError, ValueError):  # unreadable, not UTF-8
        return None
    return data if isinstance(data, dict) else None


def _limit_from_model_config(config: Mapping[str, Any]) -> int | None:
    # sliding_window is ignored on purpose: it limits what one layer attends to, not
    # how many tokens the model accepts.
    for key in _MODEL_CONFIG_KEYS:
        tokens = _as_tokens(config.get(key))
        if tokens:
            return tokens
    for section in _NESTED_CONFIG_SECTIONS:
        nested = config.get(section)
        if isinstance(nested, Mapping):
            tokens = _limit_from_model_config(nested)
            if tokens:
                return tokens
    return None


def from_model_dir(path: str | os.PathLike[str]) -> ContextLimit | None:
    """The limit from a model's files: a local folder, or an HF repo id already cached.

    ``config.json`` wins; ``tokenizer_config.json``'s ``model_max_length`` is the
    fallback (transformers' 1e30 "no limit" placeholder is ignored).
    """
    name = os.fspath(path)
    if not name:
        return None
    local = Path(name).expanduser()
    try:
        if local.is_file() and local.name == "config.json":
            local = local.parent
        is_dir = local.is_dir()
    except OSError:
        is_dir = False
    if is_dir:
        config_path: Path | None = local / "config.json"
        tokenizer_path: Path | None = local / "tokenizer_config.json"
    elif _looks_like_repo_id(name):
        config_path = _cached_hub_file(name, "config.json")
        tokenizer_path = _cached_hub_file(name, "tokenizer_config.json")
    else:
        return None
    config = _read_json(config_path)
    tokens = _limit_from_model_config(config) if config else None
    if not tokens:
        tokenizer_config = _read_json(tokenizer_path)
        tokens = _as_tokens(tokenizer_config.get("model_max_length")) if tokenizer_config else None
    return ContextLimit(tokens, "model-config") if tokens else None


# --------------------------------------------------------------------------- 3. server


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


def _find_entry(entries: Any, model: str, id_keys: tuple[str, ...] = ("id", "name", "model", "key")) -> Mapping | None:
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
            tokens = _as_tokens(_dig(instance, "config", "context_length"))
            if tokens:
                return tokens, None
    for path in _ENTRY_FIELDS:
        tokens = _as_tokens(_dig(entry, *path))
        if tokens:
            return tokens, None
    # llama.cpp's n_ctx_train is what the model was trained with, not the -c the server
    # runs with; /props knows the latter.
    return None, _as_tokens(_dig(entry, "meta", "n_ctx_train"))


def _probe_llama_cpp_props(root: str, *, api_key: str | None, timeout: float) -> int | None:
    # default_generation_settings.n_ctx is the per-slot window (-c divided by -np):
    # the largest prompt a request may send.
    props = _http_json(f"{root}/props", api_key=api_key, timeout=timeout)
    return _as_tokens(_dig(props, "default_generation_settings", "n_ctx")) or _as_tokens(_dig(props, "n_ctx"))


def _probe_lm_studio(root: str, model: str, *, api_key: str | None, timeout: float) -> int | None:
    # LM Studio's OpenAI-compatible /v1/models lists ids only; its REST API has the window.
    if not model:
        return None
    quoted = urllib.parse.quote(model, safe="")
    info = _http_json(f"{root}/api/v0/models/{quoted}", api_key=api_key, timeout=timeout)
    if not isinstance(info, Mapping) or "max_context_length" not in info and "loaded_context_length" not in info:
        return None
    return _as_tokens(info.get("loaded_context_length")) or _as_tokens(info.get("max_context_length"))


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
        tokens = _as_tokens(entry.get("context_length"))
        if tokens:
            return tokens
    # num_ctx set in the Modelfile is what Ollama will run the model with.
    parameters = show.get("parameters")
    if isinstance(parameters, str):
        match = _NUM_CTX.search(parameters)
        if match:
            return _as_tokens(match.group(1))
    # Else the model's trained window (Ollama itself may run it with less, from
    # OLLAMA_CONTEXT_LENGTH, which no endpoint reports until the model is loaded).
    info = show.get("model_info")
    if isinstance(info, Mapping):
        arch = info.get("general.architecture")
        if isinstance(arch, str):
            tokens = _as_tokens(info.get(f"{arch}.context_length"))
            if tokens:
                return tokens
        for key, value in info.items():
            if isinstance(key, str) and key.endswith(".context_length"):
                tokens = _as_tokens(value)
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
        probes = [lambda: _probe_llama_cpp_props(root, api_key=api_key, timeout=timeout)]
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


# --------------------------------------------------------------------------- 4. table

# Native (unextended) windows as documented in each model card / vendor page.
# Matching is case-insensitive on the model name or repo id, whole tokens only, and
# the longest matching pattern wins ("llama-3.1" beats "llama-3", "gemma-3-1b" beats
# "gemma-3"). Names are normalized first (see _normalize): "Llama-3.1", "llama3.1"
# and "llama_3.1" all read "llama-3.1".
_TABLE: dict[str, int] = {
    # Qwen2 / Qwen2.5: 32,768 (Qwen/Qwen2.5-7B-Instruct card; 128K only with YaRN).
    "qwen2": 32_768,
    "qwen2.5": 32_768,
    # Qwen3: "natively supports 32,768 tokens" (Qwen/Qwen3-8B card; its config.json
    # says 40960 = 32768 + 8192 reserved for output); 131,072 only with YaRN.
    "qwen3": 32_768,
    # Qwen3 2507 updates and Qwen3-Coder: 262,144 native (Qwen3-4B-Instruct-2507 and
    # Qwen3-Coder-30B-A3B-Instruct cards).
    "instruct-2507": 262_144,
    "thinking-2507": 262_144,
    "qwen3-coder": 262_144,
    # Llama 3.1 / 3.2 / 3.3: 128K (meta-llama cards); Llama 3 (3.0): 8K; Llama 2: 4K.
    "llama-3.1": 131_072,
    "llama-3.2": 131_072,
    "llama-3.3": 131_072,
    "llama-3": 8_192,
    "llama-2": 4_096,
    # Mistral 7B Instruct: v0.1 8K; v0.2 and v0.3 32K (mistralai cards). Nemo: 128K.
    "mistral-7b-instruct-v0.1": 8_192,
    "mistral-7b-instruct-v0.2": 32_768,
    "mistral-7b-instruct-v0.3": 32_768,
    "mistral-nemo": 131_072,
    # Gemma 2: 8K. Gemma 3: 128K, but 32K for the 1B and 270M models (Gemma 3 cards).
    "gemma-2": 8_192,
    "gemma-3": 131_072,
    "gemma-3-1b": 32_768,
    "gemma-3-270m": 32_768,
    # Phi-3 mini 4K / 128K; Phi-3.5 and Phi-4-mini 128K; Phi-4 (14B) 16K (microsoft cards).
    "phi-3-mini-4k": 4_096,
    "phi-3-mini-128k": 131_072,
    "phi-3.5": 131_072,
    "phi-4": 16_384,
    "phi-4-mini": 131_072,
    # SmolLM2: 8K (HuggingFaceTB/SmolLM2-1.7B-Instruct card).
    "smollm2": 8_192,
    # DeepSeek-R1 distills (Qwen and Llama based): 128K (deepseek-ai/DeepSeek-R1 card).
    "deepseek-r1-distill": 131_072,
    # Hosted models (OpenAI and Anthropic model pages).
    "gpt-3.5-turbo": 16_385,
    "gpt-4-turbo": 128_000,
    "gpt-4o": 128_000,
    "gpt-4o-mini": 128_000,
    "gpt-4.1": 1_047_576,
    "gpt-4.1-mini": 1_047_576,
    "gpt-4.1-nano": 1_047_576,
    "gpt-5": 400_000,
    "o1": 200_000,
    "o1-mini": 128_000,
    "o3": 200_000,
    "o3-mini": 200_000,
    "o4-mini": 200_000,
    "claude": 200_000,
}

_SEPARATORS = re.compile(r"[\s_\-:/]+")
_LETTER_DIGIT = re.compile(r"(?<=[a-z])(?=\d)")


def _normalize(name: str) -> str:
    """Lower case, one "-" between tokens, letters split from the digits after them."""
    text = _SEPARATORS.sub("-", name.lower()).strip("-")
    return _LETTER_DIGIT.sub("-", text)


_NORMALIZED_TABLE = {_normalize(pattern): tokens for pattern, tokens in _TABLE.items()}


def _matches(pattern: str, name: str) -> bool:
    """``pattern`` occurs in ``name`` as whole tokens ("qwen-2" does not match "qwen-2.5")."""
    start = name.find(pattern)
    while start != -1:
        end = start + len(pattern)
        if (start == 0 or name[start - 1] == "-") and (end == len(name) or name[end] == "-"):
            return True
        start = name.find(pattern, start + 1)
    return False


def from_table(model_name: str) -> ContextLimit | None:
    """The documented window of a known model family; the most specific match wins."""
    if not model_name:
        return None
    name = model_name.rstrip("/\\")
    if os.sep in name and not _looks_like_repo_id(name):
        name = os.path.basename(name)  # a local folder: its name names the model
    name = _normalize(name)
    best = max((p for p in _NORMALIZED_TABLE if _matches(p, name)), key=len, default=None)
    return ContextLimit(_NORMALIZED_TABLE[best], "table") if best else None


# --------------------------------------------------------------------------- cache

_cache_lock = threading.Lock()


def cache_key(model_cfg: Any) -> str:
    provider = getattr(model_cfg, "provider", "") or ""
    base_url = (getattr(model_cfg, "base_url", "") or "").rstrip("/")
    model = getattr(model_cfg, "model", "") or ""
    return f"{provider}|{base_url}|{model}"


def _cache_path() -> Path:
    return paths.cache_dir() / CACHE_FILE


def _load_cache() -> dict[str, Any]:
    try:
        data = load_json(_cache_path().read_text(encoding="utf-8"))
    except (OSError, ValueError):  # missing, unreadable or damaged: rewritten on the next answer
        return {}
    entries = data.get("entries") if isinstance(data, dict) and data.get("version") == _CACHE_VERSION else None
    return entries if isinstance(entries, dict) else {}


def read_cache(model_cfg: Any) -> ContextLimit | None:
    """The disk-cached limit for this provider, base URL and model (no network)."""
    entry = _load_cache().get(cache_key(model_cfg))
    if not isinstance(entry, dict):
        return None
    tokens = _as_tokens(entry.get("tokens"))
    source = entry.get("source")
    if not tokens or not isinstance(source, str) or not source:
        return None
    return ContextLimit(tokens, f"cache:{source}")


def _write_cache(model_cfg: Any, limit: ContextLimit) -> None:
    """Record ``limit``; a corrupt file is replaced, a failure to write is only logged."""
    try:
        with _cache_lock:
            entries = _load_cache()
            entries[cache_key(model_cfg)] = {
                "tokens": limit.tokens,
                "source": limit.source,
                "resolved_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
            }
            path = _cache_path()
            paths.ensure_dir(path.parent)
            fd, tmp_name = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
            try:
                with os.fdopen(fd, "w", encoding="utf-8") as handle:
                    json.dump({"version": _CACHE_VERSION, "entries": entries}, handle, indent=1, sort_keys=True)
                os.replace(tmp_name, path)
            finally:
                Path(tmp_name).unlink(missing_ok=True)
    except Exception:
        log.debug("could not write the context limit cache", exc_info=True)


# --------------------------------------------------------------------------- resolve


def _api_key(model_cfg: Any) -> str | None:
    name = getattr(model_cfg, "api_key_env", "") or ""
    return os.environ.get(name) or None if name else None


def _model_files_apply(model_cfg: Any) -> bool:
    """Whether the model names files here: provider mlx, a local folder or a cached repo."""
    model = getattr(model_cfg, "model", "") or ""
    if not model:
        return False
    if getattr(model_cfg, "provider", "") == "mlx":
        return True
    try:
        if Path(model).expanduser().is_dir():
            return True
    except OSError:
        return False
    return _looks_like_repo_id(model)


def resolve(model_cfg: Any, *, use_cache: bool = True, timeout: float = 5.0) -> ContextLimit:
    """The best known limit for ``model_cfg``; never raises, may take a network round trip.

    Order: config override, disk cache, model files and server probe, table, default.
    With a ``base_url`` (and a provider other than mlx) the server is asked before the
    model files: it knows the window it actually runs with (vLLM ``--max-model-len``,
    llama.cpp ``-c``, LM Studio's loaded length), which may be smaller than the
    model's maximum. A server that reports nothing (mlx_lm.server) costs a few fast
    404s, then the model files answer.

    Answers from the model files and the server are cached; table and default answers
    are not (they cost nothing to recompute, and caching them would stop a later
    probe from finding the real value once the server is up).
    """
    try:
        limit = from_config(model_cfg)
        if limit:
            return limit
        if use_cache:
            limit = read_cache(model_cfg)
            if limit:
                return limit
        model = getattr(model_cfg, "model", "") or ""
        base_url = getattr(model_cfg, "base_url", "") or ""

        def files() -> ContextLimit | None:
            return from_model_dir(model) if _model_files_apply(model_cfg) else None

        def server() -> ContextLimit | None:
            return probe_server(base_url, model, api_key=_api_key(model_cfg), timeout=timeout) if base_url else None

        server_first = bool(base_url) and getattr(model_cfg, "provider", "") != "mlx"
        limit = (server() or files()) if server_first else (files() or server())
        if limit:
            _write_cache(model_cfg, limit)
            return limit
        return from_table(model) or ContextLimit(FALLBACK_CONTEXT_LIMIT, "default")
    except Exception:
        log.debug("context limit resolution failed", exc_info=True)
        return ContextLimit(FALLBACK_CONTEXT_LIMIT, "default")


class ContextLimitResolver:
    """Resolve a model's window in a background thread; never blocks the caller.

    ::

        resolver = ContextLimitResolver()
        known = resolver.cached(cfg.model)        # instant: config or disk cache
        if known is None:
            resolver.start(cfg.model, on_resolved)  # on_resolved(limit), from the thread

    ``on_resolved`` runs on the resolver's thread; a UI must hand it to its own loop.
    """

    def __init__(self, *, timeout: float = 5.0) -> None:
        self.timeout = timeout
        self._result: ContextLimit | None = None
        self._done = threading.Event()
        self._thread: threading.Thread | None = None

    @staticmethod
    def cached(model_cfg: Any) -> ContextLimit | None:
        """The config override or the disk-cached value; None if neither. No network."""
        try:
            return from_config(model_cfg) or read_cache(model_cfg)
        except Exception:  # noqa: BLE001
            return None

    @property
    def result(self) -> ContextLimit | None:
        """The resolved limit; None until the background resolution is done."""
        return self._result

    @property
    def done(self) -> bool:
        return self._done.is_set()

    def start(
        self, model_cfg: Any, on_resolved: Callable[[ContextLimit], None] | None = None, *, use_cache: bool = True
    ) -> ContextLimitResolver:
        """Begin resolving (once per resolver); returns self."""
        if self._thread is not None:
            raise RuntimeError("ContextLimitResolver.start() called twice")

        def run() -> None:
            limit = resolve(model_cfg, use_cache=use_cache, timeout=self.timeout)
            self._result = limit
            self._done.set()
            if on_resolved is not None:
                try:
                    on_resolved(limit)
                except Exception:
                    log.exception("context limit callback failed")

        self._thread = threading.Thread(target=run, name="hermes-context-limit", daemon=True)
        self._thread.start()
        return self

    def wait(self, timeout: float | None = None) -> ContextLimit | None:
        """Block up to ``timeout`` seconds for the result (None if not done by then)."""
        self._done.wait(timeout)
        return self._result
