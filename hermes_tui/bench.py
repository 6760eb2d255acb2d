"""The pass benchmark: what one micro-compaction pass costs on this machine, per model.

Shared by ``hermes-tui bench`` and the bench screen. For each model, the bundled
sample session (``assets/bench_session.json``: the demo's real 182-message agent
session with long outputs cut to 2,000 characters, so a pass prompt stays within the
spec's "few thousand tokens"; ``benchmarks/make_bench_session.py`` derives it) is
loaded into a ``Conversation`` and the real engine runs micro passes over it: the
real prompt, the real checks, one real exchange per pass. A warm-up pass (or more)
runs first, so the model is loaded and the static prompt prefix is cached, as it is
in a live session from its second pass on. Every measured pass records its cost.

Nothing here touches a session: passes are not persisted, and their telemetry lines
are kept out of ``agent.log`` so ``hermes-tui report`` only ever sees real sessions.

The workload is fixed so runs compare across models and days: the same session, the
same window (``BENCH_CONTEXT_LIMIT``), the default compaction settings, and the
estimate token counter (the layout of the window must not depend on whose tokenizer
is at hand). Passes therefore walk the session's exchanges in order; when a model
absorbs every exchange before the tail, the session is reloaded and the walk starts
again. A model whose summaries are rejected retries the same exchange, as a live
session would (three attempts, then the exchange is skipped): the outcome mix says
so, and the medians still measure what each attempt cost.

``run_bench`` blocks; the screen runs it in a worker thread, and ``progress`` is
then called from that thread.
"""

from __future__ import annotations

import csv
import io
import json
import logging
import os
import platform
import statistics
import threading
import time
from collections import Counter
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field, fields
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Callable, Iterator

from hermes_tui import __version__
from hermes_tui.compaction.engine import CompactionSettings, Compactor
from hermes_tui.compaction.micro import PassContext
from hermes_tui.compaction.state import ABSORBED, DEFRAG, NOTHING_TO_ABSORB
from hermes_tui.compaction.window import ContextWindow
from hermes_tui.conversation import Conversation
from hermes_tui.mlx_runtime import MlxRuntime, ModelUnavailable, gpu_available
from hermes_tui.store.db import translate_errors
from hermes_tui.summarizers.base import TIMEOUT, Summarizer
from hermes_tui.summarizers.mlx import MlxSummarizer
from hermes_tui.summarizers.openai_api import OpenAISummarizer
from hermes_tui.tokens import EstimateCounter
from hermes_tui.transcript import Message, parse_transcript

PROVIDERS = ("mlx", "openai-api")
SAMPLE_SESSION = Path(__file__).resolve().parent / "assets" / "bench_session.json"
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


class BenchError(Exception):
    """A benchmark that cannot start (bad settings, unreadable sample session)."""


# --- what a run is ---------------------------------------------------------------------


@dataclass
class BenchConfig:
    models: list[str]
    provider: str = "mlx"                 # "mlx" | "openai-api"
    passes: int = 5                       # measured passes per model (K)
    warmup: int = 1                       # passes run first and not recorded
    base_url: str | None = None           # openai-api only
    api_key: str | None = None            # openai-api only
    max_tokens: int | None = None         # reply cap per pass; None: the engine's own budget
    timeout: float = 120.0                # seconds per pass
    session_path: Path = SAMPLE_SESSION
    context_limit: int = BENCH_CONTEXT_LIMIT

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
    def from_dict(cls, data: dict[str, Any]) -> "BenchRun":
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


# --- running ---------------------------------------------------------------------------


