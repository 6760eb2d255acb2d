"""The first-run screen's ways to a working chat: each a section that ends in settings saved.

- ``RecommendedModels``: the catalog's recommended chat (and, where MLX has a GPU,
  compression) models with their cost (parameters, download, memory, licence), downloaded
  with progress, cancel and resume (``hub.download``), then set as the models in config
  (``providers.choices.use_model``). Offline, it says so and offers to import a model instead.
- ``LocalServers``: OpenAI-compatible servers answering on this machine's loopback
  (``providers.openai.local_servers``, probed in a worker), each offered with the model it serves;
  when none answers, which to start and how.
- ``ModelsOnDisk``: MLX models already on this machine (``hub.local_models``, listed in a
  worker), each usable for the chat at once; where MLX has no GPU they run slowly on the CPU.
- ``HermesSettings``: Hermes Agent's compression settings, mapped to ours (``hermes_agent.config``).

A section posts ``SetupChosen`` (changes for the screen to save) or ``SetupDone`` (saved
already); the screen saves and dismisses, and the app reloads the config.
"""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

from textual import on, work
from textual.app import ComposeResult
from textual.containers import Horizontal, Vertical
from textual.message import Message
from textual.widgets import Button, ProgressBar, Static

from hermes_tui import hub
from hermes_tui.config import ConfigError, load_config
from hermes_tui.hermes_agent.config import HermesOffer
from hermes_tui.hub.units import format_bytes, format_duration
from hermes_tui.providers.openai import local_servers
from hermes_tui.tui.widgets.outside import shown
from hermes_tui.util.logs import get_logger

log = get_logger("tui")


class SetupChosen(Message):
    """Save these dotted changes and go to the chat; ``note`` says what was set."""

    def __init__(self, changes: dict[str, Any], note: str, *, done: bool = True) -> None:
        super().__init__()
        self.changes, self.note, self.done = changes, note, done


class SetupDone(Message):
    """The settings are saved already (``providers.choices.use_model``); go to the chat."""

    def __init__(self, note: str) -> None:
        super().__init__()
        self.note = note


class _Step(Message):
    def __init__(self, label: str, figures: str, done: float, total: float | None) -> None:
        super().__init__()
        self.label, self.figures, self.done, self.total = label, figures, done, total


class _Finished(Message):
    def __init__(self, *, error: str = "", offline: bool = False, cancelled: bool = False,
                 imported: str = "") -> None:
        super().__init__()
        self.error, self.offline, self.cancelled, self.imported = error, offline, cancelled, imported


def compression_unset(config_path: Path) -> bool:
    """No compression model in config.yaml now (read now: settings taken from Hermes Agent a
    moment ago count, and are never overwritten)."""
    try:
        aux = load_config(config_path).auxiliary.compression
    except ConfigError:
        return False
    return aux.provider == "auto" and not aux.model and not aux.base_url


def model_line(role: str, m: hub.CatalogModel) -> str:
    return (f"{role}: {m.repo} · {m.parameters_b:g}B parameters · {m.disk_gb:.2f} GB download · "
            f"{m.memory_gb:.1f} GB memory · licence {m.license}")


