"""The benchmark screen's runs: the worker body, what it reports, and the progress line it shows.

The measuring is :func:`hermes_tui.analysis.bench.run_bench`; this module only reports each pass
and the end as messages to the screen, which runs it in a thread worker."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import TYPE_CHECKING

from textual.message import Message as UIMessage

from hermes_tui.analysis import bench
from hermes_tui.analysis.bench_results import BenchConfig, BenchError, BenchProgress, BenchRun
from hermes_tui.tui.widgets.bench_view import model_label
from hermes_tui.util.logs import get_logger

if TYPE_CHECKING:
    from hermes_tui.providers.mlx.runtime import MlxRuntime

__all__ = ["BenchFinished", "BenchStep", "progress_line", "run_and_report"]

log = get_logger("tui")


class BenchStep(UIMessage):
    def __init__(self, progress: BenchProgress):
        super().__init__()
        self.progress = progress


class BenchFinished(UIMessage):
    def __init__(self, runs: list[BenchRun], error: str | None = None):
        super().__init__()
        self.runs, self.error = runs, error


def run_and_report(cfg: BenchConfig, cancel: threading.Event, runtime: MlxRuntime | None,
                   post: Callable[[UIMessage], object]) -> None:
    """Run the benchmark, posting a ``BenchStep`` per pass and one ``BenchFinished``."""
    def step(progress: BenchProgress) -> None:
        post(BenchStep(progress))

    try:
        runs = bench.run_bench(cfg, progress=step, cancel=cancel, runtime=runtime)
    except BenchError as exc:
        post(BenchFinished([], str(exc)))
    except Exception as exc:  # a bug: logged with its traceback, shown as one line
        log.exception("benchmark failed")
        post(BenchFinished([], f"{type(exc).__name__}: {exc}"))
    else:
        post(BenchFinished(runs))


def progress_line(p: BenchProgress, *, cancelling: bool) -> str:
    """The line beside the progress bar: which model, which pass, the last pass's time."""
    where = f"model {p.model_index}/{p.models} {model_label(p.model, short=True)}"
    if p.phase == "loading":
        what = "loading…"
    elif p.phase == "warmup":
        what = f"warm-up {p.warmup_done}/{p.warmup_total}"
    elif p.phase == "error":
        what = "cannot be benchmarked"
    else:
        what = f"pass {p.done}/{p.total}"
    last = f" · last {p.last.duration_s:.2f} s" if p.last is not None and p.phase in ("pass", "done") else ""
    if cancelling:
        what += " · cancelling…"
    return f"{where} · {what}{last}"
