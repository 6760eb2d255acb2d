"""The report's figures, from parsed telemetry records (``telemetry_log``): pure functions.

Passes, outcome mix, net tokens saved, mean absorbed-exchange size, pass durations,
occupancy, batch compactions (fired, and failed: an attempt that found nothing to
absorb is a failure too, since the backstop did not do its job), where a pass's time
goes, what the chat model had to prefill per turn and how much its prefix cache served,
and each session's trajectory and occupancy series.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Iterable, Sequence
from typing import Any

from hermes_tui.analysis.telemetry_log import (
    BATCH_EVENT,
    CHAT_EVENT,
    HERMES_BATCH_EVENT,
    MICRO_EVENT,
)

# Report order for the outcome mix; anything else a newer engine logs follows, sorted.
MICRO_OUTCOMES = (
    "absorbed",
    "defrag",
    "defrag_failed",
    "summarize_failed",
    "exchange_skipped",
    "nothing_to_absorb",
    "store_failed",
)
# Passes that changed the transcript, shown in the trajectory table.
TRAJECTORY_OUTCOMES = ("absorbed", "defrag")
# The one outcome that never called the summarizer, so it says nothing about cost.
NO_MODEL_CALL = "nothing_to_absorb"

NO_SESSION = "(no session id)"



def _number(value: Any) -> float | None:
    """``value`` if it is a finite real number (not a bool, NaN or infinity), else None."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value


def _tokens_delta(record: dict[str, Any]) -> float | None:
    delta = _number(record.get("tokens_delta"))
    if delta is None:
        before, after = _number(record.get("tokens_before")), _number(record.get("tokens_after"))
        if before is not None and after is not None:
            delta = after - before
    return delta


def percentile(values: Sequence[float], pct: float) -> float | None:
    """Nearest-rank percentile: the smallest value with at least ``pct``% of values at or below it."""
    if not values:
        return None
    ordered = sorted(values)
    rank = max(1, math.ceil(pct / 100 * len(ordered)))
    return ordered[rank - 1]


def _spread(values: list[float], *, p90: bool) -> dict[str, Any]:
    if not values:
        figures: dict[str, Any] = {"count": 0, "min": None, "median": None, "max": None}
    else:
        figures = {
            "count": len(values),
            "min": min(values),
            "median": statistics.median(values),
            "max": max(values),
        }
    if p90:
        figures["p90"] = percentile(values, 90)
    return figures


def _is_micro(record: dict[str, Any]) -> bool:
    return record.get("event") == MICRO_EVENT


def _is_batch(record: dict[str, Any]) -> bool:
    return record.get("event") in (BATCH_EVENT, HERMES_BATCH_EVENT)


def _batch_fired(record: dict[str, Any]) -> bool:
    """Ours say ``outcome: compressed``; Hermes Agent's ``commit_status: committed``."""
    return record.get("outcome") == "compressed" or record.get("commit_status") == "committed"


def _is_chat(record: dict[str, Any]) -> bool:
    return record.get("event") == CHAT_EVENT


def session_of(record: dict[str, Any]) -> str:
    session = record.get("session_id")
    return str(session) if session not in (None, "") else NO_SESSION


