"""The model catalog and model management: list, download, delete, choose.

Shared by ``hermes-tui models ...`` and the models screen. Nothing here prints or
imports the UI; long work (``download``) reports through a callback and stops when a
``threading.Event`` is set, so a screen can run it in a worker thread.

Where models live
  * the Hugging Face cache (``HF_HOME``/``HF_HUB_CACHE``), where downloads go, so that
    ``mlx_runtime.resolve_model_path("org/name")`` finds them offline;
  * ``paths.models_dir()`` (``$HERMES_TUI_HOME/models``), one folder per imported model.
``delete_model`` never removes anything outside those two places.

How a download works (checked against huggingface_hub 2.4)
  huggingface_hub writes each file to a process-unique temporary file and deletes it
  when the transfer fails, so an interrupted ``snapshot_download`` starts every
  unfinished file again from byte 0; it also reads files in 10 MB chunks, too coarse
  for a progress bar or a prompt cancel. So the bytes are fetched here, and the cache
  bookkeeping is left to huggingface_hub:
    1. the file list, sizes and blob ids come from the hub API (``HfApi.model_info``,
       ``list_repo_tree``), filtered with ``ALLOW_PATTERNS`` (mlx_lm's ``DEFAULT_ALLOW_PATTERNS``);
    2. the free disk space is checked against what is left to fetch;
    3. each missing blob is streamed into ``blobs/<etag>.incomplete`` (a later call
       resumes it with a ``Range`` request), checked against its sha256 (LFS) or git
       blob id, and renamed to ``blobs/<etag>``;
    4. ``snapshot_download`` then finds every blob in place and only writes the
       snapshot symlinks and the tree cache; ``refs/<revision>`` is written last.
  ``HF_ENDPOINT`` and ``HF_HUB_OFFLINE`` are read from the environment at call time
  (huggingface_hub reads them once, at import) and the endpoint is passed explicitly.
"""

from __future__ import annotations

import errno
import hashlib
import os
import re
import shutil
import threading
import time
from collections import deque
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from importlib import resources
from importlib.resources.abc import Traversable
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Iterator, Literal

import yaml

from hermes_tui import paths

if TYPE_CHECKING:
    from hermes_tui.config import Config

__all__ = [
    "CATALOG_PATH",
    "ROLES",
    "CatalogError",
    "CatalogModel",
    "DownloadCancelled",
    "DownloadProgress",
    "HubError",
    "HubUnreachable",
    "LocalModel",
    "NotEnoughSpace",
    "UseResult",
    "default_compression_model",
    "delete_model",
    "download",
    "find_local_model",
    "hf_cache_dir",
    "hub_endpoint",
    "load_catalog",
    "local_models",
    "use_model",
]

# Read as package data, so an installed wheel has it as much as the source tree does.
CATALOG_PATH: Traversable = resources.files("hermes_tui") / "assets" / "catalog.yaml"
ROLES = ("compression", "chat")
Role = Literal["compression", "chat"]

IMPORT_HINT = "to use a model you have elsewhere: hermes-tui models import PATH"

# The files an MLX model folder needs: mlx_lm.utils.DEFAULT_ALLOW_PATTERNS, which
# resolve_model_path passes to snapshot_download (tests check the two agree). Copied,
# not imported: a download needs nothing else of mlx_lm, whose import takes seconds.
ALLOW_PATTERNS = [
    "*.json", "model*.safetensors", "*.py", "tokenizer.model", "*.tiktoken", "tiktoken.model", "*.txt",
    "*.jsonl", "*.jinja",
]

# A free-space margin on top of what is left to download: the disk must not fill up
# completely (the OS, the session store and the logs live there too).
DISK_MARGIN_BYTES = 200 * 1024**2
DISK_MARGIN_SHARE = 0.02

# A file transfer that fails (connection dropped, timeout, 5xx) is resumed with a Range
# request this many times in a row (the count resets whenever bytes arrive), waiting
# RETRY_WAIT_S, 2x, 4x... (at most RETRY_WAIT_MAX_S) in between.
RETRIES = 5
RETRY_WAIT_S = 1.0
RETRY_WAIT_MAX_S = 8.0
PROGRESS_INTERVAL_S = 0.1  # at most this often to the progress callback (plus at each file's end)
SPEED_WINDOW_S = 5.0  # speed = bytes over the last few seconds


class HubError(Exception):
    """A problem the user can act on; ``str()`` is one line."""


class CatalogError(HubError):
    """The catalog file is missing or malformed; names the file and the entry."""


class HubUnreachable(HubError):
    """Offline (HF_HUB_OFFLINE) or the hub endpoint cannot be reached."""


class NotEnoughSpace(HubError):
    """Not enough free disk space for the download; names the sizes and the folder."""