class RecommendedModels(Vertical):
    """Download the recommended models and use them: ``picks`` are ``(role, model)`` pairs."""

    def __init__(self, picks: list[tuple[str, hub.CatalogModel]], config_path: Path, *, title: str,
                 offline: bool, id: str | None = None) -> None:
        super().__init__(id=id, classes="setup-section")
        self.picks, self.config_path, self.title, self.offline = picks, config_path, title, offline
        self.cancel: threading.Event | None = None

    @property
    def running(self) -> bool:
        return self.cancel is not None

    def compose(self) -> ComposeResult:
        yield Static(self.title, classes="setup-title", markup=False)
        for role, model in self.picks:
            yield Static(model_line(role.capitalize(), model), classes="setup-line", markup=False)
        with Horizontal(classes="setup-buttons"):
            both = "them" if len(self.picks) > 1 else "it"
            yield Button(f"Download and use {both}", id="download", variant="primary", disabled=self.offline)
            yield Button("Cancel download", id="cancel-download")
            yield Button("Import a model…", id="import")
        with Horizontal(id="download-row"):
            yield ProgressBar(id="download-bar", show_eta=False)
            yield Static("", id="download-figures", markup=False)
        yield Static("", id="download-status", classes="setup-status", markup=False)

    def on_mount(self) -> None:
        self.query_one("#cancel-download").display = False
        self.query_one("#download-row").display = False
        if self.offline:
            self._offline()
        else:
            self.query_one("#import").display = False

    def on_unmount(self) -> None:
        if self.cancel is not None:
            self.cancel.set()  # leaving stops the download; what was fetched stays for the next one

    def _status(self, text: str, *, error: bool = False) -> None:
        line = self.query_one("#download-status", Static)
        line.update(text)
        line.set_class(error, "-error")

    def _offline(self) -> None:
        self.query_one("#download", Button).disabled = True
        self.query_one("#import").display = True
        self._status("Offline: the Hugging Face hub cannot be reached, so nothing can be downloaded now. "
                     "Import a model you already have (an MLX folder or a GGUF file), or try again online.",
                     error=True)

    @on(Button.Pressed, "#download")
    def start(self) -> None:
        if self.running:
            return
        self.cancel = threading.Event()
        self.query_one("#download", Button).disabled = True
        self.query_one("#cancel-download").display = True
        self.query_one("#download-row").display = True
        if not compression_unset(self.config_path):
            self.picks = [(role, model) for role, model in self.picks if role != "compression"]
        self._status("Downloading: Cancel keeps what was fetched, and the next download resumes it.")
        self._download([model.repo for _, model in self.picks], self.cancel)

    @on(Button.Pressed, "#cancel-download")
    def stop(self) -> None:
        if self.cancel is not None:
            self.cancel.set()
            self._status("Cancelling…")

    @work(thread=True, group="first-run-download", exit_on_error=False)
    def _download(self, repos: list[str], cancel: threading.Event) -> None:
        post = self.post_message
        try:
            for index, repo in enumerate(repos, start=1):
                def progress(p: hub.DownloadProgress, index: int = index, repo: str = repo) -> None:
                    speed = f"{format_bytes(p.speed_bps)}/s" if p.speed_bps else "-- MB/s"
                    left = "done" if p.finished else f"{format_duration(p.eta_s)} left"
                    post(_Step(f"{index}/{len(repos)} {repo}",
                               f"{format_bytes(p.bytes_done)} / {format_bytes(p.bytes_total)} · {speed} · {left}",
                               p.bytes_done, p.bytes_total))

                hub.download(repo, progress=progress, cancel=cancel)
        except hub.DownloadCancelled:
            post(_Finished(cancelled=True))
        except hub.HubUnreachable as exc:
            post(_Finished(error=str(exc), offline=True))
        except hub.HubError as exc:
            post(_Finished(error=str(exc)))
        except Exception as exc:  # a bug: logged with its traceback, shown as one line
            log.exception("first-run download failed")
            post(_Finished(error=f"{type(exc).__name__}: {exc}"))
        else:
            post(_Finished())

    @on(_Step)
    def _step(self, event: _Step) -> None:
        if self.cancel is None or self.cancel.is_set():
            return
        self.query_one("#download-figures", Static).update(f"{event.label} · {event.figures}")
        self.query_one("#download-bar", ProgressBar).update(total=event.total, progress=event.done)

    @on(_Finished)
    def _finished(self, event: _Finished) -> None:
        self.cancel = None
        self.query_one("#cancel-download").display = False
        download = self.query_one("#download", Button)
        download.disabled = False
        if event.cancelled:
            download.label = "Resume download"
            self._status("Download cancelled; what was fetched is kept: Resume download carries on from there.")
        elif event.offline:
            self._offline()
        elif event.error:
            self._status(event.error, error=True)
        elif event.imported:
            self._use([("chat", event.imported)])
        else:
            self._use([(role, model.repo) for role, model in self.picks])

    def _use(self, picks: list[tuple[str, str]]) -> None:
        from hermes_tui.providers.choices import use_model

        notes, names = [], []
        for role, name in picks:
            try:
                result = use_model(name, role, self.config_path)
            except (hub.HubError, ConfigError) as exc:
                self._status(str(exc), error=True)
                return
            names.append(f"{result.value} for {role}")
            if result.note:
                notes.append(result.note)
        self.post_message(SetupDone("Using " + " and ".join(names) + (". " + "; ".join(notes) if notes else "")))

    @on(Button.Pressed, "#import")
    def ask_import(self) -> None:
        from hermes_tui.tui.screens.model_import_dialog import ImportDialog, ImportRequest

        def chosen(request: ImportRequest | None) -> None:
            if request is not None:
                self._status(f"Importing {request.path}…")
                self.query_one("#import", Button).disabled = True
                self._import(request.path, request.name)

        self.app.push_screen(ImportDialog(), chosen)

    @work(thread=True, group="first-run-import", exit_on_error=False)
    def _import(self, path: Path, name: str | None) -> None:
        from hermes_tui.hub.import_common import ModelImportError
        from hermes_tui.hub.model_import import import_model

        try:
            dest = import_model(path, name)
        except ModelImportError as exc:
            self.post_message(_Finished(error=str(exc)))
        except Exception as exc:  # a bug: logged with its traceback, shown as one line
            log.exception("import of %s failed", path)
            self.post_message(_Finished(error=f"{type(exc).__name__}: {exc}"))
        else:
            self.post_message(_Finished(imported=dest.name))