def summarize(records: Iterable[dict[str, Any]]) -> dict[str, Any]:
    """The report's figures over ``records`` (parsed telemetry payloads).

    - ``passes``: micro-compaction lines.
    - ``outcomes``: ``{outcome: {"count", "pct"}}``, pct of passes.
    - ``net_tokens_saved``: sum of ``-tokens_delta`` over passes (negative = cost).
    - ``mean_absorbed_exchange_tokens``: mean ``exchange_tokens`` over absorbed passes.
    - ``duration_ms``: count/min/median/p90/max over passes that called the model
      (everything but ``nothing_to_absorb``); p90 is nearest-rank.
    - ``occupancy_pct``: count/min/median/max over non-null values of micro passes.
    - ``batch_compactions``: ``{"fired": compressed, "failed": every other outcome,
      "nothing_to_absorb": those of the failed that found nothing to absorb}``.
    - ``sessions``: distinct session ids seen in any kind of line.
    - ``cost``: where the time goes (``pass_cost``); None when no pass logged it.
    - ``chat``: the chat model's requests (``chat_figures``); None when none was logged.
    """
    records = list(records)
    micro = [r for r in records if _is_micro(r)]
    batch = [r for r in records if _is_batch(r)]
    chat = [r for r in records if _is_chat(r)]

    counts: dict[str, int] = {}
    for record in micro:
        outcome = str(record.get("outcome"))
        counts[outcome] = counts.get(outcome, 0) + 1
    order = [o for o in MICRO_OUTCOMES if o in counts] + sorted(o for o in counts if o not in MICRO_OUTCOMES)
    outcomes = {o: {"count": counts[o], "pct": 100.0 * counts[o] / len(micro)} for o in order}

    deltas = [d for d in (_tokens_delta(r) for r in micro) if d is not None]
    exchanges = [
        x for x in (_number(r.get("exchange_tokens")) for r in micro if r.get("outcome") == "absorbed") if x is not None
    ]
    durations = [
        d for d in (_number(r.get("duration_ms")) for r in micro if r.get("outcome") != NO_MODEL_CALL) if d is not None
    ]
    occupancy = [o for o in (_number(r.get("occupancy_pct")) for r in micro) if o is not None]

    return {
        "sessions": len({session_of(r) for r in micro + batch + chat}),
        # As Hermes Agent counts them: a line that found nothing to absorb is not a pass.
        "passes": sum(1 for r in micro if r.get("outcome") != NO_MODEL_CALL),
        "outcomes": outcomes,
        "net_tokens_saved": -sum(deltas),
        "mean_absorbed_exchange_tokens": statistics.fmean(exchanges) if exchanges else None,
        "duration_ms": _spread(durations, p90=True),
        "occupancy_pct": _spread(occupancy, p90=False),
        "batch_compactions": {
            "fired": sum(1 for r in batch if _batch_fired(r)),
            # The backstop ran because the window was full: finding nothing to absorb
            # means the window stays full, so it failed as surely as a refused summary.
            "failed": sum(1 for r in batch if not _batch_fired(r)),
            "nothing_to_absorb": sum(1 for r in batch if r.get("outcome") == NO_MODEL_CALL),
        },
        "cost": pass_cost(micro),
        "chat": chat_figures(chat),
    }


def chat_figures(chat: Sequence[dict[str, Any]]) -> dict[str, Any] | None:
    """What the chat model's requests cost: ``requests``; ``reported``: how many carried
    the provider's usage; ``prompt_tokens``, ``cached_tokens``, ``prefill_tokens``: totals
    over those; ``cache_reuse_pct``: cached / prompt; ``per_turn``: prefill tokens summed
    per turn (a user message and every request it led to), count/min/median/max;
    ``context_tokens``: our count of each request, count/min/median/max."""
    if not chat:
        return None
    reported = [r for r in chat if _number(r.get("prompt_tokens")) is not None]
    prompt = sum(n for r in reported if (n := _number(r.get("prompt_tokens"))) is not None)  # each has one
    cached = sum(_number(r.get("cached_tokens")) or 0 for r in reported)
    prefill = sum(_prefill(r) for r in reported)
    turns: dict[tuple[str, Any], float] = {}
    for record in reported:
        key = (session_of(record), record.get("turn"))
        turns[key] = turns.get(key, 0) + _prefill(record)
    context = [c for c in (_number(r.get("context_tokens")) for r in chat) if c is not None]
    return {
        "requests": len(chat),
        "reported": len(reported),
        "prompt_tokens": prompt,
        "cached_tokens": cached,
        "prefill_tokens": prefill,
        "cache_reuse_pct": 100.0 * cached / prompt if prompt else None,
        "per_turn": _spread(list(turns.values()), p90=False),
        "context_tokens": _spread(context, p90=False),
    }


def _prefill(record: dict[str, Any]) -> float:
    prefill = _number(record.get("prefill_tokens"))
    if prefill is not None:
        return prefill
    return max(0, (_number(record.get("prompt_tokens")) or 0) - (_number(record.get("cached_tokens")) or 0))


def occupancy_series(records: Sequence[dict[str, Any]]) -> tuple[list[float], str] | None:
    """One session's occupancy (% of the threshold) over time, and what each point is:
    every chat request where the log has them (what the model was sent), else every
    micro pass (the context a pass left). None when no line logged occupancy."""
    for source, pick in (("requests", _is_chat), ("passes", _is_micro)):
        points = [o for o in (_number(r.get("occupancy_pct")) for r in records if pick(r)) if o is not None]
        if points:
            return points, source
    return None


