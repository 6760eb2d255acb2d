"""The ``compression`` section of the config, as the engine and the policy read it."""

from __future__ import annotations

from dataclasses import dataclass

from hermes_tui.config import COMPRESSION_DEFAULTS as _DEFAULTS


@dataclass
class CompactionSettings:
    """The ``compression`` section of the config, as the engine needs it; its defaults are the schema's."""

    enabled: bool = _DEFAULTS.enabled
    threshold: float = _DEFAULTS.threshold
    target_ratio: float = _DEFAULTS.target_ratio
    protect_first_n: int = _DEFAULTS.protect_first_n
    micro_compact: bool = _DEFAULTS.micro_compact
    trim: bool = _DEFAULTS.trim  # the model-free first stage (trim.py)
    trim_threshold_tokens: int = _DEFAULTS.trim_threshold_tokens
    micro_compact_every_n_turns: int = _DEFAULTS.micro_compact_every_n_turns
    micro_compact_defrag_threshold_tokens: int = _DEFAULTS.micro_compact_defrag_threshold_tokens
    micro_compact_mode: str = _DEFAULTS.micro_compact_mode
    fact_guard: bool = _DEFAULTS.fact_guard
    user_verbatim_tokens: int | None = _DEFAULTS.user_verbatim_tokens  # None: a share of the threshold
    # When passes run (policy.py); the marks are shares of the threshold, chosen with
    # benchmarks/bench_cache.py.
    policy: str = _DEFAULTS.policy
    high_water: float = _DEFAULTS.high_water
    low_water: float = _DEFAULTS.low_water