class LocalServers(Vertical):
    """Model servers answering on loopback, each a button; ``ports`` None: the usual ones."""

    def __init__(self, ports: tuple[int, ...] | None, config_path: Path, *, offer_passes: bool,
                 id: str | None = None) -> None:
        super().__init__(id=id, classes="setup-section")
        self.ports = tuple(ports) if ports is not None else local_servers.USUAL_PORTS
        self.config_path = config_path
        self.offer_passes = offer_passes  # where MLX has no GPU, passes go to the server too
        self.found: list[local_servers.FoundServer] = []
        self.scanning = False

    class Found(Message):
        def __init__(self, servers: list[local_servers.FoundServer]) -> None:
            super().__init__()
            self.servers = servers

    def compose(self) -> ComposeResult:
        yield Static("Model servers on this machine", classes="setup-title", markup=False)
        yield Static("", id="servers-status", classes="setup-line", markup=False)
        yield Vertical(id="server-list")
        with Horizontal(classes="setup-buttons"):
            yield Button("Look again", id="rescan")

    def on_mount(self) -> None:
        self.scan()

    @on(Button.Pressed, "#rescan")
    def scan(self) -> None:
        if self.scanning:
            return
        self.scanning = True
        ports = ", ".join(str(p) for p in self.ports)
        self.query_one("#servers-status", Static).update(f"Looking for OpenAI-compatible servers on 127.0.0.1 (ports {ports})…")
        self._probe(self.ports)

    @work(thread=True, group="first-run-servers", exit_on_error=False)
    def _probe(self, ports: tuple[int, ...]) -> None:
        self.post_message(self.Found(local_servers.detect_servers(ports)))

    @on(Found)
    async def _found(self, event: Found) -> None:
        self.scanning = False
        self.found = [s for s in event.servers if s.models]
        listing = self.query_one("#server-list", Vertical)
        await listing.remove_children()
        status = self.query_one("#servers-status", Static)
        if not self.found:
            status.update(self._how_to_start())
            return
        status.update("These answer: choose one for the chat" + (" (and the passes, unless a compression model is set)."
                                                                    if self.offer_passes else "."))
        await listing.mount_all(
            # A str label is markup; the model's name is the server's text.
            Button(shown(f"Use {s.name}: {s.models[0]}"), id=f"server-{i}", classes="server") for i, s in enumerate(self.found)
        )

    def _how_to_start(self) -> str:
        lines = ["No model server answered. Start one, then Look again:"]
        for known in local_servers.USUAL_SERVERS:
            lines.append(f"  {known.name} (port {known.port}): {known.start}")
        return "\n".join(lines)

    @on(Button.Pressed, ".server")
    def _chosen(self, event: Button.Pressed) -> None:
        server = self.found[int((event.button.id or "server-0").removeprefix("server-"))]
        model = server.models[0]
        changes = local_servers.chat_changes(server, model)
        if self.offer_passes and compression_unset(self.config_path):
            changes.update(local_servers.compression_changes(server, model))
        self.post_message(SetupChosen(changes, f"Chatting with {model} at {server.base_url}"))


