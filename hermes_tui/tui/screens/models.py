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
its clients as it does after the settings screen; otherwise with None. The tables are
:mod:`~hermes_tui.tui.widgets.model_tables`, the transfers :mod:`.model_transfers`.
"""

from __future__ import annotations

import threading
from pathlib import Path

from textual import events, on, work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.screen import Screen
from textual.widgets import DataTable, Footer, Static

from hermes_tui import hub
from hermes_tui.config import Config, ConfigError, load_config
from hermes_tui.hub.units import format_bytes
from hermes_tui.tui.screens.chat_host import ScreenHost
from hermes_tui.tui.screens.dialogs import ConfirmDialog
from hermes_tui.tui.screens.model_import_dialog import ImportDialog, ImportRequest
from hermes_tui.tui.screens.model_transfers import (
    TransferDone,
    TransferPanel,
    TransferStep,
    run_download,
    run_import,
)
from hermes_tui.tui.widgets.model_tables import (
    DEFAULT,
    DOWNLOADED,
    PARTIAL,
    THINKING,
    WIDE,
    CatalogTable,
    LocalTable,
    catalog_detail,
    cursor_key,
    local_detail,
    local_key,
    restore_cursor,
    state_mark,
)
from hermes_tui.tui.widgets.outside import shown

__all__ = ["ModelsScreen"]

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
        yield TransferPanel(id="transfer")
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
        keep_catalog = cursor_key(catalog)
        keep_local = select_local or cursor_key(local)
        catalog.fill(self.catalog, wide=self._wide, width=self._width(), state=self._state)
        local.fill(self.local, self.marked, wide=self._wide, width=self._width())
        catalog.styles.max_height = catalog.row_count + 1  # no taller than its rows: the rest below
        restore_cursor(catalog, keep_catalog)
        restore_cursor(local, keep_local)
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
        return state_mark(self._local_named(repo))

    def _local_named(self, name: str) -> hub.LocalModel | None:
        return next((m for m in self.local if m.name == name), None)

    # --- the selection -----------------------------------------------------------------
    def selected_catalog(self) -> hub.CatalogModel | None:
        key = cursor_key(self.query_one(CatalogTable))
        return next((m for m in self.catalog if m.repo == key), None)

    def selected_local(self) -> hub.LocalModel | None:
        """The local model the keys act on: the highlighted one, or the catalog model's download."""
        if self._side == "local":
            key = cursor_key(self.query_one(LocalTable))
            return next((m for m in self.local if local_key(m) == key), None)
        model = self.selected_catalog()
        return self._local_named(model.repo) if model is not None else None

    def _pull_target(self) -> str | None:
        if self._side == "local":
            local_model = self.selected_local()
            return local_model.name if local_model is not None and local_model.source == "hf-cache" else None
        catalog_model = self.selected_catalog()
        return catalog_model.repo if catalog_model is not None else None

    def _bench_targets(self) -> list[hub.LocalModel]:
        marked = [m for m in self.local if m.name in self.marked and m.complete]
        if marked:
            return marked
        model = self.selected_local()
        return [model] if model is not None and model.complete else []

    # --- events ------------------------------------------------------------------------
    def on_descendant_focus(self, event: events.DescendantFocus) -> None:
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
            local_model = self.selected_local()
            detail.update(shown(local_detail(local_model)) if local_model else "")  # a folder's name and path
        else:
            catalog_model = self.selected_catalog()
            detail.update(catalog_detail(catalog_model, self._local_named(catalog_model.repo)) if catalog_model else "")

    def status(self, text: str, *, error: bool = False) -> None:
        line = self.query_one("#status", Static)
        line.update(shown(" ".join(text.split())))  # often an error, quoting a server's or a file's text
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
            self.query_one(TransferPanel).say(f"Cancelling the download of {self._transfer_name}…")

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
        from hermes_tui.providers.choices import use_model

        try:
            result = use_model(model.name, role, self.config_path)
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
        self.query_one(TransferPanel).start(label)
        self.add_class("-busy")
        self.status("c or Escape cancels; what was fetched is kept." if kind == "download" else "")
        self.refresh_bindings()

    @work(thread=True, group="transfer", exit_on_error=False)
    def _download_worker(self, repo: str, cancel: threading.Event) -> None:
        run_download(repo, cancel, self.post_message)

    @work(thread=True, group="transfer", exit_on_error=False)
    def _import_worker(self, request: ImportRequest) -> None:
        run_import(request, self.post_message)

    @on(TransferStep)
    def _transfer_step(self, event: TransferStep) -> None:
        if self.transfer is None:
            return
        cancelling = self._cancel is not None and self._cancel.is_set()  # the label stays on "Cancelling…"
        self.query_one(TransferPanel).show(event, label=not cancelling)

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


def open_screen(host: ScreenHost) -> ModelsScreen:
    """What ``/models`` opens (``commands.SlashCommand.screen``)."""
    return ModelsScreen(host.config_path)