class DownloadCancelled(HubError):
    """The cancel event was set. Partial files stay; the same call resumes them."""


# --------------------------------------------------------------------------- catalog


@dataclass(frozen=True)
class CatalogModel:
    repo: str
    family: str
    parameters_b: float
    disk_gb: float
    memory_gb: float
    context_length: int
    license: str
    roles: tuple[str, ...]
    reasoning: bool = False
    default_compression: bool = False
    notes: str = ""

    @property
    def disk_bytes(self) -> int:
        return int(self.disk_gb * 1e9)

    @property
    def memory_bytes(self) -> int:
        return int(self.memory_gb * 1e9)


_REPO_ID = re.compile(r"[A-Za-z0-9][\w.-]*/[\w.-]+")
_NUMBER_FIELDS = ("parameters_b", "disk_gb", "memory_gb")
_REQUIRED = ("repo", "family", "parameters_b", "disk_gb", "memory_gb", "context_length", "license", "roles")
_OPTIONAL = ("reasoning", "default_compression", "notes")


def load_catalog(path: Path | None = None) -> list[CatalogModel]:
    """The curated models, in file order (small first): the bundled catalog unless ``path``
    is given. Raises CatalogError on bad data."""
    path = Path(path) if path is not None else CATALOG_PATH
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise CatalogError(f"{path}: no such file") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise CatalogError(f"{path}: cannot read ({exc})") from None
    except yaml.YAMLError as exc:
        raise CatalogError(f"{path}: not valid YAML ({' '.join(str(exc).split())})") from None
    entries = data.get("models") if isinstance(data, dict) else None
    if not isinstance(entries, list) or not entries:
        raise CatalogError(f"{path}: expected a top-level 'models:' list of entries")
    models = [_catalog_entry(path, index, entry) for index, entry in enumerate(entries, start=1)]
    seen: set[str] = set()
    for index, model in enumerate(models, start=1):
        if model.repo in seen:
            raise CatalogError(f"{path}: entry {index} ({model.repo}): listed twice")
        seen.add(model.repo)
    defaults = [m.repo for m in models if m.default_compression]
    if len(defaults) != 1:
        raise CatalogError(
            f"{path}: exactly one entry must have default_compression: true, found {len(defaults)}"
            + (f" ({', '.join(defaults)})" if defaults else "")
        )
    return models


def _catalog_entry(path: Path | Traversable, index: int, entry: Any) -> CatalogModel:
    label = f"entry {index}"
    if isinstance(entry, dict) and isinstance(entry.get("repo"), str):
        label += f" ({entry['repo']})"

    def bad(message: str) -> CatalogError:
        return CatalogError(f"{path}: {label}: {message}")

    if not isinstance(entry, dict):
        raise bad("expected a mapping of fields")
    missing = [key for key in _REQUIRED if key not in entry]
    if missing:
        raise bad(f"missing {', '.join(missing)}")
    unknown = sorted(set(entry) - set(_REQUIRED) - set(_OPTIONAL))
    if unknown:
        raise bad(f"unknown field {', '.join(unknown)}")
    if not isinstance(entry["repo"], str) or not _REPO_ID.fullmatch(entry["repo"]):
        raise bad(f"repo must be a Hugging Face repo id like org/name, got {entry['repo']!r}")
    for key in ("family", "license"):
        if not isinstance(entry[key], str) or not entry[key].strip():
            raise bad(f"{key} must be non-empty text")
    for key in _NUMBER_FIELDS:
        value = entry[key]
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not value > 0:
            raise bad(f"{key} must be a positive number, got {value!r}")
    context = entry["context_length"]
    if isinstance(context, bool) or not isinstance(context, int) or context < 256:
        raise bad(f"context_length must be a whole number of tokens (>= 256), got {context!r}")
    roles = entry["roles"]
    if not isinstance(roles, list) or not roles or any(role not in ROLES for role in roles):
        raise bad(f"roles must be a non-empty list of {' and/or '.join(ROLES)}, got {roles!r}")
    for key in ("reasoning", "default_compression"):
        if not isinstance(entry.get(key, False), bool):
            raise bad(f"{key} must be true or false")
    notes = entry.get("notes", "")
    if not isinstance(notes, str):
        raise bad("notes must be text")
    if entry.get("default_compression") and "compression" not in roles:
        raise bad("the default compression model must have the compression role")
    return CatalogModel(
        repo=entry["repo"],
        family=entry["family"],
        parameters_b=float(entry["parameters_b"]),
        disk_gb=float(entry["disk_gb"]),
        memory_gb=float(entry["memory_gb"]),
        context_length=context,
        license=entry["license"],
        roles=tuple(roles),
        reasoning=entry.get("reasoning", False),
        default_compression=entry.get("default_compression", False),
        notes=notes,
    )