def run_bench(
    cfg: BenchConfig,
    *,
    progress: Callable[[BenchProgress], None] | None = None,
    cancel: threading.Event | None = None,
    runtime: MlxRuntime | None = None,
) -> list[BenchRun]:
    """Benchmark each model in turn; returns one run per model started.

    A model that cannot be loaded gives a run with ``error`` set and no passes; a
    pass that fails (rejected summary, endpoint refused, timeout) is recorded as
    such. ``cancel`` stops the benchmark within one pass (an MLX generation in
    flight is aborted); the run in progress is returned with ``cancelled`` set.
    """
    cfg.check()
    session = load_session(cfg.session_path)
    cancel = cancel or threading.Event()
    report = progress or (lambda _p: None)
    runs: list[BenchRun] = []
    with _quiet_pass_telemetry():
        for n, model in enumerate(cfg.models, 1):
            if cancel.is_set():
                break
            run = _run_model(cfg, model, n, session, report, cancel, runtime)
            runs.append(run)
            if run.cancelled:
                break
    return runs


def _run_model(
    cfg: BenchConfig, model: str, n: int, session: list[Message],
    report: Callable[[BenchProgress], None], cancel: threading.Event, runtime: MlxRuntime | None,
) -> BenchRun:
    run = BenchRun(model, cfg.provider, time.time(), machine_info(cfg.provider), cfg.settings())
    started = time.perf_counter()

    def tell(phase: str, **kw: Any) -> None:
        report(BenchProgress(model, n, len(cfg.models), phase, len(run.passes), cfg.passes,
                             warmup_total=cfg.warmup, **kw))

    tell("loading")
    try:
        summarizer, run.load_s = _make_summarizer(cfg, model, cancel, runtime)
    except ModelUnavailable as exc:
        run.error = str(exc)
        run.duration_s = round(time.perf_counter() - started, 4)
        tell("error", message=run.error)
        return run

    source = _PassSource(session, summarizer, cfg)
    for w in range(cfg.warmup):
        if cancel.is_set():
            break
        source.next_pass()
        tell("warmup", warmup_done=w + 1)
    for i in range(1, cfg.passes + 1):
        if cancel.is_set():
            break
        row = source.next_pass(index=i)
        if cancel.is_set() and row.failure == TIMEOUT:
            break  # aborted by the cancel, not a measurement
        run.passes.append(row)
        tell("pass", warmup_done=cfg.warmup, last=row)
    run.cancelled = cancel.is_set() and len(run.passes) < cfg.passes
    run.medians = medians(run.passes)
    run.duration_s = round(time.perf_counter() - started, 4)
    tell("done", warmup_done=cfg.warmup, last=run.passes[-1] if run.passes else None)
    return run


class _PassSource:
    """The sample session in a Conversation and a Compactor; reloaded when exhausted."""

    def __init__(self, session: list[Message], summarizer: Summarizer, cfg: BenchConfig):
        self.session, self.summarizer, self.cfg = session, summarizer, cfg
        self.counter = EstimateCounter()
        self._reload()

    def _reload(self) -> None:
        # Fresh copies: passes mutate metadata and cached counts.
        self.conv = Conversation([m.copy() for m in self.session], counter=self.counter)
        window = ContextWindow(limit=self.cfg.context_limit)
        settings = CompactionSettings()
        ctx = PassContext(
            summarizer=self.summarizer,
            counter=self.counter,
            window=window,
            protect_first_n=settings.protect_first_n,
            defrag_threshold_tokens=settings.micro_compact_defrag_threshold_tokens,
            max_tokens_cap=self.cfg.max_tokens,
            pressure_share=None,  # one exchange per pass: the cost being measured
        )
        self.compactor = Compactor(ctx, settings, session_id="bench")

    def next_pass(self, index: int = 0) -> PassRow:
        for attempt in range(2):
            self.summarizer.last_stats = None
            started = time.perf_counter()
            report = self.compactor.micro_pass(self.conv)
            duration = time.perf_counter() - started
            if report.outcome != NOTHING_TO_ABSORB:
                return _row(index, report.fields, duration, self.summarizer.last_stats)
            self._reload()  # every exchange absorbed: walk the session again
        raise BenchError(f"{self.cfg.session_path}: no exchange to absorb between the head and the tail")


