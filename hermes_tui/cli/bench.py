"""``hermes-tui bench``: measure what a compaction pass costs here, per model.

The work is ``hermes_tui.analysis.bench`` (shared with the bench screen); this file is the
command line around it: flags and config defaults, a progress bar on stderr, the
results table or JSON on stdout, the store. Imports of the benchmark are deferred
so ``hermes-tui --help`` stays fast.
"""

from __future__ import annotations

import argparse
import sys
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, TextIO

if TYPE_CHECKING:
    from hermes_tui.analysis.bench_results import BenchConfig, BenchProgress, BenchRun

DEFAULT_PASSES = 5  # analysis.bench_results.DEFAULT_PASSES, not imported here; a test keeps the two equal


def add_bench_parser(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> argparse.ArgumentParser:
    bench = subparsers.add_parser(
        "bench",
        help="measure what a compaction pass costs with each model",
        description=(
            "Run micro-compaction passes over the bundled sample session with each model (after a "
            "warm-up) and report per-pass duration, tokens, tokens/s and peak memory. Runs are saved "
            "in the store (state.db) to compare models across days."
        ),
    )
    bench.add_argument("--model", action="append", metavar="M",
                       help="model to benchmark; repeat for several (default: auxiliary.compression.model)")
    bench.add_argument("--provider", choices=["mlx", "openai-api"],
                       help="default: auxiliary.compression.provider")
    bench.add_argument("--base-url", metavar="URL", help="openai-api endpoint (default: auxiliary.compression.base_url)")
    bench.add_argument("--passes", type=int, default=DEFAULT_PASSES, metavar="K",
                       help=f"measured passes per model (default {DEFAULT_PASSES})")
    bench.add_argument("--warmup", type=int, default=1, metavar="N", help="passes run first, not measured (default 1)")
    bench.add_argument("--max-tokens", type=int, metavar="N",
                       help="cap each reply at N tokens (default: auxiliary.compression.max_tokens, else automatic)")
    bench.add_argument("--json", action="store_true", help="print the runs as JSON on stdout instead of a table")
    bench.add_argument("--csv", type=Path, metavar="FILE", help="also write one row per pass to FILE")
    bench.add_argument("--no-save", action="store_true", help="do not save the runs in the store")
    bench.add_argument("--list", action="store_true", help="show saved runs (newest first) instead of running")
    bench.set_defaults(run=run_bench_command)
    return bench


def run_bench_command(args: argparse.Namespace) -> int:
    from hermes_tui.analysis.bench_results import BenchError
    from hermes_tui.config import ConfigError
    from hermes_tui.core.transcript import TranscriptError
    from hermes_tui.hub.resolve import ModelUnavailable
    from hermes_tui.providers.backend import ProviderError
    from hermes_tui.store import StoreError

    try:
        return _run(args)
    except (BenchError, ConfigError, ModelUnavailable, ProviderError, StoreError, TranscriptError) as exc:
        print(f"hermes-tui bench: {exc}", file=sys.stderr)
        return 2


def _run(args: argparse.Namespace) -> int:
    from hermes_tui.analysis import bench, bench_results
    from hermes_tui.store import Store
    from hermes_tui.util import paths

    if args.list:
        with Store(paths.state_db_path()) as store:
            runs = bench_results.list_runs(store)
        if args.json:
            print(bench_results.to_json(runs))
        else:
            print("\n".join(results_table(runs)) if runs else "no saved runs")
        return 0

    cfg = bench_config(args)
    progress = ProgressBar(sys.stderr) if sys.stderr.isatty() else ProgressLines(sys.stderr)
    runs = bench.run_bench(cfg, progress=progress)
    progress.close()

    measured = [r for r in runs if r.error is None and r.answered]
    if measured and not args.no_save:
        with Store(paths.state_db_path()) as store:
            for run in measured:
                bench_results.save_run(store, run)
    if args.csv:
        try:
            args.csv.write_text(bench_results.to_csv(runs), encoding="utf-8")
        except OSError as exc:
            raise bench_results.BenchError(f"--csv {args.csv}: cannot write ({exc.strerror or exc})") from None
    if args.json:
        print(bench_results.to_json(runs))
    else:
        print("\n".join(results_table(runs)))
        if measured and not args.no_save:
            print(f"\nsaved as run {', '.join(str(r.id) for r in measured)} in {paths.state_db_path()} "
                  "(hermes-tui bench --list)")
    failed = [r for r in runs if r.error is not None or not r.answered]
    for run in failed:
        print(f"hermes-tui bench: {bench_results.problem(run)}", file=sys.stderr)
    return 2 if failed else 0


def bench_config(args: argparse.Namespace) -> BenchConfig:
    """Flags over ``auxiliary.compression`` from config.yaml."""
    from hermes_tui.analysis.bench_results import BenchConfig, BenchError
    from hermes_tui.config import load_config
    from hermes_tui.providers.backend import resolve_api_key
    from hermes_tui.providers.selection import resolve_provider

    config_path = getattr(args, "config", None)
    if config_path is not None and not config_path.is_file():
        raise BenchError(f"--config {config_path}: no such file")
    config = load_config(config_path)
    aux = config.auxiliary.compression
    models = args.model or ([aux.model] if aux.model else [])
    if not models:
        raise BenchError("no model to benchmark: pass --model M (repeatable) or set auxiliary.compression.model")
    base_url = args.base_url or aux.base_url or None
    provider = args.provider or aux.provider
    if provider == "auto":
        provider = resolve_provider(aux.model_copy(update={"model": models[0], "base_url": base_url or ""}))
    if provider not in ("mlx", "openai-api"):
        raise BenchError(f"the benchmark measures model passes: use --provider mlx or openai-api, not {provider}")
    return BenchConfig(
        models=models,
        provider=provider,
        passes=args.passes,
        warmup=args.warmup,
        base_url=base_url,
        api_key=resolve_api_key(aux.api_key_env),
        max_tokens=args.max_tokens if args.max_tokens is not None else aux.max_tokens,
        timeout=aux.timeout,
        compression=config.compression,
    )


# --- progress ------------------------------------------------------------------------


class ProgressBar:
    """One line on a terminal, redrawn: pass i/K, model, last duration."""

    def __init__(self, stream: TextIO, width: int = 24):
        self.stream, self.width, self.drawn = stream, width, False

    def __call__(self, p: BenchProgress) -> None:
        if p.phase == "error":
            self._line(f"{_short(p.model)}: cannot benchmark")
            self.stream.write("\n")
            self.drawn = False
            return
        filled = self.width * p.done // max(p.total, 1)
        bar = f"[{'#' * filled}{'.' * (self.width - filled)}]"
        if p.phase == "loading":
            what = "loading"
        elif p.phase == "warmup":
            what = f"warm-up {p.warmup_done}/{p.warmup_total}"
        else:
            what = f"pass {p.done}/{p.total}"
        last = f"  last {p.last.duration_s:.2f} s {p.last.outcome}" if p.last else ""
        self._line(f"{bar} {what}  model {p.model_index}/{p.models} {_short(p.model)}{last}")
        if p.phase == "done":
            self.stream.write("\n")
            self.drawn = False

    def _line(self, text: str) -> None:
        self.stream.write("\r" + text[:160].ljust(100))
        self.stream.flush()
        self.drawn = True

    def close(self) -> None:
        if self.drawn:
            self.stream.write("\n")
            self.stream.flush()


class ProgressLines:
    """A line per measured pass, for logs and pipes."""

    def __init__(self, stream: TextIO):
        self.stream = stream

    def __call__(self, p: BenchProgress) -> None:
        if p.phase == "pass" and p.last is not None:
            r = p.last
            failure = f" ({r.failure})" if r.failure else ""
            self.stream.write(f"{_short(p.model)}: pass {p.done}/{p.total} {r.duration_s:.3f} s {r.outcome}{failure}\n")
            self.stream.flush()
        elif p.phase == "error":
            self.stream.write(f"{_short(p.model)}: cannot benchmark\n")

    def close(self) -> None:
        pass


# --- the table -----------------------------------------------------------------------

COLUMNS = ("model", "provider", "passes", "ok", "median s", "p90 s", "prompt tok/s", "gen tok/s",
           "peak GB", "summary tok")


def results_table(runs: list[BenchRun]) -> list[str]:
    """Per model: passes, successes, median and p90 duration, median speeds, memory, summary size."""
    from hermes_tui.analysis.bench_results import is_success

    rows = []
    for run in runs:
        m = run.medians
        rows.append((
            _short(run.model, 40), run.provider, str(len(run.passes)),
            str(sum(is_success(p) for p in run.passes)),
            _num(m.get("duration_s"), 3), _num(m.get("duration_p90_s"), 3),
            _num(m.get("prompt_tps"), 1), _num(m.get("generation_tps"), 1),
            _num(m.get("peak_memory_gb"), 3), _num(m.get("summary_tokens"), 0),
        ))
    widths = [max(len(c), *(len(r[i]) for r in rows)) if rows else len(c) for i, c in enumerate(COLUMNS)]
    lines = ["  ".join(c.ljust(w) if i < 2 else c.rjust(w) for i, (c, w) in enumerate(zip(COLUMNS, widths)))]
    for row in rows:
        lines.append("  ".join(v.ljust(w) if i < 2 else v.rjust(w) for i, (v, w) in enumerate(zip(row, widths))))
    for run in runs:
        mix = ", ".join(f"{k} {n}" for k, n in sorted(run.outcomes.items()))
        failures = ", ".join(f"{k} {n}" for k, n in sorted(run.failures.items()))
        where = run.machine.get("device") or run.settings.get("base_url") or ""
        detail = f"outcomes: {mix or 'none'}" + (f"; failures: {failures}" if failures else "")
        extra = [datetime.fromtimestamp(run.started_at).strftime("%Y-%m-%d %H:%M")]
        if run.id is not None:
            extra.insert(0, f"run {run.id}")
        if run.load_s is not None:
            extra.append(f"load {run.load_s:.2f} s")
        if run.cancelled:
            extra.append("cancelled")
        if run.error:
            detail = f"error: {run.error}"
        lines.append(f"  {_short(run.model, 40)} ({', '.join([where] + extra if where else extra)}): {detail}")
    return lines


def _num(value: float | None, digits: int) -> str:
    return "-" if value is None else f"{value:,.{digits}f}"


def _short(model: str, limit: int = 48) -> str:
    return model if len(model) <= limit else "…" + model[-(limit - 1):]