def default_compression_model(catalog: list[CatalogModel] | None = None) -> CatalogModel:
    catalog = catalog if catalog is not None else load_catalog()
    return next(m for m in catalog if m.default_compression)


def _catalog_repos() -> set[str]:
    try:
        return {m.repo for m in load_catalog()}
    except CatalogError:
        return set()  # a broken catalog must not break listing what is on disk


# --------------------------------------------------------------------------- environment


def _truthy(value: str | None) -> bool:
    return (value or "").strip().upper() in {"1", "ON", "YES", "TRUE"}


def hub_endpoint() -> str:
    """``HF_ENDPOINT`` as set now (huggingface_hub only reads it at import)."""
    from huggingface_hub import constants

    return os.environ.get("HF_ENDPOINT", "").strip().rstrip("/") or constants.ENDPOINT


def _offline() -> bool:
    from huggingface_hub import constants

    env = os.environ.get("HF_HUB_OFFLINE") or os.environ.get("TRANSFORMERS_OFFLINE")
    return _truthy(env) or constants.is_offline_mode()


def hf_cache_dir() -> Path:
    """The Hugging Face hub cache, the same one ``resolve_model_path`` searches."""
    from huggingface_hub import constants

    return Path(constants.HF_HUB_CACHE).expanduser()


def _unreachable(endpoint: str, reason: str) -> HubUnreachable:
    return HubUnreachable(
        f"cannot reach the Hugging Face hub at {endpoint} ({reason}). "
        f"Models already downloaded still work; {IMPORT_HINT}"
    )


def _first_line(exc: BaseException, limit: int = 160) -> str:
    text = " ".join(str(exc).split()) or type(exc).__name__
    return text if len(text) <= limit else text[: limit - 3] + "..."


@contextmanager
def _hub_errors(repo_id: str, endpoint: str, revision: str) -> Iterator[None]:
    """Turn huggingface_hub / httpx failures into one-line HubErrors."""
    import httpx2
    from huggingface_hub.errors import (
        GatedRepoError,
        HfHubHTTPError,
        OfflineModeIsEnabled,
        RemoteEntryNotFoundError,
        RepositoryNotFoundError,
        RevisionNotFoundError,
    )

    try:
        yield
    except OfflineModeIsEnabled:
        raise _unreachable(endpoint, "offline mode: HF_HUB_OFFLINE is set") from None
    except httpx2.TransportError as exc:
        raise _unreachable(endpoint, _first_line(exc)) from None
    except GatedRepoError:
        raise HubError(
            f"{repo_id} is gated: accept its terms at {endpoint}/{repo_id}, then log in "
            "(`hf auth login`, or set HF_TOKEN)"
        ) from None
    except RepositoryNotFoundError:
        raise HubError(
            f"{repo_id}: no such model on {endpoint} (if it is private, log in with `hf auth login` or set HF_TOKEN)"
        ) from None
    except RevisionNotFoundError:
        raise HubError(f"{repo_id}: no revision {revision!r} on {endpoint}") from None
    except RemoteEntryNotFoundError as exc:
        raise HubError(f"{repo_id}: a file listed by the hub is missing ({_first_line(exc)})") from None
    except HfHubHTTPError as exc:
        status = exc.response.status_code if exc.response is not None else None
        if status in (401, 403):
            raise HubError(
                f"{repo_id}: access denied by {endpoint} (HTTP {status}); log in with `hf auth login`"
            ) from None
        raise HubError(f"{repo_id}: the hub at {endpoint} answered HTTP {status}: {_first_line(exc, 100)}") from None


# --------------------------------------------------------------------------- local models


@dataclass(frozen=True)
class LocalModel:
    name: str               # repo id (hf-cache) or folder name (local)
    path: Path              # what to load: the snapshot folder, or the local folder
    root: Path              # what delete_model removes: the cache repo folder, or the local folder
    size_bytes: int         # on disk, partial downloads included
    source: Literal["hf-cache", "local"]
    in_catalog: bool
    roles: tuple[str, ...]  # roles config.yaml gives it now ("chat", "compression")
    complete: bool = True   # a loadable snapshot exists (config.json + *.safetensors)
    partial_bytes: int = 0  # bytes in interrupted downloads (resumed by the next pull)


def _tree_size(root: Path) -> int:
    """Bytes of the regular files under ``root`` (symlinks are not followed or counted)."""
    total = 0
    for dirpath, _dirnames, filenames in os.walk(root):
        for name in filenames:
            try:
                st = os.lstat(os.path.join(dirpath, name))
            except OSError:
                continue
            if not os.path.islink(os.path.join(dirpath, name)):
                total += st.st_size
    return total


