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

import json
import logging
import os
import platform
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol, cast

from hermes_tui import __version__
from hermes_tui.analysis.bench_results import (
    BenchConfig,
    BenchError,
    BenchProgress,
    BenchRun,
    PassRow,
    medians,
)
from hermes_tui.compaction.state import NOTHING_TO_ABSORB
from hermes_tui.compaction.summarizer import Completion, Summarizer
from hermes_tui.core.conversation import Conversation
from hermes_tui.core.failures import TIMEOUT
from hermes_tui.core.tokens import EstimateCounter
from hermes_tui.core.transcript import Message, parse_transcript
from hermes_tui.hub.resolve import ModelUnavailable
from hermes_tui.providers.mlx.runtime import GenerationStats, LoadedModel, MlxRuntime, gpu_available
from hermes_tui.providers.mlx.summarizer import MlxSummarizer
from hermes_tui.providers.openai.summarizer import OpenAISummarizer
from hermes_tui.session.wiring import build_compactor

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


class _MeasuredSummarizer(Summarizer, Protocol):
    """A summarizer that keeps the speed figures of its last call (MLX's generation stats, a
    server's timings), or None when it has none."""

    last_stats: Any


class _PassSource:
    """The sample session in a Conversation and a Compactor; reloaded when exhausted."""

    def __init__(self, session: list[Message], summarizer: _MeasuredSummarizer, cfg: BenchConfig):
        self.session, self.summarizer, self.cfg = session, summarizer, cfg
        self.counter = EstimateCounter()
        self._reload()

    def _reload(self) -> None:
        # Fresh copies: passes mutate metadata and cached counts.
        self.conv = Conversation([m.copy() for m in self.session], counter=self.counter)
        self.compactor = build_compactor(
            self.cfg.compression, summarizer=self.summarizer, counter=self.counter,
            context_limit=self.cfg.context_limit, max_tokens_cap=self.cfg.max_tokens,
            pressure_share=None,  # one exchange per pass: the cost being measured
            session_id="bench",
        )

    def next_pass(self, index: int = 0) -> PassRow:
        for _attempt in range(2):
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
        # A pass whose model answers were rejected still absorbs (the exchange's notes); what
        # the bench measures of the model is why its last answer was not taken.
        failure=f.get("failure") or (f.get("rejected") or [None])[-1],
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
) -> tuple[_MeasuredSummarizer, float | None]:
    if cfg.provider == "openai-api":
        return _TimedOpenAISummarizer(cfg.base_url or "", model, api_key=cfg.api_key, timeout=cfg.timeout), None
    runtime = runtime or MlxRuntime.shared()
    started = time.perf_counter()
    runtime.load(model)  # raises ModelUnavailable; loaded once per process
    load_s = round(time.perf_counter() - started, 4)
    # MlxSummarizer calls only load() and generate(), which the wrapper has; its parameter
    # names the runtime's class.
    wrapped = cast(MlxRuntime, _CancellingRuntime(runtime, cancel))
    return MlxSummarizer(model, timeout=cfg.timeout, runtime=wrapped), load_s


class _CancellingRuntime:
    """The shared runtime, with the benchmark's cancel event passed to every generation."""

    def __init__(self, runtime: MlxRuntime, cancel: threading.Event):
        self._runtime, self._cancel = runtime, cancel

    def load(self, name: str, *, timeout: float | None = None) -> LoadedModel:
        return self._runtime.load(name, timeout=timeout)

    def generate(self, *args: Any, **kwargs: Any) -> GenerationStats:
        return self._runtime.generate(*args, cancel=self._cancel, **kwargs)


class _TimedOpenAISummarizer(OpenAISummarizer):
    """Also keeps the server's own speed figures when it reports them (llama.cpp's ``timings``)."""

    last_stats: ServerTimings | None = None

    def _parse(self, body_text: str, duration: float) -> Completion:
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


