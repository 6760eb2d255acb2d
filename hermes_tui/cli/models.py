"""``hermes-tui models list | pull REPO | rm NAME | use NAME --role ROLE`` (and ``import``).

A thin shell over :mod:`hermes_tui.hub`, which the models screen shares. Errors are
one line on stderr and exit code 2, like every other command; a cancelled pull
(Ctrl-C) exits 130 and keeps what was fetched for the next pull to resume.
"""

from __future__ import annotations

import argparse
import functools
import json
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import asdict
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO

if TYPE_CHECKING:  # imported where used: building the parser loads no hub or model code
    from hermes_tui import hub

ROLES = ("compression", "chat")  # hub.ROLES; a test keeps the two equal

PLAIN_PROGRESS_EVERY_S = 5.0  # without a terminal: one progress line this often
BAR_WIDTH = 24


def add_parser(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> argparse.ArgumentParser:
    """Add ``models`` and its actions to the top-level subparsers of ``hermes-tui``."""
    models = subparsers.add_parser("models", help="list, download, delete and choose MLX models")
    actions = models.add_subparsers(dest="models_command", metavar="ACTION", required=True)

    listing = actions.add_parser("list", help="the curated catalog and the models on this machine")
    listing.add_argument("--json", action="store_true", help="machine-readable output")
    listing.set_defaults(run=_one_line_errors(run_list))

    pull = actions.add_parser("pull", help="download an MLX model from the Hugging Face hub (resumable)")
    pull.add_argument("repo", help="Hugging Face repo id, e.g. mlx-community/Qwen2.5-1.5B-Instruct-4bit")
    pull.set_defaults(run=_one_line_errors(run_pull))

    remove = actions.add_parser("rm", help="delete a downloaded or imported model")
    remove.add_argument("name", help="repo id (HF cache) or folder name (imported)")
    remove.add_argument("--yes", "-y", action="store_true", help="do not ask for confirmation")
    remove.set_defaults(run=_one_line_errors(run_rm))

    use = actions.add_parser("use", help="make a model the compression or the chat model (writes config.yaml)")
    use.add_argument("name", help="repo id, imported folder name, or a model folder path")
    use.add_argument("--role", choices=ROLES, required=True)
    use.set_defaults(run=_one_line_errors(run_use))

    add_import_parser(actions)
    return models


def _one_line_errors(run: Callable[[argparse.Namespace], int]) -> Callable[[argparse.Namespace], int]:
    @functools.wraps(run)
    def wrapper(args: argparse.Namespace) -> int:
        from hermes_tui import hub
        from hermes_tui.hub.resolve import ModelUnavailable

        try:
            return run(args)
        except (hub.HubError, ModelUnavailable) as exc:
            print(f"hermes-tui: {exc}", file=sys.stderr)
            return 2

    return wrapper


def _config_path(args: argparse.Namespace) -> Path | None:
    from hermes_tui import hub

    path = getattr(args, "config", None)
    if path is not None and not Path(path).is_file():
        raise hub.HubError(f"--config {path}: no such file")
    return path


def progress_line(p: hub.DownloadProgress) -> str:
    from hermes_tui.hub.units import format_bytes, format_duration

    """``37% 312.4 MB / 869.0 MB  12.3 MB/s  0:45 left``."""
    speed = f"{format_bytes(p.speed_bps)}/s" if p.speed_bps else "-- MB/s"
    left = "done" if p.finished else f"{format_duration(p.eta_s)} left"
    return (
        f"{p.fraction:4.0%} {format_bytes(p.bytes_done)} / {format_bytes(p.bytes_total)}  {speed}  {left}"
    )


class ProgressPrinter:
    """A redrawn bar on a terminal; otherwise a plain line every few seconds."""

    def __init__(self, stream: TextIO):
        self.stream = stream
        self.tty = stream.isatty()
        self._last_line = 0.0
        self._drawn = False
        self._last: hub.DownloadProgress | None = None

    def __call__(self, p: hub.DownloadProgress) -> None:
        self._last = p
        if self.tty:
            filled = int(BAR_WIDTH * p.fraction)
            name = p.current_file[-28:]
            self.stream.write(f"\r[{'#' * filled}{'.' * (BAR_WIDTH - filled)}] {progress_line(p)}  {name}\x1b[K")
            self.stream.flush()
            self._drawn = True
            return
        now = time.monotonic()
        if p.finished or now - self._last_line >= PLAIN_PROGRESS_EVERY_S:
            self._last_line = now
            from hermes_tui.hub.units import format_bytes

            resumed = f" (resumed at {format_bytes(p.resumed_bytes)})" if p.resumed_bytes and not p.finished else ""
            self.stream.write(f"{p.repo_id}: {progress_line(p)}{resumed}\n")
            self.stream.flush()

    def close(self) -> None:
        if self._drawn:
            self.stream.write("\n")
            self.stream.flush()
            self._drawn = False


# --- list ------------------------------------------------------------------------------


def run_list(args: argparse.Namespace) -> int:
    from hermes_tui import hub
    from hermes_tui.hub.units import format_bytes

    catalog = hub.load_catalog()
    local = hub.local_models(_config_path(args))
    downloaded = {m.name for m in local if m.source == "hf-cache" and m.complete}
    if args.json:
        print(json.dumps({
            "catalog": [{**asdict(m), "roles": list(m.roles), "downloaded": m.repo in downloaded} for m in catalog],
            "local": [
                {**asdict(m), "path": str(m.path), "root": str(m.root), "roles": list(m.roles)} for m in local
            ],
        }, indent=1))
        return 0

    print(f"Catalog ({hub.CATALOG_PATH}):")
    print(f"    {'REPO':<43} {'PARAMS':>6} {'DISK':>8} {'MEMORY':>8} {'CONTEXT':>6}  {'LICENSE':<13}  SUGGESTED")
    for m in catalog:
        mark = "*" if m.repo in downloaded else " "
        roles = "/".join(m.roles) + (", thinking" if m.reasoning else "")
        roles += ", DEFAULT" if m.default_compression else ""
        print(
            f"  {mark} {m.repo:<43} {m.parameters_b:5.2f}B {m.disk_gb:5.2f} GB {m.memory_gb:5.1f} GB "
            f"{m.context_length // 1024:5d}K  {m.license:<13}  {roles}"
        )
    print("  * downloaded.  DEFAULT: the suggested compression model.  thinking: a reasoning model (slow for passes).")
    print()
    print("On this machine:")
    if not local:
        print(f"  nothing yet: hermes-tui models pull REPO (downloads go to {hub.hf_cache_dir()})")
    for found in local:
        state = "" if found.complete else f"  partial download ({format_bytes(found.partial_bytes)}): pull again to resume"
        roles = f"  in use: {', '.join(found.roles)}" if found.roles else ""
        print(f"  {found.name:<45} {found.source:<8} {format_bytes(found.size_bytes):>9}{roles}{state}")
        print(f"      {found.path}")
    return 0


# --- pull ------------------------------------------------------------------------------


def run_pull(args: argparse.Namespace) -> int:
    from hermes_tui import hub

    printer = ProgressPrinter(sys.stderr)
    cancel = threading.Event()
    outcome: dict[str, Any] = {}

    def work() -> None:
        try:
            outcome["path"] = hub.download(args.repo, progress=printer, cancel=cancel)
        except BaseException as exc:  # noqa: BLE001 - handed to the main thread
            outcome["error"] = exc

    worker = threading.Thread(target=work, name="models-pull", daemon=True)
    worker.start()
    try:
        while worker.is_alive():
            worker.join(0.2)
    except KeyboardInterrupt:
        cancel.set()  # the download stops at its next network read and keeps its files
        worker.join(timeout=30)
        if "path" not in outcome:
            outcome.setdefault("error", hub.DownloadCancelled("cancelled"))
    finally:
        printer.close()
    error = outcome.get("error")
    if isinstance(error, hub.DownloadCancelled):
        print(f"hermes-tui: cancelled; run the same command to resume (hermes-tui models pull {args.repo})",
              file=sys.stderr)
        return 130
    if error is not None:
        raise error
    path = outcome["path"]
    print(f"{args.repo}: ready in {path}")
    print(f"use it: hermes-tui models use {args.repo} --role compression   (or --role chat)")
    return 0


# --- rm --------------------------------------------------------------------------------


def run_rm(args: argparse.Namespace) -> int:
    from hermes_tui import hub
    from hermes_tui.hub.units import format_bytes

    model = hub.find_local_model(args.name, _config_path(args))
    what = f"{model.name} ({format_bytes(model.size_bytes)}, {model.root})"
    if not args.yes:
        if not sys.stdin.isatty():
            raise hub.HubError(f"not deleting {what} without confirmation: pass --yes")
        answer = input(f"Delete {what}? [y/N] ")
        if answer.strip().lower() not in ("y", "yes"):
            print("nothing deleted")
            return 1
    freed = hub.delete_model(args.name)
    print(f"deleted {model.name}: {format_bytes(freed)} freed")
    for role in model.roles:
        key = "model.model" if role == "chat" else "auxiliary.compression.model"
        print(f"note: config.yaml still names it as the {role} model ({key}); "
              f"pick another: hermes-tui models use NAME --role {role}", file=sys.stderr)
    return 0


# --- use -------------------------------------------------------------------------------


def run_use(args: argparse.Namespace) -> int:
    from hermes_tui.providers.choices import use_model

    result = use_model(args.name, args.role, _config_path(args))
    key = "model" if args.role == "chat" else "auxiliary.compression"
    changed = f" (provider was changed to {result.provider})" if result.provider_changed else ""
    print(f"{key}.model = {result.value}{changed}")
    if args.role == "compression":
        reasoning = {m.repo for m in _catalog_quietly() if m.reasoning}
        if args.name in reasoning:
            print("note: this is a thinking model: passes will be slow; a plain instruct model is a better fit",
                  file=sys.stderr)
    if result.note:
        print(f"note: {result.note}", file=sys.stderr)
    return 0


def _catalog_quietly() -> list[hub.CatalogModel]:
    from hermes_tui import hub

    try:
        return hub.load_catalog()
    except hub.CatalogError:
        return []


# --- models import ---------------------------------------------------------------


def add_import_parser(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> argparse.ArgumentParser:
    """Add ``import PATH [--name NAME]`` to the ``models`` command's sub-parsers."""
    parser = subparsers.add_parser(
        "import",
        help="import a local MLX model folder or a GGUF file into the models folder",
        description=(
            "Import a local model. An MLX folder (config.json, model*.safetensors, tokenizer) "
            "is checked and hard-linked or copied; a GGUF file (llama or qwen2 architecture; F32, "
            "F16, BF16, Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q2_K, Q4_K, Q6_K tensors) is converted to an "
            "MLX folder."
        ),
    )
    parser.add_argument("path", type=Path, metavar="PATH", help="an MLX model folder or a .gguf file")
    parser.add_argument("--name", help="name in the models folder (default: the folder or file name)")
    parser.set_defaults(run=run_import)
    return parser


def run_import(args: argparse.Namespace) -> int:
    from hermes_tui.hub.import_common import ModelImportError
    from hermes_tui.hub.model_import import import_model

    progress = _TerminalProgress(sys.stderr) if sys.stderr.isatty() else None
    try:
        dest = import_model(args.path, args.name, progress=progress)
    except ModelImportError as exc:
        if progress:
            progress.close()
        print(f"hermes-tui: {exc}", file=sys.stderr)
        return 2
    if progress:
        progress.close()
    print(f"imported {dest.name}: {dest}")
    return 0


class _TerminalProgress:
    """One self-overwriting status line on a terminal."""

    def __init__(self, stream: TextIO) -> None:
        self.stream = stream
        self.shown = False

    def __call__(self, stage: str, done: int, total: int) -> None:
        if stage in ("copying", "writing"):
            text = f"{stage} {done / 1e6:,.0f}/{total / 1e6:,.0f} MB"
        elif stage == "converting":
            text = f"converting tensor {done}/{total}"
        else:
            text = f"{stage}..." if done < total else f"{stage} done"
        self.stream.write("\r\033[K" + text)
        self.stream.flush()
        self.shown = True

    def close(self) -> None:
        if self.shown:
            self.stream.write("\r\033[K")
            self.stream.flush()
            self.shown = False
