"""The ``compression`` section of the config, as the engine and the policy read it."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass
class CompactionSettings:
    """The ``compression`` section of the config, as the engine needs it."""

    enabled: bool = True
    threshold: float = 0.80
    target_ratio: float = 0.20
    protect_first_n: int = 3
    micro_compact: bool = True
    micro_compact_every_n_turns: int = 1
    micro_compact_defrag_threshold_tokens: int = 2000
    micro_compact_mode: str = "merge"   # the engine's plain behaviour; config.py holds the app's default
    fact_guard: bool = False
    # When passes run (policy.py); the marks are shares of the threshold, chosen with
    # benchmarks/bench_cache.py.
    policy: str = "watermark"
    high_water: float = 0.85
    low_water: float = 0.55