def _row(index: int, f: dict[str, Any], duration: float, stats: Any) -> PassRow:
    summarizer_ms = f.get("summarizer_ms")
    return PassRow(
        index=index,
        outcome=f["outcome"],
        failure=f.get("failure"),
        duration_s=round(duration, 4),
        summarizer_s=round(summarizer_ms / 1000, 4) if summarizer_ms is not None else None,
        exchange_tokens=f.get("exchange_tokens"),
        prompt_tokens=f.get("prompt_tokens"),
        cached_tokens=f.get("cached_tokens"),
        completion_tokens=f.get("completion_tokens"),
        prompt_tps=_rounded(getattr(stats, "prompt_tps", None), 1),
        generation_tps=_rounded(getattr(stats, "generation_tps", None), 1),
        peak_memory_gb=_rounded(getattr(stats, "peak_memory_gb", None), 4),
        summary_tokens=f.get("rolling_summary_tokens") or 0,
    )


def _make_summarizer(
    cfg: BenchConfig, model: str, cancel: threading.Event, runtime: MlxRuntime | None
) -> tuple[Summarizer, float | None]:
    if cfg.provider == "openai-api":
        return _TimedOpenAISummarizer(cfg.base_url or "", model, api_key=cfg.api_key, timeout=cfg.timeout), None
    runtime = runtime or MlxRuntime.shared()
    started = time.perf_counter()
    runtime.load(model)  # raises ModelUnavailable; loaded once per process
    load_s = round(time.perf_counter() - started, 4)
    return MlxSummarizer(model, timeout=cfg.timeout, runtime=_CancellingRuntime(runtime, cancel)), load_s


class _CancellingRuntime:
    """The shared runtime, with the benchmark's cancel event passed to every generation."""

    def __init__(self, runtime: MlxRuntime, cancel: threading.Event):
        self._runtime, self._cancel = runtime, cancel

    def load(self, name: str, *, timeout: float | None = None):
        return self._runtime.load(name, timeout=timeout)

    def generate(self, *args: Any, **kwargs: Any):
        return self._runtime.generate(*args, cancel=self._cancel, **kwargs)


class _TimedOpenAISummarizer(OpenAISummarizer):
    """Also keeps the server's own speed figures when it reports them (llama.cpp's ``timings``)."""

    last_stats: "ServerTimings | None" = None

    def _parse(self, body_text: str, duration: float):
        completion = super()._parse(body_text, duration)
        self.last_stats = _server_timings(body_text)
        return completion


@dataclass(frozen=True)
class ServerTimings:
    prompt_tps: float | None
    generation_tps: float | None


def _server_timings(body_text: str) -> ServerTimings | None:
    """llama.cpp's ``timings`` block, the only widespread per-request speed report."""
    try:
        timings = json.loads(body_text).get("timings")
    except (ValueError, AttributeError):
        return None
    if not isinstance(timings, dict):
        return None
    prompt, generation = timings.get("prompt_per_second"), timings.get("predicted_per_second")
    return ServerTimings(
        float(prompt) if isinstance(prompt, (int, float)) and prompt > 0 else None,
        float(generation) if isinstance(generation, (int, float)) and generation > 0 else None,
    )


@contextmanager
def _quiet_pass_telemetry() -> Iterator[None]:
    """Drop the passes' info lines (telemetry) logged from this thread: not a session's."""
    logger = logging.getLogger("hermes_tui.compaction")
    thread = threading.get_ident()

    def keep(record: logging.LogRecord) -> bool:
        return record.thread != thread or record.levelno >= logging.WARNING

    logger.addFilter(keep)
    try:
        yield
    finally:
        logger.removeFilter(keep)


def load_session(path: Path) -> list[Message]:
    try:
        text = Path(path).read_text(encoding="utf-8")
    except OSError as exc:
        raise BenchError(f"{path}: cannot read the sample session ({exc.strerror or exc})") from None
    return parse_transcript(text, source=str(path))


