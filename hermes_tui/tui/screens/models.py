"""The models screen: the curated catalog and the models on this machine.

Everything here is :mod:`hermes_tui.hub` (its imports: :mod:`hermes_tui.hub.model_import`), the same
code as ``hermes-tui models``; the screen only shows it. Two tables, one above the
other: the catalog (what to download, with its cost: parameters, disk, memory,
context, licence, what it suits) and what is on this machine (the Hugging Face
cache and the models folder, with size, source and the role config.yaml gives it).

The keys act on the highlighted model of the focused table: ``p`` downloads (or
resumes), ``i`` imports a folder or GGUF file, ``d`` deletes (after a confirmation
naming the model and its size), ``u``/``U`` make it the compression/chat model in
config.yaml, ``b`` benchmarks it (or the models marked with space). A download or an
import runs in a thread worker and reports here, so the screen stays live; ``c`` or
Escape cancels a download and keeps what was fetched (``p`` resumes it).

Dismisses with the new ``Config`` when a role was changed here, so the app reloads
its clients as it does after the settings screen; otherwise with None.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from pathlib import Path

from rich.text import Text
from textual import on, work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical
from textual.message import Message as UIMessage
from textual.screen import Screen
from textual.widgets import Button, DataTable, Footer, Input, ProgressBar, Static

from hermes_tui import hub
from hermes_tui.config import Config, ConfigError, load_config
from hermes_tui.hub.units import format_bytes, format_duration
from hermes_tui.logs import get_logger
from hermes_tui.tui.screens.dialogs import ConfirmDialog, FormDialog

__all__ = ["ImportDialog", "ModelsScreen"]

log = get_logger("tui")

DOWNLOADED, PARTIAL = "●", "◐"
DEFAULT, THINKING, MARKED = "★", "⚠", "✓"
WIDE = 120  # from this width on, the tables show every column
COMMUNITY = "mlx-community/"


def roles_text(roles: tuple[str, ...] | list[str]) -> str:
    roles = tuple(roles)
    if set(roles) >= {"compression", "chat"}:
        return "both"
    return roles[0] if roles else ""


def _size_gb(value: float) -> str:
    return f"{value:.2f} GB" if value < 10 else f"{value:.1f} GB"


# --- what the workers report ------------------------------------------------------------


class TransferStep(UIMessage):
    """A download or an import moved on: ``done`` of ``total`` (None: not known yet)."""

    def __init__(self, label: str, figures: str, done: float, total: float | None):
        super().__init__()
        self.label, self.figures, self.done, self.total = label, figures, done, total


class TransferDone(UIMessage):
    def __init__(self, kind: str, name: str, *, path: Path | None = None, error: str | None = None,
                 cancelled: bool = False):
        super().__init__()
        self.kind, self.name, self.path, self.error, self.cancelled = kind, name, path, error, cancelled


@dataclass(frozen=True)
class ImportRequest:
    path: Path
    name: str | None


# --- the import dialog --------------------------------------------------------------------


class ImportDialog(FormDialog[ImportRequest | None]):
    """Ask for a GGUF file or an MLX folder, and an optional name. Checks the path exists."""

    DEFAULT_CSS = """
    ImportDialog {
        align: center middle;
        #dialog {
            width: 76;
            max-width: 95%;
            height: auto;
            max-height: 100%;
            padding: 0 2;
            background: $surface;
            border: round $primary;
            border-title-color: $text;
        }
        .label { margin-top: 1; }
        #hint { color: $text-muted; }
        #error { color: $error; display: none; }
        #error.-shown { display: block; }
        #buttons { height: auto; margin: 1 0; align-horizontal: right; }
        #buttons Button { margin-left: 2; }
    }
    """

    def compose(self) -> ComposeResult:
        with Vertical(id="dialog") as dialog:
            dialog.border_title = "Import a model"
            yield Static("A GGUF file (llama architecture) or an MLX model folder:", classes="label", markup=False)
            yield Input(placeholder="~/Downloads/model.Q4_K_M.gguf", id="path")
            yield Static("Name in the models folder (optional):", classes="label", markup=False)
            yield Input(placeholder="default: the file or folder name", id="name")
            yield Static("MLX folders are linked (no copy); GGUF files are converted to MLX.", id="hint",
                         markup=False)
            yield Static("", id="error", markup=False)
            with Horizontal(id="buttons"):
                yield Button("Cancel", id="cancel")
                yield Button("Import", id="import", variant="primary")

    def on_mount(self) -> None:
        self.query_one("#path", Input).focus()

    @on(Input.Submitted)
    @on(Button.Pressed, "#import")
    def _submit(self) -> None:
        raw = self.query_one("#path", Input).value.strip()
        if not raw:
            self._error("Type the path of a GGUF file or an MLX folder (Escape cancels).")
            return
        path = Path(raw).expanduser()
        if not path.exists():
            self._error(f"{path}: no such file or folder")
            return
        name = self.query_one("#name", Input).value.strip() or None
        self.dismiss(ImportRequest(path, name))


# --- the screen ---------------------------------------------------------------------------


class CatalogTable(DataTable):
    pass


class LocalTable(DataTable):
    pass


class ModelsScreen(Screen[Config | None]):
    """The catalog and the local models; dismisses with the new Config if a role changed."""

    DEFAULT_CSS = """
    ModelsScreen {
        background: $background;
        #heading {
            height: 1;
            padding: 0 1;
            background: $panel;
            color: $text;
            text-style: bold;
        }
        .section {
            height: 1;
            padding: 0 1;
            margin-top: 1;
            color: $text-primary;
            text-style: bold;
        }
        #catalog-title { margin-top: 0; }
        DataTable {
            margin: 0 1;
            background: $surface;
            scrollbar-size-vertical: 1;
        }
        #catalog { height: 1fr; min-height: 4; }
        #local { height: auto; min-height: 2; max-height: 40%; }
        #transfer {
            height: auto;
            margin: 1 1 0 1;
            padding: 0 1;
            background: $boost;
            display: none;
        }
        &.-busy #transfer { display: block; }
        #transfer-label { height: 1; color: $text; text-wrap: nowrap; text-overflow: ellipsis; }
        #transfer-row { height: 1; }
        #transfer-bar { width: auto; margin-right: 2; }
        #transfer-figures { width: 1fr; color: $text-muted; }
        #status { height: 1; padding: 0 1; color: $text-muted; text-wrap: nowrap; text-overflow: ellipsis; }
        #status.-error { color: $text-error; }
        #detail {
            height: 3;
            padding: 0 1;
            color: $text-muted;
            background: $surface;
        }
    }
    """

    BINDINGS = [
        Binding("escape", "back", "Back"),
        Binding("p", "pull", "Pull"),
        Binding("c", "cancel", "Cancel"),
        Binding("i", "import_model", "Import"),
        Binding("d", "delete", "Delete"),
        Binding("u", "use('compression')", "Compress"),
        Binding("U,shift+u", "use('chat')", "Chat", key_display="U"),
        Binding("b", "bench", "Bench"),
        Binding("space", "mark", "Mark"),
    ]

    AUTO_FOCUS = "#catalog"

    def __init__(self, config_path: Path | None = None, *, catalog: list[hub.CatalogModel] | None = None) -> None:
        super().__init__()
        self.config_path = Path(config_path) if config_path is not None else None
        self._catalog_given = catalog
        self.catalog: list[hub.CatalogModel] = []
        self.local: list[hub.LocalModel] = []
        self.marked: set[str] = set()          # local models marked (space) for the benchmark
        self.new_config: Config | None = None  # set when a role changed here
        self.transfer: str | None = None       # "download" or "import" while one runs
        self._transfer_name = ""
        self._cancel: threading.Event | None = None
        self._side = "catalog"                 # the table the keys act on
        self._wide: bool | None = None

    # --- layout ------------------------------------------------------------------------
    def compose(self) -> ComposeResult:
        yield Static("Models", id="heading", markup=False)
        yield Static("", id="catalog-title", classes="section", markup=False)
        yield CatalogTable(id="catalog", cursor_type="row", zebra_stripes=True)
        yield Static("", id="local-title", classes="section", markup=False)
        yield LocalTable(id="local", cursor_type="row", zebra_stripes=True)
        with Vertical(id="transfer"):
            yield Static("", id="transfer-label", markup=False)
            with Horizontal(id="transfer-row"):
                yield ProgressBar(id="transfer-bar", show_eta=False)
                yield Static("", id="transfer-figures", markup=False)
        yield Static("", id="status", markup=False)
        yield Static("", id="detail", markup=False)
        yield Footer()

    def on_mount(self) -> None:
        try:
            self.catalog = self._catalog_given if self._catalog_given is not None else hub.load_catalog()
        except hub.CatalogError as exc:
            self.catalog = []
            self.status(str(exc), error=True)
        self.reload()

    def on_resize(self) -> None:
        wide = self._width() >= WIDE
        if wide != self._wide:
            self.reload()

    def on_unmount(self) -> None:
        if self._cancel is not None:
            self._cancel.set()  # leaving stops a download; what was fetched stays for the next pull

    def _width(self) -> int:
        return self.size.width or self.app.size.width

    # --- data --------------------------------------------------------------------------
    def reload(self, select_local: str | None = None) -> None:
        """Read what is on disk again and rebuild both tables, keeping the cursors."""
        try:
            self.local = hub.local_models(self.config_path)
        except (hub.HubError, OSError) as exc:
            self.local = []
            self.status(f"Cannot list the local models: {exc}", error=True)
        self.marked &= {m.name for m in self.local if m.complete}
        self._wide = self._width() >= WIDE
        catalog = self.query_one(CatalogTable)
        local = self.query_one(LocalTable)
        keep_catalog = self._cursor_key(catalog)
        keep_local = select_local or self._cursor_key(local)
        self._fill_catalog(catalog)
        self._fill_local(local)
        catalog.styles.max_height = catalog.row_count + 1  # no taller than its rows: the rest below
        self._restore(catalog, keep_catalog)
        self._restore(local, keep_local)
        downloaded = sum(1 for m in self.catalog if self._state(m.repo) == DOWNLOADED)
        self.query_one("#catalog-title", Static).update(
            f"Catalog · {len(self.catalog)} model{'' if len(self.catalog) == 1 else 's'}, {downloaded} here   "
            f"{DOWNLOADED} downloaded  {PARTIAL} partial  "
            f"{DEFAULT} default  {THINKING} thinking"
        )
        count = len(self.local)
        self.query_one("#local-title", Static).update(
            f"On this machine · {count} model{'' if count == 1 else 's'} (HF cache and models folder)" if count
            else "On this machine · nothing yet (p downloads, i imports)"
        )
        self.show_detail()
        self.refresh_bindings()

    def _state(self, repo: str) -> str:
        model = self._local_named(repo)
        if model is None:
            return ""
        return DOWNLOADED if model.complete else PARTIAL  # complete: usable, even with an update pending

    def _local_named(self, name: str) -> hub.LocalModel | None:
        return next((m for m in self.local if m.name == name), None)

    def _fill_catalog(self, table: DataTable) -> None:
        table.clear(columns=True)
        wide = self._wide
        fixed = [("Params", 6), ("Disk", 7), ("Memory", 7)]
        if wide:
            fixed += [("Context", 7), ("Licence", 13)]
        fixed += [("Role", 11)]
        # The table spans the width less its margins (2) and a scrollbar (1); every column
        # is padded by one cell on each side; the state column is one cell wide.
        room = self._width() - 3 - 3 - sum(w + 2 for _, w in fixed) - 2
        if wide:
            name_width = max(len(self._catalog_name(m)) + 4 for m in self.catalog) if self.catalog else 20
            name_width = min(name_width, max(24, room - 32))
            notes_width = max(10, room - name_width - 2)
        else:
            name_width = max(16, room)
        table.add_column("", width=1, key="state")
        table.add_column("Model", width=name_width, key="model")
        for label, width in fixed:
            table.add_column(Text(label, justify="right") if label in ("Params", "Disk", "Memory", "Context")
                             else label, width=width, key=label.lower())
        if wide:
            table.add_column("Notes", width=notes_width, key="notes")
        for m in self.catalog:
            name = Text(self._catalog_name(m), no_wrap=True, overflow="ellipsis")
            if m.default_compression:
                name.append(f" {DEFAULT}", style="bold")
            if m.reasoning:
                name.append(f" {THINKING}", style="bold")
            cells: list[object] = [
                Text(self._state(m.repo), style="bold"),
                name,
                Text(f"{m.parameters_b:g}B", justify="right"),
                Text(_size_gb(m.disk_gb), justify="right"),
                Text(_size_gb(m.memory_gb), justify="right"),
            ]
            if wide:
                cells += [Text(f"{m.context_length // 1024}K", justify="right"), Text(m.license, no_wrap=True)]
            cells.append(roles_text(m.roles))
            if wide:
                cells.append(Text(m.notes, no_wrap=True, overflow="ellipsis", style="dim"))
            table.add_row(*cells, key=m.repo)

    def _catalog_name(self, m: hub.CatalogModel) -> str:
        return m.repo if self._wide else m.repo.removeprefix(COMMUNITY)

    def _fill_local(self, table: DataTable) -> None:
        table.clear(columns=True)
        wide = self._wide
        fixed = [("Size", 9), ("Source", 8), ("In use", 11)]
        if wide:
            fixed.append(("State", 30))
        room = self._width() - 3 - 3 - sum(w + 2 for _, w in fixed) - 2
        table.add_column("", width=1, key="mark")
        table.add_column("Model", width=max(16, room), key="model")
        for label, width in fixed:
            table.add_column(Text(label, justify="right") if label == "Size" else label, width=width,
                             key=label.lower())
        for m in self.local:
            mark = MARKED if m.name in self.marked else ("" if m.complete else PARTIAL)
            cells: list[object] = [
                Text(mark, style="bold"),
                Text(m.name, no_wrap=True, overflow="ellipsis"),
                Text(format_bytes(m.size_bytes), justify="right"),
                "HF cache" if m.source == "hf-cache" else "imported",
                roles_text(m.roles),
            ]
            if wide:
                cells.append(self._local_state(m))
            table.add_row(*cells, key=self._local_key(m))

    @staticmethod
    def _local_key(m: hub.LocalModel) -> str:
        return f"{m.source}:{m.name}"

    @staticmethod
    def _local_state(m: hub.LocalModel) -> str:
        if not m.complete:
            return f"partial ({format_bytes(m.partial_bytes)}): p resumes"
        if m.partial_bytes:
            return f"ready; {format_bytes(m.partial_bytes)} of an update"
        return "ready"

    @staticmethod
    def _cursor_key(table: DataTable) -> str | None:
        if table.row_count == 0:
            return None
        return table.coordinate_to_cell_key(table.cursor_coordinate).row_key.value

    @staticmethod
    def _restore(table: DataTable, key: str | None) -> None:
        if key is None or table.row_count == 0:
            return
        try:
            table.move_cursor(row=table.get_row_index(key), animate=False)
        except Exception:  # noqa: BLE001 - the row is gone (deleted): the cursor stays where it is
            pass

    # --- the selection -----------------------------------------------------------------
    def selected_catalog(self) -> hub.CatalogModel | None:
        key = self._cursor_key(self.query_one(CatalogTable))
        return next((m for m in self.catalog if m.repo == key), None)

    def selected_local(self) -> hub.LocalModel | None:
        """The local model the keys act on: the highlighted one, or the catalog model's download."""
        if self._side == "local":
            key = self._cursor_key(self.query_one(LocalTable))
            return next((m for m in self.local if self._local_key(m) == key), None)
        model = self.selected_catalog()
        return self._local_named(model.repo) if model is not None else None

    def _pull_target(self) -> str | None:
        if self._side == "local":
            model = self.selected_local()
            return model.name if model is not None and model.source == "hf-cache" else None
        model = self.selected_catalog()
        return model.repo if model is not None else None

    def _bench_targets(self) -> list[hub.LocalModel]:
        marked = [m for m in self.local if m.name in self.marked and m.complete]
        if marked:
            return marked
        model = self.selected_local()
        return [model] if model is not None and model.complete else []

    # --- events ------------------------------------------------------------------------
    def on_descendant_focus(self, event) -> None:
        if isinstance(event.widget, LocalTable):
            self._side = "local"
        elif isinstance(event.widget, CatalogTable):
            self._side = "catalog"
        self.show_detail()
        self.refresh_bindings()

    @on(DataTable.RowHighlighted)
    def _highlighted(self) -> None:
        self.show_detail()
        self.refresh_bindings()

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        if action == "cancel":
            return self.transfer == "download"
        if action == "mark":
            return self._side == "local" and bool(self.local)
        busy = self.transfer is not None
        if action == "pull":
            return None if busy or self._pull_target() is None else True
        if action == "import_model":
            return None if busy else True
        if action == "delete":
            return None if busy or self.selected_local() is None else True
        if action == "use":
            model = self.selected_local()
            return True if model is not None and model.complete else None
        if action == "bench":
            return True if self._bench_targets() else None
        return True

    def show_detail(self) -> None:
        detail = self.query_one("#detail", Static)
        if self._side == "local":
            model = self.selected_local()
            detail.update(self._local_detail(model) if model else "")
        else:
            model = self.selected_catalog()
            detail.update(self._catalog_detail(model) if model else "")

    def _catalog_detail(self, m: hub.CatalogModel) -> str:
        facts = [m.repo, f"{m.context_length // 1024}K context", m.license]
        lines = [" · ".join(facts), m.notes]
        hints = []
        if m.default_compression:
            hints.append(f"{DEFAULT} the suggested compression model")
        if m.reasoning:
            hints.append(f"{THINKING} a thinking model: passes are slow, a plain instruct model suits them better")
        state = self._state(m.repo)
        if state == DOWNLOADED:
            hints.append("downloaded: u uses it for compression, U for chat, b benchmarks it")
        elif state == PARTIAL:
            local = self._local_named(m.repo)
            hints.append(f"partial download ({format_bytes(local.partial_bytes if local else 0)}): p resumes it")
        else:
            hints.append("p downloads it")
        lines.append("; ".join(hints))
        return "\n".join(line for line in lines if line)

    def _local_detail(self, m: hub.LocalModel) -> str:
        where = "Hugging Face cache" if m.source == "hf-cache" else "models folder (imported)"
        uses = f"; config.yaml uses it for {' and '.join(m.roles)}" if m.roles else ""
        return f"{m.name} · {format_bytes(m.size_bytes)} · {where}{uses}\n{m.path}\n{self._local_state(m)}"

    def status(self, text: str, *, error: bool = False) -> None:
        line = self.query_one("#status", Static)
        line.update(" ".join(text.split()))
        line.set_class(error, "-error")

    # --- actions -------------------------------------------------------------------------
    def action_back(self) -> None:
        if self.transfer == "download":
            self.action_cancel()
            return
        if self.transfer == "import":
            # An import cannot stop halfway (it converts into a hidden folder, renamed at the end).
            self.notify("Wait for the import to finish: it cannot be stopped halfway.", title="Import running",
                        severity="warning")
            return
        self.dismiss(self.new_config)

    def action_cancel(self) -> None:
        if self._cancel is not None and not self._cancel.is_set():
            self._cancel.set()
            self.query_one("#transfer-label", Static).update(f"Cancelling the download of {self._transfer_name}…")

    def action_mark(self) -> None:
        if self._side != "local":
            return
        model = self.selected_local()
        if model is None or not model.complete:
            return
        self.marked ^= {model.name}
        self.reload()

    def action_pull(self) -> None:
        repo = self._pull_target()
        if repo is None or self.transfer is not None:
            return
        existing = self._local_named(repo)
        if existing is not None and existing.complete and not existing.partial_bytes:
            self.status(f"{repo} is already downloaded ({format_bytes(existing.size_bytes)}).")
            return
        self._start_transfer("download", repo, f"Downloading {repo}…")
        self._cancel = threading.Event()
        self._download_worker(repo, self._cancel)

    def action_import_model(self) -> None:
        if self.transfer is not None:
            return

        def chosen(request: ImportRequest | None) -> None:
            if request is None:
                return
            name = request.name or request.path.name
            self._start_transfer("import", name, f"Importing {request.path}…")
            self._import_worker(request)

        self.app.push_screen(ImportDialog(), chosen)

    def action_delete(self) -> None:
        model = self.selected_local()
        if model is None or self.transfer is not None:
            return
        where = "the Hugging Face cache" if model.source == "hf-cache" else "the models folder"
        detail = f"{format_bytes(model.size_bytes)} in {where}: {model.root}"
        if model.roles:
            detail += f"\nconfig.yaml names it as the {' and '.join(model.roles)} model; choose another after."

        def confirmed(yes: bool | None) -> None:
            if yes:
                self._delete(model)
            else:
                self.status("Nothing deleted.")

        self.app.push_screen(
            ConfirmDialog(f"Delete {model.name} ({format_bytes(model.size_bytes)})?", detail,
                          confirm="Delete", title="Delete model", danger=True),
            confirmed,
        )

    def _delete(self, model: hub.LocalModel) -> None:
        try:
            freed = hub.delete_model(model.name)
        except hub.HubError as exc:
            self.status(str(exc), error=True)
            self.notify(str(exc), title="Not deleted", severity="error")
            return
        self.status(f"Deleted {model.name}: {format_bytes(freed)} freed.")
        self.notify(f"{format_bytes(freed)} freed", title=f"Deleted {model.name}")
        for role in model.roles:
            self.notify(f"config.yaml still names it as the {role} model: pick another one here.",
                        title="Model in use", severity="warning")
        self.reload()

    def action_use(self, role: str) -> None:
        model = self.selected_local()
        if model is None or not model.complete:
            return
        try:
            result = hub.use_model(model.name, role, self.config_path)
            config = load_config(self.config_path)
        except (hub.HubError, ConfigError) as exc:
            self.status(str(exc), error=True)
            self.notify(str(exc), title=f"Not set as the {role} model", severity="error")
            return
        self.new_config = config
        key = "model.model" if role == "chat" else "auxiliary.compression.model"
        changed = f" (provider now {result.provider})" if result.provider_changed else ""
        self.status(f"{model.name} is now the {role} model ({key}){changed}; it applies when you leave this screen.")
        self.notify(f"{key} = {result.value}{changed}", title=f"{role.capitalize()} model set")
        if result.note:
            self.notify(result.note, title="Note", severity="warning", timeout=10)
        if role == "compression" and any(m.reasoning and m.repo == model.name for m in self.catalog):
            self.notify("A thinking model: passes will be slow; a plain instruct model is a better fit.",
                        title="Thinking model", severity="warning", timeout=10)
        self.reload()

    def action_bench(self) -> None:
        from hermes_tui.tui.screens.bench import BenchScreen

        targets = self._bench_targets()
        if not targets:
            return
        models = [m.name if m.source == "hf-cache" else str(m.path) for m in targets]
        self.app.push_screen(BenchScreen(models, config_path=self.config_path))

    # --- transfers -----------------------------------------------------------------------
    def _start_transfer(self, kind: str, name: str, label: str) -> None:
        self.transfer, self._transfer_name = kind, name
        self.query_one("#transfer-label", Static).update(label)
        self.query_one("#transfer-figures", Static).update("")
        self.query_one("#transfer-bar", ProgressBar).update(total=None, progress=0)
        self.add_class("-busy")
        self.status("c or Escape cancels; what was fetched is kept." if kind == "download" else "")
        self.refresh_bindings()

    @work(thread=True, group="transfer", exit_on_error=False)
    def _download_worker(self, repo: str, cancel: threading.Event) -> None:
        post = self.post_message

        def progress(p: hub.DownloadProgress) -> None:
            label = f"Downloading {repo} · file {min(p.files_done + 1, p.files_total)}/{p.files_total}"
            label += f" {p.current_file}" if p.current_file else ""
            if p.resumed_bytes and not p.finished:
                label += f" (resumed at {format_bytes(p.resumed_bytes)})"
            speed = f"{format_bytes(p.speed_bps)}/s" if p.speed_bps else "-- MB/s"
            left = "done" if p.finished else f"{format_duration(p.eta_s)} left"
            figures = f"{format_bytes(p.bytes_done)} / {format_bytes(p.bytes_total)} · {speed} · {left}"
            post(TransferStep(label, figures, p.bytes_done, p.bytes_total))

        try:
            path = hub.download(repo, progress=progress, cancel=cancel)
        except hub.DownloadCancelled:
            post(TransferDone("download", repo, cancelled=True))
        except hub.HubError as exc:
            post(TransferDone("download", repo, error=str(exc)))
        except Exception as exc:  # a bug: logged with its traceback, shown as one line
            log.exception("download of %s failed", repo)
            post(TransferDone("download", repo, error=f"{type(exc).__name__}: {exc}"))
        else:
            post(TransferDone("download", repo, path=path))

    @work(thread=True, group="transfer", exit_on_error=False)
    def _import_worker(self, request: ImportRequest) -> None:
        from hermes_tui.hub.import_common import ModelImportError
        from hermes_tui.hub.model_import import import_model

        post = self.post_message

        def progress(stage: str, done: int, total: int) -> None:
            if stage in ("copying", "writing"):
                figures = f"{stage} {format_bytes(done)} / {format_bytes(total)}"
            elif stage == "converting":
                figures = f"converting tensor {done}/{total}"
            else:
                figures = f"{stage}…" if done < total else f"{stage}: done"
            known = stage != "reading" or done >= total  # reading is one call: no steps to show
            post(TransferStep(f"Importing {request.path}", figures, done, total if known else None))

        try:
            dest = import_model(request.path, request.name, progress=progress)
        except ModelImportError as exc:
            post(TransferDone("import", str(request.path), error=str(exc)))
        except Exception as exc:  # a bug: logged with its traceback, shown as one line
            log.exception("import of %s failed", request.path)
            post(TransferDone("import", str(request.path), error=f"{type(exc).__name__}: {exc}"))
        else:
            post(TransferDone("import", dest.name, path=dest))

    @on(TransferStep)
    def _transfer_step(self, event: TransferStep) -> None:
        if self.transfer is None:
            return
        if not (self._cancel is not None and self._cancel.is_set()):
            self.query_one("#transfer-label", Static).update(event.label)
        self.query_one("#transfer-figures", Static).update(event.figures)
        self.query_one("#transfer-bar", ProgressBar).update(total=event.total, progress=event.done)

    @on(TransferDone)
    def _transfer_done(self, event: TransferDone) -> None:
        self.transfer, self._cancel = None, None
        self.remove_class("-busy")
        select = None
        if event.cancelled:
            self.status(f"Download of {event.name} cancelled; the partial download is kept: run it again (p) to resume.")
            self.notify("The partial download is kept: p resumes it.", title="Download cancelled")
        elif event.error is not None:
            what = "Download" if event.kind == "download" else "Import"
            self.status(event.error, error=True)
            self.notify(event.error, title=f"{what} failed", severity="error", timeout=15)
        elif event.kind == "download":
            self.status(f"{event.name} is ready: u uses it for compression, U for chat, b benchmarks it.")
            self.notify(f"{event.name} is ready.", title="Downloaded")
            select = f"hf-cache:{event.name}"
        else:
            self.status(f"Imported {event.name} into {event.path}: u uses it for compression, U for chat.")
            self.notify(f"{event.name} is in the models folder.", title="Imported")
            select = f"local:{event.name}"
        self.reload(select_local=select)
        if select is not None:
            self.query_one(LocalTable).focus()
