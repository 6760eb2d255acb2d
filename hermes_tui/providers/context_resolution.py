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
None and the next one is asked. The sources live in ``context_limit`` (the value, the config,
the model files), ``context_table`` and ``openai.context_probe`` (a ``base_url`` is an
OpenAI-compatible server's, so the openai backend asks it); this module is their order, the
cache and the background resolver.
"""

from __future__ import annotations

import json
import logging
import os
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from hermes_tui.config import FALLBACK_CONTEXT_LIMIT
from hermes_tui.providers.context_limit import (
    ContextLimit,
    as_tokens,
    from_config,
    from_model_dir,
    looks_like_repo_id,
)
from hermes_tui.providers.context_table import from_table
from hermes_tui.providers.openai.context_probe import probe_server
from hermes_tui.util import paths
from hermes_tui.util.untrusted import load_json

__all__ = ["CACHE_FILE", "ContextLimitResolver", "cache_key", "read_cache", "resolve"]

log = logging.getLogger(__name__)

CACHE_FILE = "context_limits.json"
_CACHE_VERSION = 1


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
    tokens = as_tokens(entry.get("tokens"))
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
    return looks_like_repo_id(model)


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
