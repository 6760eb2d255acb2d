"""The downloads and imports of the models screen, run in its thread workers: each reports its
steps and its end as messages, so the screen stays live while a model is fetched or converted."""

from __future__ import annotations

import threading
from collections.abc import Callable
from pathlib import Path

from textual.app import ComposeResult
from textual.containers import Horizontal, Vertical
from textual.message import Message as UIMessage
from textual.widgets import ProgressBar, Static

from hermes_tui import hub
from hermes_tui.hub.units import format_bytes, format_duration
from hermes_tui.tui.screens.model_import_dialog import ImportRequest
from hermes_tui.util.logs import get_logger

__all__ = ["TransferDone", "TransferPanel", "TransferStep", "run_download", "run_import"]

log = get_logger("tui")


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


class TransferPanel(Vertical):
    """What a running transfer is doing: a label, a progress bar and its figures (styled by the screen)."""

    def compose(self) -> ComposeResult:
        yield Static("", id="transfer-label", markup=False)
        with Horizontal(id="transfer-row"):
            yield ProgressBar(id="transfer-bar", show_eta=False)
            yield Static("", id="transfer-figures", markup=False)

    def start(self, label: str) -> None:
        self.say(label)
        self.query_one("#transfer-figures", Static).update("")
        self.query_one("#transfer-bar", ProgressBar).update(total=None, progress=0)

    def say(self, label: str) -> None:
        self.query_one("#transfer-label", Static).update(label)

    def show(self, step: TransferStep, *, label: bool = True) -> None:
        if label:
            self.say(step.label)
        self.query_one("#transfer-figures", Static).update(step.figures)
        self.query_one("#transfer-bar", ProgressBar).update(total=step.total, progress=step.done)


def run_download(repo: str, cancel: threading.Event, post: Callable[[UIMessage], object]) -> None:
    """Download ``repo`` (resuming what was fetched), posting its steps and its end."""

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


def run_import(request: ImportRequest, post: Callable[[UIMessage], object]) -> None:
    """Import ``request``'s file or folder into the models folder, posting its steps and its end."""
    from hermes_tui.hub.import_common import ModelImportError
    from hermes_tui.hub.model_import import import_model

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