class ModelsOnDisk(Vertical):
    """MLX models already downloaded or imported, each a button that makes it the chat model.

    Hidden when there are none. ``cpu``: MLX has no GPU here, so each runs slowly on the CPU."""

    def __init__(self, config_path: Path, *, cpu: bool, id: str | None = None) -> None:
        super().__init__(id=id, classes="setup-section")
        self.config_path, self.cpu = config_path, cpu
        self.models: list[hub.LocalModel] = []

    class Listed(Message):
        def __init__(self, models: list[hub.LocalModel]) -> None:
            super().__init__()
            self.models = models

    def compose(self) -> ComposeResult:
        where = "on this machine: each runs slowly on the CPU (a few words a second)" if self.cpu else "on this Mac"
        yield Static(f"MLX models already {where}", classes="setup-title", markup=False)
        yield Vertical(id="disk-list")
        yield Static("", id="disk-status", classes="setup-status", markup=False)

    def on_mount(self) -> None:
        self.display = False
        self._list()

    @work(thread=True, group="first-run-disk", exit_on_error=False)
    def _list(self) -> None:
        try:  # sizes come from walking each model's folder: not on the event loop
            models = [m for m in hub.local_models(self.config_path) if m.complete]
        except Exception:  # a cache that cannot be read leaves the other ways open
            log.exception("cannot list the models on this machine")
            models = []
        self.post_message(self.Listed(models))

    @on(Listed)
    async def _listed(self, event: Listed) -> None:
        self.models = event.models
        if not self.models:
            return
        await self.query_one("#disk-list", Vertical).mount_all(
            Button(shown(f"Use {m.name} ({format_bytes(m.size_bytes)})"), id=f"disk-{i}", classes="disk-model")
            for i, m in enumerate(self.models)
        )
        self.display = True

    @on(Button.Pressed, ".disk-model")
    def _chosen(self, event: Button.Pressed) -> None:
        from hermes_tui.providers.choices import use_model

        model = self.models[int((event.button.id or "disk-0").removeprefix("disk-"))]
        try:
            result = use_model(model.name, "chat", self.config_path)
        except (hub.HubError, ConfigError) as exc:
            line = self.query_one("#disk-status", Static)
            line.update(str(exc))
            line.set_class(True, "-error")
            return
        self.post_message(SetupDone(f"Using {result.value} for chat" + (f". {result.note}" if result.note else "")))


class HermesSettings(Vertical):
    """Offer Hermes Agent's compression settings, key by key; its file is only read."""

    def __init__(self, offer: HermesOffer, *, id: str | None = None) -> None:
        super().__init__(id=id, classes="setup-section")
        self.offer = offer

    def compose(self) -> ComposeResult:
        yield Static(f"Hermes Agent's settings were found in {self.offer.path}", classes="setup-title", markup=False)
        yield Static("Use its compression settings here? (its file is only read, never changed)",
                     classes="setup-line", markup=False)
        yield Static("\n".join(f"  {line}" for line in self.offer.lines), id="hermes-lines", markup=False)
        if self.offer.skipped:
            yield Static("\n".join(f"  not taken: {line}" for line in self.offer.skipped), id="hermes-skipped",
                         markup=False)
        with Horizontal(classes="setup-buttons"):
            yield Button("Use Hermes Agent's compression settings", id="use-hermes")
        yield Static("", id="hermes-status", classes="setup-status", markup=False)

    @on(Button.Pressed, "#use-hermes")
    def _use(self) -> None:
        self.post_message(SetupChosen(dict(self.offer.changes), f"{len(self.offer.changes)} settings taken from "
                                      f"{self.offer.path}", done=False))

    def taken(self, note: str) -> None:
        self.query_one("#use-hermes", Button).disabled = True
        self.query_one("#hermes-status", Static).update(note)
