"""What a benchmark run is: its settings, its passes and their medians; saved in the store
(``store.bench_runs``) and exported as JSON or CSV. ``analysis.bench`` makes the runs."""

from __future__ import annotations

import csv
import io
import json
import statistics
from collections import Counter
from dataclasses import asdict, dataclass, field, fields
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from hermes_tui.compaction.state import ABSORBED, DEFRAG
from hermes_tui.config import CompressionConfig
from hermes_tui.store import Store, bench_runs
from hermes_tui.util.errors import AppError

PROVIDERS = ("mlx", "openai-api")
SAMPLE_SESSION = Path(__file__).resolve().parents[1] / "assets" / "bench_session.json"
# Large enough that passes absorb (no batch compaction, no window-pressure defrag),
# small enough that most of the sample session lies before the tail.
BENCH_CONTEXT_LIMIT = 65_536
JSON_SCHEMA = "hermes-tui.bench/1"
SUCCESS = (ABSORBED, DEFRAG)

# The per-pass figures summarized by a median (over the passes the model answered).
MEDIAN_FIELDS = (
    "duration_s", "summarizer_s", "prompt_tokens", "cached_tokens", "completion_tokens",
    "prompt_tps", "generation_tps", "peak_memory_gb", "summary_tokens",
)


class BenchError(AppError):
    """A benchmark that cannot start (bad settings, unreadable sample session)."""


DEFAULT_PASSES = 5


@dataclass
class BenchConfig:
    models: list[str]
    provider: str = "mlx"                 # "mlx" | "openai-api"
    passes: int = DEFAULT_PASSES          # measured passes per model (K)
    warmup: int = 1                       # passes run first and not recorded
    base_url: str | None = None           # openai-api only
    api_key: str | None = None            # openai-api only
    max_tokens: int | None = None         # reply cap per pass; None: the engine's own budget
    timeout: float = 120.0                # seconds per pass
    session_path: Path = SAMPLE_SESSION
    context_limit: int = BENCH_CONTEXT_LIMIT
    # The passes the app would run: config.yaml's compression section (its defaults by default).
    compression: CompressionConfig = field(default_factory=CompressionConfig)

    def check(self) -> None:
        if not self.models or not all(self.models):
            raise BenchError("no model to benchmark: name one with --model (or set auxiliary.compression.model)")
        if self.provider not in PROVIDERS:
            raise BenchError(f"provider must be one of {', '.join(PROVIDERS)}, got {self.provider!r}")
        if self.provider == "openai-api" and not self.base_url:
            raise BenchError("provider openai-api needs a base URL (--base-url or auxiliary.compression.base_url)")
        if self.passes < 1:
            raise BenchError(f"passes must be at least 1, got {self.passes}")
        if self.warmup < 0:
            raise BenchError(f"warmup must be 0 or more, got {self.warmup}")
        if self.max_tokens is not None and self.max_tokens < 1:
            raise BenchError(f"max tokens must be at least 1, got {self.max_tokens}")

    def settings(self) -> dict[str, Any]:
        """What a saved run records about how it was measured."""
        return {
            "passes": self.passes,
            "warmup": self.warmup,
            "max_tokens": self.max_tokens,
            "timeout": self.timeout,
            "base_url": self.base_url if self.provider == "openai-api" else None,
            "session": self.session_path.name,
            "context_limit": self.context_limit,
        }


@dataclass
class PassRow:
    """One measured pass. Token and speed figures are None when the model did not answer."""

    index: int                            # 1-based, warm-up excluded
    outcome: str                          # the engine's pass outcome (absorbed, summarize_failed, ...)
    failure: str | None                   # why it failed: cut_off, refused, timeout, ...
    duration_s: float                     # the whole pass, engine included
    summarizer_s: float | None            # the model call alone
    exchange_tokens: int | None           # what the pass set out to absorb
    prompt_tokens: int | None
    cached_tokens: int | None             # prompt tokens served from a prefix cache
    completion_tokens: int | None
    prompt_tps: float | None              # prefill tokens/s (MLX; openai-api when the server reports timings)
    generation_tps: float | None          # decode tokens/s (likewise)
    peak_memory_gb: float | None          # MLX only
    summary_tokens: int                   # the rolling summary after the pass

    @property
    def answered(self) -> bool:
        return self.completion_tokens is not None