def _partial_bytes(repo_root: Path) -> int:
    total = 0
    for partial in (repo_root / "blobs").glob("*.incomplete"):
        try:
            total += partial.stat().st_size
        except OSError:
            pass
    return total


def _looks_like_mlx(files: list[str]) -> bool:
    return "config.json" in files and any(name.endswith(".safetensors") for name in files)


def _cache_repo_id(folder: str) -> str | None:
    if not folder.startswith("models--"):
        return None
    parts = folder[len("models--"):].split("--")
    return "/".join(parts) if len(parts) == 2 and all(parts) else None


def _cached_models(cache: Path) -> list[tuple[str, Path, Path, bool]]:
    """(repo id, snapshot path or repo folder, repo folder, complete) of MLX-looking cache entries."""
    from huggingface_hub import scan_cache_dir
    from huggingface_hub.errors import CacheNotFound

    found: dict[str, tuple[str, Path, Path, bool]] = {}
    try:
        info = scan_cache_dir(cache)
    except CacheNotFound:
        return []
    for repo in info.repos:
        if repo.repo_type != "model":
            continue
        revisions = sorted(repo.revisions, key=lambda r: ("main" in r.refs, r.last_modified), reverse=True)
        snapshot = next(
            (r.snapshot_path for r in revisions if _looks_like_mlx([f.file_name for f in r.files])), None
        )
        if snapshot is not None:
            found[repo.repo_id] = (repo.repo_id, snapshot, repo.repo_path, True)
        elif _partial_bytes(repo.repo_path):
            found[repo.repo_id] = (repo.repo_id, repo.repo_path, repo.repo_path, False)
    # A first download interrupted before any snapshot exists: scan_cache_dir skips the
    # folder (no snapshots/), but its partial blobs are worth listing (to resume or delete).
    for folder in sorted(cache.glob("models--*")):
        repo_id = _cache_repo_id(folder.name)
        if repo_id and repo_id not in found and folder.is_dir() and _partial_bytes(folder):
            found[repo_id] = (repo_id, folder, folder, False)
    return list(found.values())


def _config_roles(config: Config | None) -> dict[str, str]:
    """role -> configured model value."""
    if config is None:
        return {}
    return {"chat": config.model.model, "compression": config.auxiliary.compression.model}


def _same_model(value: str, name: str, path: Path) -> bool:
    if not value:
        return False
    if value == name:
        return True
    candidate = Path(value).expanduser()
    if not candidate.is_absolute() and not value.startswith(("./", "../", "~")):
        return False
    try:
        return candidate.resolve() == path.resolve()
    except OSError:
        return False


def _load_config_quietly(config_path: Path | None) -> Config | None:
    from hermes_tui.config import ConfigError, load_config

    try:
        return load_config(config_path)
    except ConfigError:
        return None  # listing what is on disk must work even with a broken config file


def local_models(config_path: Path | None = None) -> list[LocalModel]:
    """Models in the HF cache (MLX-looking ones) and in ``models_dir()``; cache first, by name."""
    config = _load_config_quietly(config_path)
    configured = _config_roles(config)
    catalog = _catalog_repos()

    def roles_of(name: str, path: Path) -> tuple[str, ...]:
        return tuple(role for role in ROLES if _same_model(configured.get(role, ""), name, path))

    models: list[LocalModel] = []
    cache = hf_cache_dir()
    if cache.is_dir():
        for repo_id, path, root, complete in sorted(_cached_models(cache)):
            models.append(
                LocalModel(
                    name=repo_id, path=path, root=root, size_bytes=_tree_size(root), source="hf-cache",
                    in_catalog=repo_id in catalog, roles=roles_of(repo_id, path) if complete else (),
                    complete=complete, partial_bytes=_partial_bytes(root),
                )
            )
    folder = paths.models_dir()
    if folder.is_dir():
        for child in sorted(folder.iterdir()):
            if child.name.startswith(".") or not child.is_dir() or not (child / "config.json").is_file():
                continue  # hidden folders are work in progress (e.g. an import being written)
            models.append(
                LocalModel(
                    name=child.name, path=child, root=child, size_bytes=_tree_size(child), source="local",
                    in_catalog=False, roles=roles_of(child.name, child),
                )
            )
    return models


def find_local_model(name: str, config_path: Path | None = None) -> LocalModel:
    """The local model ``name`` (repo id, folder name in models_dir, or its path)."""
    models = local_models(config_path)
    for model in models:
        if model.name == name:
            return model
    candidate = Path(name).expanduser()
    if candidate.exists():
        for model in models:
            if candidate.resolve() in (model.path.resolve(), model.root.resolve()):
                return model
    raise HubError(
        f"{name}: no such model in the Hugging Face cache ({hf_cache_dir()}) or in {paths.models_dir()}"
    )