def machine_info(provider: str) -> dict[str, Any]:
    """Where the run happened. For openai-api the model runs elsewhere: the device is the server's."""
    info: dict[str, Any] = {
        "platform": platform.platform(),
        "machine": platform.machine(),
        "processor": _processor(),
        "cpu_count": os.cpu_count(),
        "memory_gb": _memory_gb(),
        "python": platform.python_version(),
        "hermes_tui": __version__,
        "mlx": None,
        "mlx_lm": None,
        "device": None,
    }
    if provider == "mlx":
        info["device"] = "gpu" if gpu_available() else "cpu"
        info["mlx"] = _version("mlx")
        info["mlx_lm"] = _version("mlx-lm")
    return info


def _processor() -> str:
    if platform.system() == "Darwin":
        import subprocess

        try:
            out = subprocess.run(["sysctl", "-n", "machdep.cpu.brand_string"], capture_output=True, text=True, timeout=2)
            if out.returncode == 0 and out.stdout.strip():
                return out.stdout.strip()
        except (OSError, subprocess.SubprocessError):
            pass
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def _memory_gb() -> float | None:
    try:
        return round(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 1e9, 1)
    except (ValueError, OSError, AttributeError):
        return None


def _version(dist: str) -> str | None:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version(dist)
    except PackageNotFoundError:
        return None


def _rounded(value: float | None, digits: int) -> float | None:
    return round(float(value), digits) if value is not None else None


def _iso(ts: float) -> str:
    return datetime.fromtimestamp(ts, timezone.utc).isoformat(timespec="seconds")


# --- the store ---------------------------------------------------------------------------
# Functions over a Store rather than Store methods: the benchmark owns this table's shape.

_COLUMNS = "id, model, provider, started, duration_s, load_s, cancelled, machine, settings, passes, medians"


def save_run(store, run: BenchRun) -> int:
    """Insert ``run`` (one row); sets and returns its id."""
    with translate_errors(store.path):
        cursor = store.conn.execute(
            "INSERT INTO bench_runs (model, provider, started, duration_s, load_s, cancelled, machine, settings, "
            "passes, medians) VALUES (?,?,?,?,?,?,?,?,?,?)",
            (
                run.model, run.provider, run.started_at, run.duration_s, run.load_s, int(run.cancelled),
                json.dumps(run.machine), json.dumps(run.settings),
                json.dumps([asdict(p) for p in run.passes]), json.dumps(run.medians),
            ),
        )
    run.id = cursor.lastrowid
    return run.id


def list_runs(store, *, model: str | None = None, limit: int | None = None) -> list[BenchRun]:
    """Saved runs, newest first (of one model when given)."""
    sql = f"SELECT {_COLUMNS} FROM bench_runs"
    params: list[Any] = []
    if model is not None:
        sql += " WHERE model = ?"
        params.append(model)
    sql += " ORDER BY started DESC, id DESC"
    if limit is not None:
        sql += " LIMIT ?"
        params.append(limit)
    with translate_errors(store.path):
        rows = store.conn.execute(sql, params).fetchall()
    return [_from_row(row) for row in rows]


def load_run(store, run_id: int) -> BenchRun:
    with translate_errors(store.path):
        row = store.conn.execute(f"SELECT {_COLUMNS} FROM bench_runs WHERE id = ?", (run_id,)).fetchone()
    if row is None:
        raise KeyError(f"no benchmark run {run_id}")
    return _from_row(row)


def delete_run(store, run_id: int) -> None:
    with translate_errors(store.path):
        store.conn.execute("DELETE FROM bench_runs WHERE id = ?", (run_id,))


def _from_row(row: tuple) -> BenchRun:
    run_id, model, provider, started, duration_s, load_s, cancelled, machine, settings, passes, meds = row
    return BenchRun(
        model=model,
        provider=provider,
        started_at=started,
        machine=json.loads(machine),
        settings=json.loads(settings),
        passes=[PassRow(**p) for p in json.loads(passes)],
        medians=json.loads(meds),
        duration_s=duration_s,
        load_s=load_s,
        cancelled=bool(cancelled),
        id=run_id,
    )


# --- export ------------------------------------------------------------------------------


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


def is_success(row: PassRow) -> bool:
    return row.outcome in SUCCESS
