"""The benchmark screen: what a compaction pass costs on this machine, per model.

The measuring is :func:`hermes_tui.analysis.bench.run_bench` (shared with ``hermes-tui bench``):
the bundled sample session, one warm-up pass, then K measured passes per model, on
MLX in-process or an OpenAI-compatible endpoint. It runs in a thread worker that
reports each pass here (a progress bar, the last pass's time); ``c`` or Escape
cancels within one pass.

Below the controls: the results table (per run: passes, successes, median and p90
duration, prompt and generation tokens/s, peak memory, summary size), a chart of the
pass duration per model (a bar for the median, a sparkline of every pass), and the
runs saved in the store, so models can be compared across days: Enter shows a saved
run, space adds it to the comparison. ``e`` exports the runs shown as CSV or JSON.

The chart is drawn with Unicode block characters and Textual's Sparkline rather than
with textual-plotext, to keep the dependency list as it is. The views are
:mod:`~hermes_tui.tui.widgets.bench_view`, the worker :mod:`.bench_run`, the export :mod:`.bench_export`.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from contextlib import AbstractContextManager, nullcontext
from pathlib import Path
from typing import TYPE_CHECKING, Protocol, cast

from textual import on, work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical
from textual.screen import Screen
from textual.widgets import (
    Button,
    DataTable,
    Footer,
    Input,
    Label,
    ProgressBar,
    Select,
    SelectionList,
    Static,
)

from hermes_tui import hub
from hermes_tui.analysis import bench_results
from hermes_tui.analysis.bench_results import (
    DEFAULT_PASSES,
    BenchConfig,
    BenchError,
    BenchRun,
    problem,
)
from hermes_tui.config import Config, ConfigError, load_config
from hermes_tui.store import StoreError
from hermes_tui.tui.screens.bench_export import export_dialog
from hermes_tui.tui.screens.bench_run import BenchFinished, BenchStep, progress_line, run_and_report
from hermes_tui.tui.screens.chat_host import ScreenHost
from hermes_tui.tui.widgets.bench_view import (
    DurationBar,
    HistoryTable,
    fill_chart,
    fill_history,
    fill_results,
    model_choices,
    model_label,
)
from hermes_tui.tui.widgets.outside import shown
from hermes_tui.tui.widgets.text import human_time
from hermes_tui.util.logs import get_logger

if TYPE_CHECKING:
    from hermes_tui.providers.mlx.runtime import MlxRuntime
    from hermes_tui.store import Store

__all__ = ["BenchScreen", "DurationBar", "model_label"]

log = get_logger("tui")

WIDE = 120
SHOWN_AT_START = 6          # the newest saved run of this many models is shown on opening
HISTORY_LIMIT = 500


class StoreHost(Protocol):
    """The app as the screen sees it when it is given no store: the store it saves runs in."""

    store: Store


class BenchScreen(Screen[None]):
    """Pick models, run the benchmark, read the results, compare with saved runs, export."""

    DEFAULT_CSS = """
    BenchScreen {
        background: $background;
        #heading {
            height: 1;
            padding: 0 1;
            background: $panel;
            color: $text;
            text-style: bold;
        }
        #setup { height: 6; margin: 0 1; }
        #models {
            width: 1fr;
            height: 100%;
            border: round $border-blurred;
            border-title-color: $text-muted;
            &:focus { border: round $border; }
        }
        #options { width: 38; height: 100%; padding: 1 0 0 1; }
        .row { height: 1; }
        .row > .name { width: 10; color: $text-muted; }
        .row > Input, .row > Select { width: 1fr; }
        #url-row { display: none; }
        &.-api #url-row { display: block; }
        #run-note { height: 1; color: $text-muted; text-wrap: nowrap; text-overflow: ellipsis; }
        #progress { height: 1; margin: 0 1; display: none; }
        &.-running #progress { display: block; }
        #bar { width: auto; margin-right: 2; }
        #progress-label { width: 1fr; color: $text-accent; text-wrap: nowrap; text-overflow: ellipsis; }
        #status { height: 1; padding: 0 1; color: $text-muted; text-wrap: nowrap; text-overflow: ellipsis; }
        #status.-error { color: $text-error; }
        .section { height: 1; padding: 0 1; color: $text-primary; text-style: bold; }
        DataTable { margin: 0 1; background: $surface; scrollbar-size-vertical: 1; }
        #results { height: auto; max-height: 8; }
        #chart { height: auto; margin: 0 1; padding: 0 1; background: $surface; }
        #chart > .legend { height: 1; color: $text-muted; }
        #history { height: 1fr; min-height: 3; }
    }
    """

    BINDINGS = [
        Binding("escape", "back", "Back"),
        Binding("r", "run", "Run"),
        Binding("c", "cancel", "Cancel"),
        Binding("e", "export", "Export"),
        Binding("space", "compare", "Compare"),
    ]

    AUTO_FOCUS = "#models"

    def __init__(
        self,
        models: list[str] | None = None,
        provider: str | None = None,
        *,
        config_path: Path | None = None,
        store: Store | None = None,
        runtime: MlxRuntime | None = None,
        export_dir: Callable[[], Path] = Path.home,
    ) -> None:
        super().__init__()
        self.requested = list(models or [])
        self.requested_provider = provider
        self.config_path = Path(config_path) if config_path is not None else None
        self._store = store
        self.runtime = runtime
        self.export_dir = export_dir
        self.config_error: ConfigError | None = None
        try:
            self.config = load_config(self.config_path)
        except ConfigError as exc:
            self.config_error, self.config = exc, Config()
        self.history: list[BenchRun] = []
        self.shown: list[BenchRun] = []
        self.running = False
        self._cancel: threading.Event | None = None
        self._wide: bool | None = None

    @property
    def store(self) -> Store:
        return self._store if self._store is not None else cast(StoreHost, self.app).store

    # --- layout ----------------------------------------------------------------------------
    def compose(self) -> ComposeResult:
        aux = self.config.auxiliary.compression
        yield Static("Benchmark · a pass over the bundled sample session, after a warm-up", id="heading",
                     markup=False)
        with Horizontal(id="setup"):
            # A str prompt is markup; a model's name is a folder's or the config's text.
            models = SelectionList[str](*((shown(label), value, picked) for label, value, picked in self._choices()),
                                        id="models")
            models.border_title = "Models (space picks)"
            yield models
            with Vertical(id="options"):
                with Horizontal(classes="row"):
                    yield Label("Passes K", classes="name")
                    yield Input(str(DEFAULT_PASSES), id="passes", type="integer", compact=True)
                with Horizontal(classes="row"):
                    yield Label("Provider", classes="name")
                    yield Select([(p, p) for p in bench_results.PROVIDERS], value=self._provider(), allow_blank=False,
                                 id="provider", compact=True)
                with Horizontal(classes="row", id="url-row"):
                    yield Label("Base URL", classes="name")
                    yield Input(aux.base_url, placeholder="http://127.0.0.1:8080/v1", id="base-url", compact=True)
                cap = f"max {aux.max_tokens} tokens" if aux.max_tokens else "max tokens: auto"
                yield Static(f"1 warm-up pass · {cap}", id="run-note", markup=False)
                yield Button("Run", id="run", variant="primary", compact=True)
        with Horizontal(id="progress"):
            yield ProgressBar(id="bar", show_eta=False)
            yield Static("", id="progress-label", markup=False)
        yield Static("", id="status", markup=False)
        yield Static("Results", id="results-title", classes="section", markup=False)
        yield DataTable(id="results", cursor_type="row", zebra_stripes=True)
        yield Vertical(id="chart")
        yield Static("Saved runs", id="history-title", classes="section", markup=False)
        yield HistoryTable(id="history", cursor_type="row", zebra_stripes=True)
        yield Footer()

    def _provider(self) -> str:
        if self.requested_provider in bench_results.PROVIDERS:
            return self.requested_provider
        aux = self.config.auxiliary.compression
        if aux.provider in bench_results.PROVIDERS:
            return aux.provider
        from hermes_tui.providers.mlx.runtime import gpu_available

        return "openai-api" if aux.base_url and not gpu_available() else "mlx"

    def _choices(self) -> list[tuple[str, str, bool]]:
        """(label, value, picked): local models, the configured compression model, the ones asked for."""
        try:
            local = hub.local_models(self.config_path)
        except (hub.HubError, OSError) as exc:
            log.warning("cannot list the local models: %s", exc)
            local = []
        return model_choices(local, self.config.auxiliary.compression.model, self.requested)

    def on_mount(self) -> None:
        self.set_class(self._provider() == "openai-api", "-api")
        if self.config_error is not None:
            self.status(f"{self.config_error} (using the defaults)", error=True)
        self.load_history()
        latest: dict[str, BenchRun] = {}
        for run in self.history:
            latest.setdefault(run.model, run)
        self.shown = list(latest.values())[:SHOWN_AT_START]
        self.refresh_results()

    def on_resize(self) -> None:
        if (self._width() >= WIDE) != self._wide:
            self.refresh_results()

    def on_unmount(self) -> None:
        if self._cancel is not None:
            self._cancel.set()

    def _width(self) -> int:
        return self.size.width or self.app.size.width

    # --- data ----------------------------------------------------------------------------------
    def load_history(self) -> None:
        try:
            with self._lock():
                self.history = bench_results.list_runs(self.store, limit=HISTORY_LIMIT)
        except StoreError as exc:
            self.history = []
            self.status(f"Saved runs cannot be read: {exc}", error=True)

    def _lock(self) -> AbstractContextManager[object]:
        lock = getattr(self.app, "session_lock", None)  # the app's one store connection
        return lock if lock is not None else nullcontext()

    def refresh_results(self) -> None:
        self._wide = self._width() >= WIDE
        width = self._width()
        fill_results(self.query_one("#results", DataTable), self.shown, wide=self._wide, width=width)
        fill_chart(self.query_one("#chart", Vertical), self.shown, wide=self._wide)
        fill_history(self.query_one(HistoryTable), self.history, self.shown, wide=self._wide, width=width)
        count = len(self.history)
        self.query_one("#history-title", Static).update(
            f"Saved runs · {count} (Enter shows one, space adds it to the comparison)" if count
            else "Saved runs · none yet: runs are saved here as you measure them"
        )
        self.refresh_bindings()

    def _history_cursor(self) -> str | None:
        table = self.query_one(HistoryTable)
        if table.row_count == 0:
            return None
        return table.coordinate_to_cell_key(table.cursor_coordinate).row_key.value

    def selected_history(self) -> BenchRun | None:
        key = self._history_cursor()
        return next((run for run in self.history if str(run.id) == key), None)

    def status(self, text: str, *, error: bool = False) -> None:
        line = self.query_one("#status", Static)
        line.update(shown(" ".join(text.split())))  # often an error, quoting a model's or a server's text
        line.set_class(error, "-error")

    # --- events ------------------------------------------------------------------------------
    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        typing = isinstance(self.focused, Input)
        if action == "cancel":
            return self.running
        if action == "run":
            return False if typing else (None if self.running else True)
        if action == "export":
            return False if typing else (True if self.shown else None)
        if action == "compare":
            return isinstance(self.focused, HistoryTable) and bool(self.history)
        return True

    def on_descendant_focus(self) -> None:
        self.refresh_bindings()

    @on(Select.Changed, "#provider")
    def _provider_changed(self, event: Select.Changed) -> None:
        self.set_class(event.value == "openai-api", "-api")

    @on(Button.Pressed, "#run")
    def _run_pressed(self) -> None:
        self.action_run()

    @on(Input.Submitted, "#passes")
    def _passes_submitted(self) -> None:
        self.action_run()

    @on(DataTable.RowSelected, "#history")
    def _history_selected(self) -> None:
        run = self.selected_history()
        if run is not None:
            self.shown = [run]
            self.refresh_results()
            self.status(f"Showing saved run {run.id}: {model_label(run.model)}, {human_time(run.started_at)}.")

    def action_compare(self) -> None:
        run = self.selected_history()
        if run is None:
            return
        if any(shown.id == run.id for shown in self.shown):
            self.shown = [shown for shown in self.shown if shown.id != run.id]
        else:
            self.shown.append(run)
        self.refresh_results()

    # --- running -------------------------------------------------------------------------------
    def bench_config(self) -> BenchConfig:
        """The form as a BenchConfig; raises BenchError with a one-line reason."""
        from hermes_tui.providers.backend import resolve_api_key

        aux = self.config.auxiliary.compression
        models = list(self.query_one("#models", SelectionList).selected)
        if not models:
            raise BenchError("pick at least one model (space picks the highlighted one)")
        raw = self.query_one("#passes", Input).value.strip()
        try:
            passes = int(raw)
        except ValueError:
            raise BenchError(f"passes must be a whole number, got {raw!r}") from None
        provider = str(self.query_one("#provider", Select).value)
        base_url = self.query_one("#base-url", Input).value.strip() or None
        cfg = BenchConfig(
            models=models, provider=provider, passes=passes, warmup=1,
            base_url=base_url if provider == "openai-api" else None,
            api_key=resolve_api_key(aux.api_key_env) if provider == "openai-api" else None,
            max_tokens=aux.max_tokens, timeout=aux.timeout, compression=self.config.compression,
        )
        cfg.check()
        return cfg

    def action_run(self) -> None:
        if self.running:
            return
        try:
            cfg = self.bench_config()
        except BenchError as exc:
            self.status(f"Cannot run: {exc}", error=True)
            self.notify(str(exc), title="Benchmark", severity="error")
            return
        self.running = True
        self._cancel = threading.Event()
        self.add_class("-running")
        total = len(cfg.models) * cfg.passes
        self.query_one("#bar", ProgressBar).update(total=total, progress=0)
        self.query_one("#progress-label", Static).update(f"starting: {len(cfg.models)} model(s) × {cfg.passes} passes")
        self.query_one("#run", Button).disabled = True
        self.status("c or Escape cancels; the passes measured so far are kept.")
        self.refresh_bindings()
        self._bench_worker(cfg, self._cancel)

    @work(thread=True, group="bench", exit_on_error=False)
    def _bench_worker(self, cfg: BenchConfig, cancel: threading.Event) -> None:
        run_and_report(cfg, cancel, self.runtime, self.post_message)

    @on(BenchStep)
    def _bench_step(self, event: BenchStep) -> None:
        p = event.progress
        if not self.running:
            return
        self.query_one("#bar", ProgressBar).update(total=p.models * p.total, progress=(p.model_index - 1) * p.total + p.done)
        cancelling = self._cancel is not None and self._cancel.is_set()
        self.query_one("#progress-label", Static).update(progress_line(p, cancelling=cancelling))

    @on(BenchFinished)
    def _bench_finished(self, event: BenchFinished) -> None:
        self.running = False
        cancelled = self._cancel is not None and self._cancel.is_set()
        self._cancel = None
        self.remove_class("-running")
        self.query_one("#run", Button).disabled = False
        if event.error is not None:
            self.status(f"The benchmark stopped: {event.error}", error=True)
            self.notify(event.error, title="Benchmark failed", severity="error", timeout=15)
            self.refresh_bindings()
            return
        measured = [r for r in event.runs if r.error is None and r.answered]
        saved: list[int] = []
        try:
            with self._lock():
                for run in measured:
                    saved.append(bench_results.save_run(self.store, run))
        except StoreError as exc:
            self.notify(str(exc), title="Runs not saved", severity="error", timeout=15)
        self.load_history()
        self.shown = list(event.runs)
        self.refresh_results()
        problems = [problem(r) for r in event.runs if r.error is not None or not r.answered]
        summary = "Cancelled. " if cancelled else ""
        if saved:
            summary += f"Saved as run {', '.join(map(str, saved))}."
        if problems:
            self.status(summary + " " + "; ".join(problems), error=True)
            for text in problems:
                self.notify(text, title="Benchmark", severity="warning", timeout=15)
        else:
            self.status(summary or "Nothing measured.")
            if saved:
                self.notify(summary, title="Benchmark done")

    def action_cancel(self) -> None:
        if self._cancel is not None and not self._cancel.is_set():
            self._cancel.set()
            self.query_one("#progress-label", Static).update("cancelling after the pass in flight…")

    def action_back(self) -> None:
        if self.running:
            self.action_cancel()
            return
        self.dismiss(None)

    # --- export ---------------------------------------------------------------------------------
    def action_export(self) -> None:
        if not self.shown:
            return

        def exported(path: Path | None) -> None:
            if path is not None:
                self.status(f"Exported {len(self.shown)} run(s) to {path}")
                self.notify(str(path), title="Exported")

        self.app.push_screen(export_dialog(self.shown, self.export_dir()), exported)


def open_screen(host: ScreenHost) -> BenchScreen:
    """What ``/bench`` opens (``commands.SlashCommand.screen``); its runs are saved in the app's
    store."""
    return BenchScreen(config_path=host.config_path)