# --------------------------------------------------------------------------- delete


def _inside(child: Path, parent: Path) -> bool:
    """``child`` is a direct entry of ``parent`` (no symlink games: compared unresolved and resolved)."""
    try:
        same_parent = child.parent == parent and child.parent.resolve() == parent.resolve()
        return same_parent and child.name not in ("", ".", "..")
    except OSError:
        return False


def delete_model(name: str) -> int:
    """Delete a downloaded (HF cache) or imported (models_dir) model; returns the bytes freed.

    Only a repo folder directly under the HF cache or a folder directly under
    ``models_dir()`` is ever removed; for the cache, the repo's lock folder goes too.
    """
    model = find_local_model(name)
    root = model.root
    if model.source == "hf-cache":
        base = hf_cache_dir()
        allowed = _inside(root, base) and root.name.startswith("models--")
    else:
        base = paths.models_dir()
        allowed = _inside(root, base)
    if not allowed:
        raise HubError(f"{root}: refusing to delete: not a model folder directly under {base}")
    if root.is_symlink():
        # A link placed in models_dir: remove the link, never what it points to.
        root.unlink()
        return 0
    freed = _tree_size(root)
    try:
        shutil.rmtree(root)
    except OSError as exc:
        raise HubError(f"{root}: cannot delete ({exc.strerror or exc})") from None
    if model.source == "hf-cache":
        shutil.rmtree(base / ".locks" / root.name, ignore_errors=True)
    return freed


# --------------------------------------------------------------------------- use


@dataclass(frozen=True)
class UseResult:
    name: str
    role: str
    value: str                 # what config.yaml now holds as the role's model
    provider: str              # the role's provider after the change
    provider_changed: bool
    note: str = ""             # one line for the user, e.g. why the provider stays


def _config_value(name: str) -> str:
    """What to write in config for ``name``: repo ids stay; folders become absolute paths."""
    local = paths.models_dir() / name
    if "/" not in name and "\\" not in name and (local / "config.json").is_file():
        return str(local)
    candidate = Path(name).expanduser()
    if candidate.exists():
        return str(candidate.resolve())
    return name


def use_model(name: str, role: str, config_path: Path | None = None) -> UseResult:
    """Make ``name`` the compression or chat model in config.yaml.

    The model must resolve here (a local MLX folder, or a repo id in the HF cache).
    The provider: ``auto``/``mlx`` stay as they are. ``extractive`` (compression) and
    ``openai-api`` with no ``base_url`` become ``auto`` — the user picked a local model
    and there is nowhere else it could run. ``openai-api`` with a ``base_url`` stays: the
    endpoint (e.g. mlx_lm.server) may serve this very model; the note says how to run it
    in-process instead.

    Only the changed keys are written (``config_edit.save_changes``, as the settings
    screen does): the user's comments and layout stay. A config.yaml that does not load
    is an error here (ConfigError), never replaced.
    """
    from hermes_tui.config import load_config
    from hermes_tui.config_edit import save_changes
    from hermes_tui.mlx_runtime import ModelUnavailable, resolve_model_path

    if role not in ROLES:
        raise HubError(f"role must be {' or '.join(ROLES)}, got {role!r}")
    value = _config_value(name)
    try:
        resolve_model_path(value)
    except ModelUnavailable as exc:
        raise HubError(str(exc)) from None
    path = Path(config_path) if config_path is not None else paths.config_path()
    config = load_config(path)
    prefix = "model" if role == "chat" else "auxiliary.compression"
    section = config.model if role == "chat" else config.auxiliary.compression
    provider, note = section.provider, ""
    if provider == "extractive" or (provider == "openai-api" and not section.base_url):
        provider = "auto"
    elif provider == "openai-api":
        note = (
            f"{prefix}.provider stays openai-api ({section.base_url}): that endpoint must serve this model; "
            f"to run it in-process set {prefix}.provider to auto"
        )
    save_changes(path, {f"{prefix}.model": value, f"{prefix}.provider": provider}, base=config)
    return UseResult(name, role, value, provider, provider != section.provider, note)


# --------------------------------------------------------------------------- download


@dataclass(frozen=True)
class DownloadProgress:
    repo_id: str
    bytes_done: int             # in the cache now, including bytes from earlier attempts
    bytes_total: int            # every file the model needs
    speed_bps: float            # recent transfer rate (bytes/s); 0 until measured
    eta_s: float | None         # seconds left at that rate; None when unknown
    files_done: int
    files_total: int
    current_file: str = ""      # the file being fetched ("" between files)
    resumed_bytes: int = 0      # already here when this call started
    finished: bool = False

    @property
    def fraction(self) -> float:
        return self.bytes_done / self.bytes_total if self.bytes_total else 1.0


