"""The benchmark screen's export: the runs shown, as CSV (a row per pass) or JSON, into a new file."""

from __future__ import annotations

import time
from functools import partial
from pathlib import Path

from hermes_tui.analysis import bench_results
from hermes_tui.analysis.bench_results import BenchRun
from hermes_tui.tui.screens.dialogs import ExportDialog, ExportFormat

__all__ = ["EXPORT_FORMATS", "FORMATS", "export_dialog", "write_runs"]

FORMATS = {"csv": ".csv", "json": ".json"}
EXPORT_FORMATS = [ExportFormat("csv", "CSV (a row per pass)", FORMATS["csv"]),
                  ExportFormat("json", "JSON (runs, machine, medians)", FORMATS["json"])]


def export_dialog(runs: list[BenchRun], folder: Path) -> ExportDialog:
    """The dialog that asks where (in ``folder`` first) and as what to write ``runs``."""
    runs = list(runs)
    stamp = time.strftime("%Y%m%d-%H%M", time.localtime())
    count = f"{len(runs)} run{'' if len(runs) == 1 else 's'}"

    def file_name(fmt: str) -> str:
        return f"hermes-bench-{stamp}{FORMATS[fmt]}"

    return ExportDialog("Export benchmark runs", f"The {count} shown", EXPORT_FORMATS, folder, file_name,
                        partial(write_runs, runs))


def write_runs(runs: list[BenchRun], fmt: str, path: Path, _option: bool = False) -> Path:
    """``runs`` as CSV (a row per pass) or JSON (the whole runs) into a new file (never overwrites one)."""
    text = bench_results.to_csv(runs) if fmt == "csv" else bench_results.to_json(runs) + "\n"
    with open(path, "x", encoding="utf-8") as handle:
        handle.write(text)
    return path
