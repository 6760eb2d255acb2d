"""Downloading an MLX model into the Hugging Face cache, resumably, with progress and cancel.

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
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from hermes_tui.hub.catalog import REPO_ID
from hermes_tui.hub.errors import DownloadCancelled, HubError, NotEnoughSpace
from hermes_tui.hub.hf import (
    first_line,
    hf_cache_dir,
    hub_endpoint,
    hub_errors,
    offline,
    unreachable,
)
from hermes_tui.hub.local import looks_like_mlx

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
    _window: deque[tuple[float, int]] = field(default_factory=deque)

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
    with hub_errors(repo_id, endpoint, commit):
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
        except Exception as exc:
            if isinstance(exc, OSError) and exc.errno == errno.ENOSPC:
                raise NotEnoughSpace(
                    f"the disk filled up while downloading {repo_id} into {blobs}; "
                    "free some space and run the same download again to resume"
                ) from None
            if _transient(exc) or isinstance(exc, _ShortBody):
                failures = _retry_or_raise(exc, failures, repo_id, file, partial, size, cancel)
                continue
            if isinstance(exc, (HfHubHTTPError, OfflineModeIsEnabled)):
                with hub_errors(repo_id, endpoint, commit):
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
            f"download of {repo_id} interrupted at {file.path} ({first_line(exc, 100)}; {RETRIES} retries failed); "
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

    class SilentTqdm(tqdm):  # type: ignore[misc]  # tqdm has no types
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

    if not REPO_ID.fullmatch(repo_id):
        raise HubError(
            f"expected a Hugging Face repo id like mlx-community/Qwen2.5-1.5B-Instruct-4bit, got {repo_id!r}"
        )
    revision = revision or "main"
    endpoint = hub_endpoint()
    if offline():
        raise unreachable(endpoint, "offline mode: HF_HUB_OFFLINE is set")

    api = HfApi(endpoint=endpoint)
    with hub_errors(repo_id, endpoint, revision):
        commit = api.model_info(repo_id, revision=revision).sha
        if not commit:
            raise HubError(f"{repo_id}: the hub at {endpoint} did not say which commit {revision} is")
        tree = [f for f in api.list_repo_tree(repo_id, recursive=True, revision=commit) if isinstance(f, RepoFile)]
    wanted = list(filter_repo_objects(tree, allow_patterns=ALLOW_PATTERNS, key=lambda f: f.path))
    if not looks_like_mlx([f.path for f in wanted]):
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
        with hub_errors(repo_id, endpoint, revision):
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