@dataclass
class _Tracker:
    repo_id: str
    total: int
    done: int
    files_total: int
    callback: Callable[[DownloadProgress], None] | None
    files_done: int = 0
    current: str = ""
    resumed: int = 0
    _last_emit: float = 0.0
    _window: deque = field(default_factory=deque)

    def __post_init__(self) -> None:
        self.resumed = self.done
        self._window.append((time.monotonic(), self.done))

    def add(self, n: int) -> None:
        self.done += n
        now = time.monotonic()
        if n < 0:  # a restarted file: forget the rate history, it counted discarded bytes
            self._window.clear()
        self._window.append((now, self.done))
        while len(self._window) > 2 and now - self._window[0][0] > SPEED_WINDOW_S:
            self._window.popleft()
        if now - self._last_emit >= PROGRESS_INTERVAL_S:
            self.emit()

    def speed(self) -> float:
        if len(self._window) < 2:
            return 0.0
        (t0, b0), (t1, b1) = self._window[0], self._window[-1]
        return (b1 - b0) / (t1 - t0) if t1 > t0 and b1 > b0 else 0.0

    def emit(self, finished: bool = False) -> None:
        self._last_emit = time.monotonic()
        if self.callback is None:
            return
        speed = self.speed()
        left = max(0, self.total - self.done)
        eta = 0.0 if finished or not left else (left / speed if speed > 0 else None)
        self.callback(
            DownloadProgress(
                repo_id=self.repo_id, bytes_done=self.done, bytes_total=self.total, speed_bps=speed, eta_s=eta,
                files_done=self.files_done, files_total=self.files_total, current_file=self.current,
                resumed_bytes=self.resumed, finished=finished,
            )
        )


@dataclass(frozen=True)
class _RepoFile:
    path: str
    size: int
    etag: str  # the blob name in the cache: LFS sha256, else the git blob id


def _format_bytes(n: float) -> str:
    for unit in ("B", "KB", "MB", "GB"):
        if abs(n) < 1000 or unit == "GB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1000
    return f"{n:.1f} GB"  # pragma: no cover


def _existing_parent(path: Path) -> Path:
    while not path.exists() and path != path.parent:
        path = path.parent
    return path


def _check_disk_space(repo_id: str, need: int, folder: Path) -> None:
    if need <= 0:
        return
    free = shutil.disk_usage(_existing_parent(folder)).free
    margin = max(DISK_MARGIN_BYTES, int(need * DISK_MARGIN_SHARE))
    if free < need + margin:
        raise NotEnoughSpace(
            f"not enough disk space for {repo_id}: it needs {_format_bytes(need)} more "
            f"(plus {_format_bytes(margin)} spare) but {folder} has {_format_bytes(free)} free"
        )


def _verify(path: Path, expected: str, size: int) -> bool:
    """``expected`` is a sha256 (LFS files) or a git blob sha1 (small files); other etags pass."""
    if re.fullmatch(r"[0-9a-f]{64}", expected):
        digest = hashlib.sha256()
    elif re.fullmatch(r"[0-9a-f]{40}", expected):
        digest = hashlib.sha1(f"blob {size}\0".encode())
    else:
        return True
    with open(path, "rb") as handle:
        while chunk := handle.read(1024 * 1024):
            digest.update(chunk)
    return digest.hexdigest() == expected


def _transient(exc: BaseException) -> bool:
    import httpx2
    from huggingface_hub.errors import HfHubHTTPError

    if isinstance(exc, httpx2.TransportError):
        return True
    if isinstance(exc, HfHubHTTPError) and exc.response is not None:
        return exc.response.status_code in (408, 429) or exc.response.status_code >= 500
    return False


def _same_host(a: str, b: str) -> bool:
    from urllib.parse import urlsplit

    return urlsplit(a).netloc == urlsplit(b).netloc


class _ShortBody(Exception):
    """The server ended a response before the whole file arrived (retried like a drop)."""


