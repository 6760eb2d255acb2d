"""Content-free telemetry lines and the human-readable log lines the spec shows.

``hermes_tui.analysis.report`` parses these lines back: keep the prefixes stable.
"""

from __future__ import annotations

import json
import logging
from typing import Any

logger = logging.getLogger("hermes_tui.compaction")

MICRO_PREFIX = "micro compaction telemetry: "
BATCH_PREFIX = "context compression attempt telemetry: "
TRIM_PREFIX = "trim compaction telemetry: "

# Every micro line carries these keys (null when not applicable), in this order.
MICRO_FIELDS = (
    "event", "session_id", "outcome", "failure",
    "messages_before", "messages_after", "tokens_before", "tokens_after", "tokens_delta",
    "exchange_tokens", "rolling_summary_tokens", "cursor", "passes_total", "tokens_saved_total",
    "duration_ms", "threshold_tokens", "context_limit", "occupancy_pct", "main_model", "aux_model",
    "prompt_tokens", "completion_tokens", "cached_tokens", "summarizer_ms",
    # Where a pass's time goes: prompt tokens the model had to prefill (not served from
    # its prefix cache), tokens it generated, the pass's own time besides the model
    # call, and the speeds the backend measured (MLX; null elsewhere).
    "mode", "prefill_tokens", "generated_tokens", "overhead_ms", "prompt_tps", "generation_tps",
    # The fact guard: facts in the summary's Facts section, and how many this pass added.
    "facts_kept", "facts_added",
    # The user-message floor: user messages this pass folded, and quotes the summary holds.
    "users_folded", "quotes",
    # Who wrote what was absorbed ("model", or the exchange's deterministic "notes"), why the
    # model's answers were not taken (reasons only), and how many calls the pass made.
    "written_by", "rejected", "model_calls",
    # Why a defrag ran (summary_size, window_pressure), and the tokens of the summary's piece
    # it consolidated (null: the whole summary with the middle).
    "defrag_reason", "defrag_piece_tokens",
)
BATCH_FIELDS = (
    "event", "session_id", "outcome", "failure",
    "messages_before", "messages_after", "tokens_before", "tokens_after", "tokens_delta",
    "absorbed_tokens", "summary_tokens", "summarizer_calls",
    "duration_ms", "threshold_tokens", "context_limit", "occupancy_pct", "main_model", "aux_model",
    "prompt_tokens", "completion_tokens", "users_folded", "quotes",
    # Chunks whose summary is their deterministic notes (the model's call failed or its
    # answer was rejected), and why (reasons only).
    "chunks_by_notes", "rejected",
    # The fact guard: facts in the new marker's Facts section. With nothing else left to absorb,
    # the tokens of the summary's oldest notes that gave way.
    "facts_kept", "summary_gave_way_tokens",
)

# The trim stage (trim.py): counts only, no content.
TRIM_FIELDS = (
    "event", "session_id", "outcome", "failure",
    "messages_before", "messages_after", "tokens_before", "tokens_after", "tokens_delta",
    "results_trimmed", "tail_results_trimmed", "trimmed_tokens_before", "trimmed_tokens_after",
    "tokens_saved_total", "duration_ms", "threshold_tokens", "context_limit", "occupancy_pct", "main_model",
)


def _line(prefix: str, fields: tuple[str, ...], payload: dict[str, Any]) -> str:
    ordered = {key: payload.get(key) for key in fields}
    return prefix + json.dumps(ordered, separators=(",", ":"))


def log_micro(payload: dict[str, Any]) -> str:
    line = _line(MICRO_PREFIX, MICRO_FIELDS, {"event": "micro_compaction", **payload})
    logger.info(line)
    return line


def log_batch(payload: dict[str, Any]) -> str:
    line = _line(BATCH_PREFIX, BATCH_FIELDS, {"event": "batch_compaction", **payload})
    logger.info(line)
    return line


def log_trim(payload: dict[str, Any]) -> str:
    line = _line(TRIM_PREFIX, TRIM_FIELDS, {"event": "trim_compaction", **payload})
    logger.info(line)
    return line


def log_human(text: str) -> None:
    logger.info(text)
