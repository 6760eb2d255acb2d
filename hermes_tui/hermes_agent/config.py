"""Hermes Agent's compression settings, offered as ours: read from its config.yaml, never written.

Hermes Agent keeps its settings in ``$HERMES_HOME/config.yaml`` (default ``~/.hermes``).
The keys that mean the same thing in both projects are mapped one by one (README,
"Hermes Agent"); only keys the user set in Hermes' file are offered (Hermes' own
defaults differ from ours on purpose: micro-compaction is off there, on here), and only
values that differ from ours. The file is read once, as bytes; nothing here opens it
for writing.

``auxiliary.compression`` in Hermes names a provider (``auto`` = its main model,
``openrouter``, ...) or an OpenAI-compatible ``base_url``; we reach a model through a
base URL or in-process MLX, so its model is taken only together with a base URL. A key
written in the file (``api_key: sk-...``) is never copied: ours name an environment
variable (``api_key_env``), so ``${NAME}`` maps and a literal key does not.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from hermes_tui.config import Config, ConfigError, value_at
from hermes_tui.util import paths

# Hermes key (under compression:) -> ours. Same names, same meaning.
COMPRESSION_KEYS = (
    "enabled", "threshold", "target_ratio", "protect_first_n",
    "micro_compact", "micro_compact_every_n_turns", "micro_compact_defrag_threshold_tokens",
)
_ENV_REFERENCE = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}|\$([A-Za-z_][A-Za-z0-9_]*)")


@dataclass(frozen=True)
class HermesOffer:
    path: Path                                            # Hermes' config.yaml, as read
    changes: dict[str, Any]                               # our dotted keys -> values
    lines: list[str] = field(default_factory=list)        # "hermes key: value -> our key", one per change
    skipped: list[str] = field(default_factory=list)      # Hermes keys not taken, and why


def hermes_config_path() -> Path:
    return paths.hermes_agent_home() / paths.CONFIG_FILE


def read_hermes_offer(current: Config | None = None, path: Path | None = None) -> HermesOffer | None:
    """What of Hermes' compression settings would change ours (``current``); None when Hermes'
    file is missing, unreadable or has nothing to offer. Never raises for a bad file."""
    path = Path(path) if path is not None else hermes_config_path()
    current = current if current is not None else Config()
    try:
        data = yaml.safe_load(path.read_bytes().decode("utf-8-sig"))
    except (OSError, UnicodeDecodeError, yaml.YAMLError):
        return None
    if not isinstance(data, dict):
        return None
    proposed: list[tuple[str, str, Any]] = []   # (hermes key, our key, value)
    skipped: list[str] = []
    compression = data.get("compression")
    if isinstance(compression, dict):
        for key in COMPRESSION_KEYS:
            if key in compression:
                proposed.append((f"compression.{key}", f"compression.{key}", compression[key]))
    auxiliary = data.get("auxiliary")
    aux = auxiliary.get("compression") if isinstance(auxiliary, dict) else None
    if isinstance(aux, dict):
        _auxiliary(aux, proposed, skipped)
    changes: dict[str, Any] = {}
    lines: list[str] = []
    for hermes_key, ours, value in proposed:
        try:
            current.with_overrides({ours: value})
        except (ConfigError, ValueError, TypeError):
            skipped.append(f"{hermes_key}: {value!r} is not a valid value here")
            continue
        if value_at(current, ours) == value:
            continue
        changes[ours] = value
        if ours.endswith(".provider"):  # implied by the base URL, not a Hermes key of its own
            lines.append(f"{ours}: {value} (Hermes calls the base_url directly)")
        else:
            lines.append(f"{hermes_key}: {_show(value)}" + ("" if hermes_key == ours else f" → {ours}"))
    if not changes:
        return None
    return HermesOffer(path, changes, lines, skipped)


def _text(value: Any) -> str:
    return value if isinstance(value, str) else ""


def _auxiliary(aux: dict[str, Any], proposed: list[tuple[str, str, Any]], skipped: list[str]) -> None:
    prefix = "auxiliary.compression"
    if isinstance(aux.get("timeout"), (int, float)) and not isinstance(aux.get("timeout"), bool):
        proposed.append((f"{prefix}.timeout", f"{prefix}.timeout", aux["timeout"]))
    base_url = _text(aux.get("base_url"))
    model = _text(aux.get("model"))
    if not base_url.strip():
        provider = aux.get("provider") or "auto"
        if model or provider != "auto":
            skipped.append(
                f"{prefix}.provider {provider!r}" + (f" and model {model!r}" if model else "")
                + ": Hermes reaches it without a base_url, which hermes-tui needs"
            )
        return
    proposed.append((f"{prefix}.base_url", f"{prefix}.provider", "openai-api"))
    proposed.append((f"{prefix}.base_url", f"{prefix}.base_url", base_url.strip()))
    if model:
        proposed.append((f"{prefix}.model", f"{prefix}.model", model))
    key = aux.get("api_key")
    if isinstance(key, str) and key.strip():
        reference = _ENV_REFERENCE.fullmatch(key.strip())
        if reference:
            proposed.append((f"{prefix}.api_key", f"{prefix}.api_key_env", reference.group(1) or reference.group(2)))
        else:
            skipped.append(
                f"{prefix}.api_key: a key written in the file is not copied; put it in an environment "
                f"variable and name that in {prefix}.api_key_env"
            )


def _show(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)