def _fetch_blob(
    *, repo_id: str, endpoint: str, commit: str, file: _RepoFile, blobs: Path,
    tracker: _Tracker, cancel: threading.Event | None,
) -> None:
    """Stream one file into ``blobs/<etag>.incomplete`` (resuming it), verify, rename."""
    from huggingface_hub import constants, get_hf_file_metadata, hf_hub_url
    from huggingface_hub.errors import HfHubHTTPError, OfflineModeIsEnabled
    from huggingface_hub.utils import build_hf_headers, get_session, hf_raise_for_status

    url = hf_hub_url(repo_id, file.path, revision=commit, endpoint=endpoint)
    with _hub_errors(repo_id, endpoint, commit):
        meta = get_hf_file_metadata(url, endpoint=endpoint)
    # The blob name snapshot_download will look for is the etag of this same HEAD call.
    etag = meta.etag or file.etag
    size = meta.size if meta.size is not None else file.size
    location = meta.location or url
    headers = build_hf_headers()
    headers["Accept-Encoding"] = "identity"  # byte offsets must be offsets in the file
    if not _same_host(location, endpoint):
        headers.pop("authorization", None)  # a signed CDN URL: the token stays on the hub
    partial = blobs / f"{etag}.incomplete"
    partial.touch()

    failures = 0
    while True:
        have = partial.stat().st_size
        if have > size:  # cannot be a prefix of this file: start over
            partial.unlink()
            partial.touch()
            tracker.add(-size)
            have = 0
        if have == size:
            break
        request_headers = dict(headers)
        if have:
            request_headers["Range"] = f"bytes={have}-"
        try:
            with get_session().stream(
                "GET", location, headers=request_headers, timeout=constants.HF_HUB_DOWNLOAD_TIMEOUT,
                follow_redirects=True,
            ) as response:
                if response.status_code >= 400:
                    response.read()
                    hf_raise_for_status(response)
                mode = "ab"
                if have and response.status_code != 206:  # the server ignored Range: a full body follows
                    tracker.add(-have)
                    have, mode = 0, "wb"
                with open(partial, mode) as out:
                    for chunk in response.iter_bytes():
                        if cancel is not None and cancel.is_set():
                            raise DownloadCancelled(f"download of {repo_id} cancelled")
                        out.write(chunk)
                        tracker.add(len(chunk))
                        failures = 0
            received = partial.stat().st_size
            if received < size:
                raise _ShortBody(f"the server sent {received} of {size} bytes")
        except DownloadCancelled:
            raise
        except Exception as exc:  # noqa: BLE001 - sorted below: retry, one-line error, or re-raise
            if isinstance(exc, OSError) and exc.errno == errno.ENOSPC:
                raise NotEnoughSpace(
                    f"the disk filled up while downloading {repo_id} into {blobs}; "
                    "free some space and run the same download again to resume"
                ) from None
            if _transient(exc) or isinstance(exc, _ShortBody):
                failures = _retry_or_raise(exc, failures, repo_id, file, partial, size, cancel)
                continue
            if isinstance(exc, (HfHubHTTPError, OfflineModeIsEnabled)):
                with _hub_errors(repo_id, endpoint, commit):
                    raise
            if isinstance(exc, OSError) and exc.filename:
                raise HubError(f"cannot write {exc.filename}: {exc.strerror or exc}") from None
            raise

    if not _verify(partial, etag, size):
        partial.unlink(missing_ok=True)
        tracker.add(-size)
        raise HubError(
            f"{repo_id}: {file.path} did not match its checksum (the partial download was corrupt and has been "
            "removed); run the same download again"
        )
    os.replace(partial, blobs / etag)


def _retry_or_raise(
    exc: BaseException, failures: int, repo_id: str, file: _RepoFile, partial: Path, size: int,
    cancel: threading.Event | None,
) -> int:
    failures += 1
    if failures > RETRIES:
        have = partial.stat().st_size if partial.exists() else 0
        raise HubError(
            f"download of {repo_id} interrupted at {file.path} ({_first_line(exc, 100)}; {RETRIES} retries failed); "
            f"{_format_bytes(have)} of its {_format_bytes(size)} are kept: run the same download again to resume"
        ) from None
    wait = min(RETRY_WAIT_MAX_S, RETRY_WAIT_S * 2 ** (failures - 1))
    if cancel is not None:
        if cancel.wait(wait):
            raise DownloadCancelled(f"download of {repo_id} cancelled")
    else:
        time.sleep(wait)
    return failures


def _silent_tqdm() -> type:
    from tqdm.auto import tqdm

    class SilentTqdm(tqdm):
        """snapshot_download's progress bars, never shown (progress is reported by download())."""

        def __init__(self, *args: Any, **kwargs: Any) -> None:
            kwargs.pop("name", None)
            kwargs["disable"] = True
            super().__init__(*args, **kwargs)

    return SilentTqdm


