"""The benchmark screen's views: the models offered, the results table, the duration chart (a bar
in eighths of a cell and a sparkline per run) and the saved runs, drawn from ``BenchRun``s."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical
from textual.widget import Widget
from textual.widgets import DataTable, Label, Sparkline, Static

from hermes_tui.analysis.bench_results import BenchRun, is_success
from hermes_tui.hub.units import format_bytes
from hermes_tui.tui.widgets.outside import shown, shown_cell
from hermes_tui.tui.widgets.text import human_time

if TYPE_CHECKING:
    from hermes_tui.hub import LocalModel

__all__ = ["ChartRow", "DurationBar", "HistoryTable", "fill_chart", "fill_history", "fill_results", "model_choices",
           "model_label"]

EIGHTHS = " ▏▎▍▌▋▊▉"
SHOWN = "●"


def model_label(model: str, *, short: bool = False) -> str:
    """A model as people call it: an imported folder by its name, a repo id as it is."""
    path = Path(model)
    label = path.name if path.is_absolute() else model
    return label.removeprefix("mlx-community/") if short else label


def _num(value: float | None, digits: int) -> str:
    return "-" if value is None else f"{value:,.{digits}f}"


def _seconds(value: float | None) -> str:
    if value is None:
        return "-"
    return f"{value:.3f}" if value < 10 else f"{value:.1f}"


class DurationBar(Widget):
    """A horizontal bar, ``value`` out of ``maximum`` of the width, in eighths of a cell."""

    DEFAULT_CSS = """
    DurationBar {
        width: 1fr;
        height: 1;
        color: $primary;
    }
    """

    def __init__(self, value: float, maximum: float, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.value, self.maximum = value, maximum

    def render(self) -> Text:
        width = self.size.width
        if width <= 0 or self.maximum <= 0 or self.value <= 0:
            return Text("")
        eighths = max(1, round(min(1.0, self.value / self.maximum) * width * 8))
        full, part = divmod(eighths, 8)
        return Text("█" * full + (EIGHTHS[part] if part else ""), no_wrap=True)


class ChartRow(Horizontal):
    """One run: its name, the bar of its median pass duration, the figure, every pass."""

    DEFAULT_CSS = """
    ChartRow {
        height: 1;
        & > .name { width: 20; padding-right: 1; text-wrap: nowrap; text-overflow: ellipsis; }
        & > .value { width: 10; text-align: right; padding-right: 1; }
        & > Sparkline { width: 16; }
    }
    """

    def __init__(self, name: str, median: float | None, maximum: float, durations: list[float]) -> None:
        super().__init__()
        self.run_name, self.median, self.maximum, self.durations = name, median, maximum, durations

    def compose(self) -> ComposeResult:
        yield Label(shown(self.run_name), classes="name")  # a model's name: a folder's or a server's
        yield DurationBar(self.median or 0.0, self.maximum)
        yield Label(f"{_seconds(self.median)} s" if self.median is not None else "-", classes="value", markup=False)
        yield Sparkline(self.durations)


class HistoryTable(DataTable[str | Text]):
    BINDINGS = [Binding("enter", "select_cursor", "Show")]


def model_choices(local: list[LocalModel], configured: str, requested: list[str]) -> list[tuple[str, str, bool]]:
    """(label, value, picked): the complete local models, the configured compression model, the ones
    asked for; a folder named twice (a path and its resolved form) is offered once."""
    choices: dict[str, tuple[str, str]] = {}
    for m in local:
        if m.complete:
            value = m.name if m.source == "hf-cache" else str(m.path)
            choices[value] = (f"{m.name}  {format_bytes(m.size_bytes)}", value)
    if configured and not _known(configured, choices):
        choices[configured] = (f"{model_label(configured)}  (compression model)", configured)
    for value in requested:
        if not _known(value, choices):
            choices[value] = (model_label(value), value)
    picked = {_canonical(v, choices) for v in (requested or ([configured] if configured else []))}
    return [(label, value, value in picked) for label, value in choices.values()]


def _canonical(value: str, choices: dict[str, tuple[str, str]]) -> str:
    if value in choices:
        return value
    try:
        resolved = Path(value).expanduser().resolve()
    except OSError:
        return value
    for known in choices:
        if Path(known).is_absolute() and Path(known).resolve() == resolved:
            return known
    return value


def _known(value: str, choices: dict[str, tuple[str, str]]) -> bool:
    return _canonical(value, choices) in choices


# --- filling them -------------------------------------------------------------------------


def fill_results(table: DataTable[str | Text], runs: list[BenchRun], *, wide: bool, width: int) -> None:
    """The results table: a row per run shown, fewer columns on a narrow screen."""
    table.clear(columns=True)
    if wide:
        columns = [("When", 16), ("Provider", 10), ("Passes", 6), ("OK", 3), ("Median s", 8), ("p90 s", 8),
                   ("Prompt tok/s", 12), ("Gen tok/s", 9), ("Peak GB", 7), ("Summary tok", 11)]
    else:
        columns = [("Passes", 6), ("OK", 3), ("Median", 6), ("p90", 6), ("Prompt/s", 8), ("Gen/s", 6),
                   ("GB", 5), ("Summary", 7)]
    room = width - 2 - 1 - 2 - sum(w + 2 for _, w in columns)
    table.add_column("Model", width=max(12, min(44, room)), key="model")
    for label, width in columns:
        table.add_column(Text(label, justify="right") if label not in ("When", "Provider") else label,
                         width=width, key=label.lower())
    for n, run in enumerate(runs):
        m = run.medians
        name = shown_cell(model_label(run.model, short=not wide), no_wrap=True, overflow="ellipsis")
        if run.cancelled:
            name.append(" (cancelled)", style="dim")
        figures = [
            str(len(run.passes)), str(sum(is_success(p) for p in run.passes)),
            _seconds(m.get("duration_s")), _seconds(m.get("duration_p90_s")),
            _num(m.get("prompt_tps"), 0), _num(m.get("generation_tps"), 0),
            _num(m.get("peak_memory_gb"), 2), _num(m.get("summary_tokens"), 0),
        ]
        cells: list[str | Text] = [name]
        if wide:
            cells += [human_time(run.started_at), shown_cell(run.provider)]
        cells += [Text(value, justify="right") for value in figures]
        table.add_row(*cells, key=str(n))


def fill_chart(chart: Vertical, runs: list[BenchRun], *, wide: bool) -> None:
    """The chart: per run, a bar of its median pass duration and a sparkline of every pass."""
    chart.remove_children()
    if not runs:
        chart.mount(Static("No runs to show yet: pick models above and press r (or Run).", classes="legend",
                           markup=False))
        return
    maximum = max((run.medians.get("duration_s") or 0.0 for run in runs), default=0.0)
    rows: list[Widget] = [
        Static("Pass duration per model · bar: median · sparkline: each pass in order", classes="legend",
               markup=False)
    ]
    for run in runs:
        rows.append(ChartRow(
            model_label(run.model, short=not wide), run.medians.get("duration_s"), maximum,
            [p.duration_s for p in run.passes],
        ))
    chart.mount(*rows)


def fill_history(table: DataTable[str | Text], history: list[BenchRun], shown: list[BenchRun], *, wide: bool, width: int) -> None:
    """The saved runs, newest first; a dot marks those in the comparison. The cursor stays on its run."""
    keep = table.coordinate_to_cell_key(table.cursor_coordinate).row_key.value if table.row_count else None
    table.clear(columns=True)
    columns = [("#", 4), ("When", 16), ("Provider", 10), ("Passes", 6), ("Median s", 8)]
    if wide:
        columns += [("Gen tok/s", 9), ("Peak GB", 7), ("Machine", 24)]
    room = width - 2 - 1 - 2 - 3 - sum(w + 2 for _, w in columns)
    table.add_column("", width=1, key="shown")
    table.add_column("Model", width=max(12, min(44, room)), key="model")
    for label, width in columns:
        table.add_column(Text(label, justify="right") if label not in ("When", "Provider", "Machine") else label,
                         width=width, key=label.lower())
    shown_ids = {run.id for run in shown if run.id is not None}
    for run in history:
        cells: list[str | Text] = [
            Text(SHOWN if run.id in shown_ids else "", style="bold"),
            shown_cell(model_label(run.model, short=not wide), no_wrap=True, overflow="ellipsis"),
            Text(str(run.id), justify="right"),
            human_time(run.started_at),
            shown_cell(run.provider),
            Text(str(len(run.passes)), justify="right"),
            Text(_seconds(run.medians.get("duration_s")), justify="right"),
        ]
        if wide:
            machine = run.machine.get("processor") or run.machine.get("machine") or ""
            device = run.machine.get("device")
            cells += [
                Text(_num(run.medians.get("generation_tps"), 0), justify="right"),
                Text(_num(run.medians.get("peak_memory_gb"), 2), justify="right"),
                shown_cell(f"{machine}{f' ({device})' if device else ''}", no_wrap=True, overflow="ellipsis"),
            ]
        table.add_row(*cells, key=str(run.id))
    if keep is not None:
        try:
            table.move_cursor(row=table.get_row_index(keep), animate=False)
        except Exception:  # noqa: BLE001 - that run is no longer listed
            pass