@dataclass
class BenchRun:
    model: str
    provider: str
    started_at: float                     # unix time
    machine: dict[str, Any]
    settings: dict[str, Any]
    passes: list[PassRow] = field(default_factory=list)
    medians: dict[str, float | None] = field(default_factory=dict)
    duration_s: float | None = None       # the whole run, load and warm-up included
    load_s: float | None = None           # loading the model (MLX)
    cancelled: bool = False
    error: str | None = None              # the model could not be benchmarked at all
    id: int | None = None                 # once saved

    @property
    def outcomes(self) -> dict[str, int]:
        return dict(Counter(p.outcome for p in self.passes))

    @property
    def failures(self) -> dict[str, int]:
        return dict(Counter(p.failure for p in self.passes if p.failure))

    @property
    def answered(self) -> int:
        return sum(p.answered for p in self.passes)

    def to_dict(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "model": self.model,
            "provider": self.provider,
            "started_at": self.started_at,
            "started": _iso(self.started_at),
            "duration_s": self.duration_s,
            "load_s": self.load_s,
            "cancelled": self.cancelled,
            "error": self.error,
            "machine": self.machine,
            "settings": self.settings,
            "outcomes": self.outcomes,
            "failures": self.failures,
            "answered": self.answered,
            "medians": self.medians,
            "passes": [asdict(p) for p in self.passes],
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> BenchRun:
        return cls(
            model=data["model"],
            provider=data["provider"],
            started_at=float(data["started_at"]),
            machine=dict(data.get("machine") or {}),
            settings=dict(data.get("settings") or {}),
            passes=[PassRow(**p) for p in data.get("passes") or []],
            medians=dict(data.get("medians") or {}),
            duration_s=data.get("duration_s"),
            load_s=data.get("load_s"),
            cancelled=bool(data.get("cancelled")),
            error=data.get("error"),
            id=data.get("id"),
        )


@dataclass(frozen=True)
class BenchProgress:
    """Where a benchmark is; ``phase`` is loading | warmup | pass | done | error."""

    model: str
    model_index: int                      # 1-based
    models: int
    phase: str
    done: int                             # measured passes done for this model
    total: int                            # K
    warmup_done: int = 0
    warmup_total: int = 0
    last: PassRow | None = None
    message: str | None = None            # the error, in phase "error"


def medians(rows: list[PassRow]) -> dict[str, float | None]:
    """Medians of each figure over the passes the model answered, and the p90 pass duration.

    A pass that never reached the model (endpoint refused, timed out) measured nothing
    about the model: it shows in the outcome and failure counts, not here.
    """
    answered = [r for r in rows if r.answered]
    out: dict[str, float | None] = {}
    for name in MEDIAN_FIELDS:
        values = [getattr(r, name) for r in answered if getattr(r, name) is not None]
        out[name] = statistics.median(values) if values else None
    out["duration_p90_s"] = percentile([r.duration_s for r in answered], 90)
    return out


def percentile(values: list[float], pct: float) -> float | None:
    """Linear interpolation between closest ranks (numpy's default); None when empty."""
    if not values:
        return None
    ordered = sorted(values)
    rank = (len(ordered) - 1) * pct / 100
    low = int(rank)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (rank - low)


def _iso(ts: float) -> str:
    return datetime.fromtimestamp(ts, UTC).isoformat(timespec="seconds")


def save_run(store: Store, run: BenchRun) -> int:
    """Insert ``run`` (one row); sets and returns its id."""
    run.id = bench_runs.insert_run(store, {
        "model": run.model, "provider": run.provider, "started": run.started_at, "duration_s": run.duration_s,
        "load_s": run.load_s, "cancelled": int(run.cancelled), "machine": run.machine, "settings": run.settings,
        "passes": [asdict(p) for p in run.passes], "medians": run.medians,
    })
    return run.id


def list_runs(store: Store, *, model: str | None = None, limit: int | None = None) -> list[BenchRun]:
    """Saved runs, newest first (of one model when given)."""
    return [_from_row(row) for row in bench_runs.select_runs(store, model=model, limit=limit)]


def load_run(store: Store, run_id: int) -> BenchRun:
    row = bench_runs.select_run(store, run_id)
    if row is None:
        raise KeyError(f"no benchmark run {run_id}")
    return _from_row(row)


def delete_run(store: Store, run_id: int) -> None:
    bench_runs.delete_run(store, run_id)


def _from_row(row: dict[str, Any]) -> BenchRun:
    return BenchRun(
        model=row["model"],
        provider=row["provider"],
        started_at=row["started"],
        machine=row["machine"],
        settings=row["settings"],
        passes=[PassRow(**p) for p in row["passes"]],
        medians=row["medians"],
        duration_s=row["duration_s"],
        load_s=row["load_s"],
        cancelled=bool(row["cancelled"]),
        id=row["id"],
    )


def to_json(runs: list[BenchRun]) -> str:
    return json.dumps({"schema": JSON_SCHEMA, "runs": [r.to_dict() for r in runs]}, indent=2)


def from_json(text: str) -> list[BenchRun]:
    data = json.loads(text)
    if not isinstance(data, dict) or data.get("schema") != JSON_SCHEMA:
        raise ValueError(f"not a {JSON_SCHEMA} document")
    return [BenchRun.from_dict(r) for r in data["runs"]]


_RUN_COLUMNS = ("run", "run_id", "model", "provider", "started_at", "device", "platform", "max_tokens")
_PASS_COLUMNS = tuple(f.name for f in fields(PassRow))


def to_csv(runs: list[BenchRun]) -> str:
    """One row per measured pass, for spreadsheets. Runs that measured nothing have no rows;
    JSON carries the complete runs (machine, settings, medians)."""
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(_RUN_COLUMNS + _PASS_COLUMNS)
    for n, run in enumerate(runs, 1):
        head = (n, run.id, run.model, run.provider, run.started_at, run.machine.get("device"),
                run.machine.get("platform"), run.settings.get("max_tokens"))
        for row in run.passes:
            writer.writerow(tuple("" if v is None else v for v in head + tuple(asdict(row).values())))
    return out.getvalue()


def from_csv(text: str) -> list[BenchRun]:
    """Runs back from ``to_csv``: their passes, recomputed medians, and the machine fields CSV carries."""
    runs: dict[str, BenchRun] = {}
    for record in csv.DictReader(io.StringIO(text)):
        run = runs.get(record["run"])
        if run is None:
            run = runs[record["run"]] = BenchRun(
                model=record["model"],
                provider=record["provider"],
                started_at=float(record["started_at"]),
                machine={"device": record["device"] or None, "platform": record["platform"] or None},
                settings={"max_tokens": _parse_cell(record["max_tokens"], int)},
                id=_parse_cell(record["run_id"], int),
            )
        run.passes.append(PassRow(**{name: _parse_cell(record[name], _PASS_TYPES[name]) for name in _PASS_COLUMNS}))
    for run in runs.values():
        run.medians = medians(run.passes)
    return list(runs.values())


_PASS_TYPES: dict[str, type] = {
    "index": int, "outcome": str, "failure": str, "duration_s": float, "summarizer_s": float,
    "exchange_tokens": int, "prompt_tokens": int, "cached_tokens": int, "completion_tokens": int,
    "prompt_tps": float, "generation_tps": float, "peak_memory_gb": float, "summary_tokens": int,
}


def _parse_cell(cell: str, kind: type) -> Any:
    return None if cell == "" else kind(cell)


def problem(run: BenchRun) -> str:
    if run.error is not None:
        return run.error  # names the model already
    kinds = ", ".join(f"{kind} {n}" for kind, n in sorted(run.failures.items())) or "none"
    return f"{run.model}: no pass got an answer from the model (failures: {kinds}); not saved"


def is_success(row: PassRow) -> bool:
    return row.outcome in SUCCESS
