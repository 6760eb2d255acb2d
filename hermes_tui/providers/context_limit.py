"""A context window size and where it came from, and the two local sources of one: the config's
``model.context_length`` and the model's own files (``config.json``, ``tokenizer_config.json``),
read from a local folder or the local Hugging Face cache (never downloading).

``ContextLimit``, ``as_tokens`` (a token count read from JSON) and ``looks_like_repo_id`` are
what every source of a window shares: the table (``context_table``), a server's answer
(``openai.context_probe``) and the disk cache (``context_resolution``, which also says in what
order the sources are asked).
"""

from __future__ import annotations

import logging
import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from hermes_tui.util.untrusted import InputError, load_json

log = logging.getLogger("hermes_tui.providers.context_resolution")


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


def as_tokens(value: Any) -> int | None:
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
    tokens = as_tokens(getattr(model_cfg, "context_length", None))
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


def looks_like_repo_id(name: str) -> bool:
    """``org/name``: a Hugging Face repo id, not a path."""
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
        tokens = as_tokens(config.get(key))
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
    elif looks_like_repo_id(name):
        config_path = _cached_hub_file(name, "config.json")
        tokenizer_path = _cached_hub_file(name, "tokenizer_config.json")
    else:
        return None
    config = _read_json(config_path)
    tokens = _limit_from_model_config(config) if config else None
    if not tokens:
        tokenizer_config = _read_json(tokenizer_path)
        tokens = as_tokens(tokenizer_config.get("model_max_length")) if tokenizer_config else None
    return ContextLimit(tokens, "model-config") if tokens else None