@contextmanager
def _download_lock(repo_id: str, cache: Path, folder: str) -> Iterator[None]:
    """One download per repo at a time (two writers would append to the same partial file)."""
    from huggingface_hub.utils import WeakFileLock

    lock_path = cache / ".locks" / folder / "hermes-download.lock"
    with ExitStack() as stack:
        try:
            lock_path.parent.mkdir(parents=True, exist_ok=True)
            stack.enter_context(WeakFileLock(lock_path, timeout=0.5))
        except TimeoutError:
            raise HubError(f"another download of {repo_id} is already running (lock: {lock_path})") from None
        except OSError as exc:
            raise HubError(f"cannot create {lock_path.parent}: {exc.strerror or exc}") from None
        yield


def download(
    repo_id: str,
    *,
    progress: Callable[[DownloadProgress], None] | None = None,
    cancel: threading.Event | None = None,
    revision: str | None = None,
) -> Path:
    """Download an MLX model into the HF cache; returns its snapshot folder.

    ``progress`` is called from this thread, at most every PROGRESS_INTERVAL_S, at each
    file's end and once at the end (``finished=True``). Setting ``cancel`` stops the
    transfer within one network read and raises DownloadCancelled; what was fetched
    stays, and the next call resumes it. Raises HubUnreachable (offline, no
    connection), NotEnoughSpace, or HubError (unknown or gated repo, HTTP error, not
    an MLX model, interrupted after retries), each one line.
    """
    from huggingface_hub import HfApi, snapshot_download
    from huggingface_hub.file_download import repo_folder_name
    from huggingface_hub.hf_api import RepoFile
    from huggingface_hub.utils import filter_repo_objects

    if not _REPO_ID.fullmatch(repo_id):
        raise HubError(
            f"expected a Hugging Face repo id like mlx-community/Qwen2.5-1.5B-Instruct-4bit, got {repo_id!r}"
        )
    revision = revision or "main"
    endpoint = hub_endpoint()
    if _offline():
        raise _unreachable(endpoint, "offline mode: HF_HUB_OFFLINE is set")

    api = HfApi(endpoint=endpoint)
    with _hub_errors(repo_id, endpoint, revision):
        commit = api.model_info(repo_id, revision=revision).sha
        if not commit:
            raise HubError(f"{repo_id}: the hub at {endpoint} did not say which commit {revision} is")
        tree = [f for f in api.list_repo_tree(repo_id, recursive=True, revision=commit) if isinstance(f, RepoFile)]
    wanted = list(filter_repo_objects(tree, allow_patterns=ALLOW_PATTERNS, key=lambda f: f.path))
    if not _looks_like_mlx([f.path for f in wanted]):
        raise HubError(
            f"{repo_id} is not an MLX model (no config.json and *.safetensors); for a GGUF file, "
            "download it and run hermes-tui models import PATH"
        )
    files = [_RepoFile(f.path, f.lfs.size if f.lfs else f.size, f.lfs.sha256 if f.lfs else f.blob_id) for f in wanted]

    cache = hf_cache_dir()
    folder = repo_folder_name(repo_id=repo_id, repo_type="model")
    storage = cache / folder
    blobs = storage / "blobs"
    total = sum(f.size for f in files)
    here = 0
    for f in files:
        if (blobs / f.etag).exists():
            here += f.size
        elif (blobs / f"{f.etag}.incomplete").exists():
            here += min(f.size, (blobs / f"{f.etag}.incomplete").stat().st_size)
    _check_disk_space(repo_id, total - here, cache)  # before anything is written

    tracker = _Tracker(repo_id, total, here, len(files), progress)
    tracker.emit()
    with _download_lock(repo_id, cache, folder):
        try:
            blobs.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise HubError(f"cannot create {blobs}: {exc.strerror or exc}") from None
        for f in sorted(files, key=lambda f: f.size):  # small files first
            if cancel is not None and cancel.is_set():
                raise DownloadCancelled(f"download of {repo_id} cancelled")
            if not (blobs / f.etag).exists():
                tracker.current = f.path
                tracker.emit()
                _fetch_blob(repo_id=repo_id, endpoint=endpoint, commit=commit, file=f, blobs=blobs,
                            tracker=tracker, cancel=cancel)
            tracker.files_done += 1
            tracker.current = ""
            tracker.emit()

        # Every blob is in place: snapshot_download only links them and caches the tree listing.
        with _hub_errors(repo_id, endpoint, revision):
            snapshot = snapshot_download(
                repo_id, revision=commit, cache_dir=str(cache), endpoint=endpoint,
                allow_patterns=ALLOW_PATTERNS, tqdm_class=_silent_tqdm(),
            )
        if revision != commit:  # refs/<branch> last: the snapshot it names is complete
            ref = storage / "refs" / revision
            ref.parent.mkdir(parents=True, exist_ok=True)
            tmp = ref.with_name(f".{ref.name}.tmp")
            tmp.write_text(commit)
            os.replace(tmp, ref)
    tracker.emit(finished=True)
    return Path(snapshot)