# Per-pass cost fields (telemetry.MICRO_FIELDS) and how the report names them.
COST_FIELDS = ("prefill_tokens", "cached_tokens", "generated_tokens", "summarizer_ms", "overhead_ms")


def pass_cost(micro: Iterable[dict[str, Any]]) -> dict[str, Any] | None:
    """Where the passes' time went, over micro passes that called the model.

    Per field of ``COST_FIELDS``: ``{"count", "total", "median"}`` over the passes that
    logged it. ``split``: the model time of the passes whose backend reported its
    prompt and generation speeds (MLX), estimated as prefill ``prefill_tokens /
    prompt_tps`` and generation ``generated_tokens / generation_tps``:
    ``{"passes", "prefill_ms", "generation_ms", "summarizer_ms"}``. ``modes``: how many
    passes ran in each micro-compaction mode. None when no pass logged any of it.
    """
    called = [r for r in micro if r.get("outcome") != NO_MODEL_CALL]
    figures: dict[str, Any] = {}
    for name in COST_FIELDS:
        values = [v for v in (_number(r.get(name)) for r in called) if v is not None]
        figures[name] = {
            "count": len(values),
            "total": sum(values) if values else None,
            "median": statistics.median(values) if values else None,
        }
    if not any(figures[name]["count"] for name in COST_FIELDS):
        return None
    split = {"passes": 0, "prefill_ms": 0.0, "generation_ms": 0.0, "summarizer_ms": 0.0}
    for record in called:
        prefill, generated = _number(record.get("prefill_tokens")), _number(record.get("generated_tokens"))
        prompt_tps, generation_tps = _number(record.get("prompt_tps")), _number(record.get("generation_tps"))
        model_ms = _number(record.get("summarizer_ms"))
        if prefill is None or generated is None or model_ms is None or not prompt_tps or not generation_tps:
            continue
        split["passes"] += 1
        split["prefill_ms"] += 1000 * prefill / prompt_tps
        split["generation_ms"] += 1000 * generated / generation_tps
        split["summarizer_ms"] += model_ms
    figures["split"] = split if split["passes"] else None
    modes: dict[str, int] = {}
    for record in called:
        if record.get("mode"):
            modes[str(record["mode"])] = modes.get(str(record["mode"]), 0) + 1
    figures["modes"] = modes
    return figures


def trajectory(records: Iterable[dict[str, Any]]) -> list[dict[str, Any]]:
    """One row per absorbed/defrag pass of one session, in log order.

    ``pass`` is the pass's position among all of the session's micro lines, so a gap
    in the numbering is a pass that changed nothing (or failed).
    """
    rows = []
    micro = [r for r in records if _is_micro(r)]
    for number, record in enumerate(micro, start=1):
        if record.get("outcome") not in TRAJECTORY_OUTCOMES:
            continue
        rows.append(
            {
                "pass": number,
                "outcome": record.get("outcome"),
                "messages_before": _number(record.get("messages_before")),
                "messages_after": _number(record.get("messages_after")),
                "tokens_before": _number(record.get("tokens_before")),
                "tokens_after": _number(record.get("tokens_after")),
                "tokens_delta": _tokens_delta(record),
                "occupancy_pct": _number(record.get("occupancy_pct")),
                "duration_ms": _number(record.get("duration_ms")),
            }
        )
    return rows


def summarize_sessions(records: Iterable[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """``summarize`` per session id (first-seen order), plus each session's trajectory.

    ``last_tokens_saved_total`` is the engine's own running total from the session's
    last micro line; it equals ``net_tokens_saved`` when the log holds every pass.
    """
    by_session: dict[str, list[dict[str, Any]]] = {}
    for record in records:
        if _is_micro(record) or _is_batch(record) or _is_chat(record):
            by_session.setdefault(session_of(record), []).append(record)
    sessions = {}
    for session, own in by_session.items():
        figures = summarize(own)
        totals = [_number(r.get("tokens_saved_total")) for r in own if _is_micro(r)]
        totals = [t for t in totals if t is not None]
        figures["last_tokens_saved_total"] = totals[-1] if totals else None
        figures["trajectory"] = trajectory(own)
        series = occupancy_series(own)
        figures["occupancy_series"] = None if series is None else {"points": series[0], "of": series[1]}
        sessions[session] = figures
    return sessions


