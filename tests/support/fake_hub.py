"""A local stand-in for the Hugging Face hub: the endpoints huggingface_hub calls to
download a model repo, served by a stdlib HTTP server in a thread.

Point ``HF_ENDPOINT`` at ``FakeHub.url``. Endpoints (as called by huggingface_hub 2.x):

  GET  /api/models/{repo}[/revision/{rev}]   model_info / repo_info: {"id", "sha", "siblings"}
  GET  /api/models/{repo}/tree/{rev}          list_repo_tree (recursive): type, path, size, oid, lfs
  HEAD /{repo}/resolve/{rev}/{path}           get_hf_file_metadata: X-Repo-Commit, ETag (git blob id);
                                              LFS files answer 302 to the "CDN" with X-Linked-Etag
                                              (sha256) and X-Linked-Size, like the real hub
  GET  /{repo}/resolve/{rev}/{path}           the file (LFS files: the same 302)
  GET  /cdn/{sha256}                          LFS content; the CDN host is "localhost" while the
                                              hub is "127.0.0.1", so it counts as another host
Every file body honours ``Range: bytes=N-`` (206 + Content-Range).

Errors carry the hub's ``X-Error-Code`` header (RepoNotFound, RevisionNotFound,
GatedRepo, EntryNotFound), which is how huggingface_hub picks its exception class.

Knobs a test sets while the server runs: ``throttle`` (bytes per write, seconds
between writes), ``drop_at[path] = offset`` (the next GET of that file stops after
that absolute offset and the connection is cut), ``statuses[path] = [503, ...]``
(the next GETs of that file answer these statuses, after any pending drop). ``requests`` records
every request as (method, path, Range header).
"""

from __future__ import annotations

import hashlib
import json
import socket
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import unquote, urlsplit


def git_blob_id(data: bytes) -> str:
    return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()


@dataclass
class FakeRepo:
    repo_id: str
    files: dict[str, bytes]
    lfs: set[str] = field(default_factory=set)  # served as LFS: sha256 etag, redirected to the CDN
    gated: bool = False

    @property
    def commit(self) -> str:
        digest = hashlib.sha1(self.repo_id.encode())
        for path in sorted(self.files):
            digest.update(path.encode() + git_blob_id(self.files[path]).encode())
        return digest.hexdigest()

    def etag(self, path: str) -> str:
        data = self.files[path]
        return hashlib.sha256(data).hexdigest() if path in self.lfs else git_blob_id(data)

    @classmethod
    def from_folder(cls, repo_id: str, folder: Path, *, extra: dict[str, bytes] | None = None) -> FakeRepo:
        files = {p.name: p.read_bytes() for p in sorted(folder.iterdir()) if p.is_file()}
        files.update(extra or {})
        lfs = {name for name in files if name.endswith(".safetensors") or len(files[name]) > 10_000}
        return cls(repo_id, files, lfs)


@dataclass(frozen=True)
class Request:
    method: str
    path: str
    range: str | None


class FakeHub:
    def __init__(self, repos: list[FakeRepo]):
        self.repos = {repo.repo_id: repo for repo in repos}
        self.throttle: tuple[int, float] | None = None
        self.drop_at: dict[str, int] = {}
        self.statuses: dict[str, list[int]] = {}
        self.requests: list[Request] = []
        self._lock = threading.Lock()
        self._server: ThreadingHTTPServer | None = None
        self.url = ""

    # --- lifecycle ---------------------------------------------------------------------
    def start(self) -> FakeHub:
        hub = self

        class Handler(_Handler):
            fake = hub

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self.port = self._server.server_address[1]
        self.url = f"http://127.0.0.1:{self.port}"
        threading.Thread(target=self._server.serve_forever, name="fake-hub", daemon=True).start()
        return self

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None

    # --- for tests ---------------------------------------------------------------------
    def record(self, request: Request) -> None:
        with self._lock:
            self.requests.append(request)

    def gets(self, suffix: str) -> list[Request]:
        """GET requests whose path ends with ``suffix`` (file bodies, incl. CDN ones)."""
        with self._lock:
            return [r for r in self.requests if r.method == "GET" and r.path.endswith(suffix)]

    def take_drop(self, path: str) -> int | None:
        with self._lock:
            return self.drop_at.pop(path, None)

    def take_status(self, path: str) -> int | None:
        with self._lock:
            queue = self.statuses.get(path)
            return queue.pop(0) if queue else None


class _Handler(BaseHTTPRequestHandler):
    fake: FakeHub
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args) -> None:
        pass

    # --- routing -----------------------------------------------------------------------
    def do_HEAD(self) -> None:
        self._route("HEAD")

    def do_GET(self) -> None:
        self._route("GET")

    def _route(self, method: str) -> None:
        path = unquote(urlsplit(self.path).path)
        self.fake.record(Request(method, path, self.headers.get("Range")))
        parts = path.strip("/").split("/")
        try:
            if parts[:2] == ["api", "models"] and len(parts) >= 4:
                self._api(method, parts[2:])
            elif parts[0] == "cdn" and len(parts) == 2:
                self._cdn(method, parts[1])
            elif len(parts) >= 5 and parts[2] == "resolve":
                self._resolve(method, f"{parts[0]}/{parts[1]}", parts[3], "/".join(parts[4:]))
            else:
                self._error(404, "EntryNotFound", "no such endpoint")
        except (BrokenPipeError, ConnectionResetError):
            self.close_connection = True  # the client went away (a cancelled download)

    def _repo(self, repo_id: str, revision: str) -> FakeRepo | None:
        repo = self.fake.repos.get(repo_id)
        if repo is None:
            self._error(404, "RepoNotFound", "Repository not found")
            return None
        if revision not in ("main", repo.commit):
            self._error(404, "RevisionNotFound", "Invalid rev id")
            return None
        return repo

    def _api(self, method: str, parts: list[str]) -> None:
        repo_id = "/".join(parts[:2])
        rest = parts[2:]
        if not rest or (rest[0] == "revision" and len(rest) == 2):
            repo = self._repo(repo_id, rest[1] if rest else "main")
            if repo is not None:
                self._json({
                    "id": repo.repo_id, "sha": repo.commit, "private": False,
                    "gated": "auto" if repo.gated else False, "library_name": "mlx", "tags": ["mlx"],
                    "siblings": [{"rfilename": p} for p in sorted(repo.files)],
                }, method)
        elif rest[0] == "tree" and len(rest) == 2:
            repo = self._repo(repo_id, rest[1])
            if repo is not None:
                entries = []
                for p, data in sorted(repo.files.items()):
                    entry = {"type": "file", "path": p, "size": len(data), "oid": git_blob_id(data)}
                    if p in repo.lfs:
                        entry["lfs"] = {"oid": hashlib.sha256(data).hexdigest(), "size": len(data), "pointerSize": 134}
                    entries.append(entry)
                self._json(entries, method)
        else:
            self._error(404, "EntryNotFound", "no such endpoint")

    def _resolve(self, method: str, repo_id: str, revision: str, filename: str) -> None:
        repo = self._repo(repo_id, revision)
        if repo is None:
            return
        if repo.gated:
            self._error(403, "GatedRepo", "Access to model is restricted: you must be authenticated")
            return
        if filename not in repo.files:
            self._error(404, "EntryNotFound", "Entry not found", commit=repo.commit)
            return
        data, etag = repo.files[filename], repo.etag(filename)
        if filename in repo.lfs:
            self.send_response(302)
            self.send_header("Location", f"http://localhost:{self.fake.port}/cdn/{etag}")
            self.send_header("X-Repo-Commit", repo.commit)
            self.send_header("X-Linked-Etag", f'"{etag}"')
            self.send_header("X-Linked-Size", str(len(data)))
            self.send_header("ETag", f'"{git_blob_id(data)}"')
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        self._file(method, filename, data, headers={"X-Repo-Commit": repo.commit, "ETag": f'"{etag}"'})

    def _cdn(self, method: str, sha256: str) -> None:
        for repo in self.fake.repos.values():
            for path in repo.lfs:
                if repo.etag(path) == sha256:
                    self._file(method, path, repo.files[path], headers={"ETag": f'"{sha256}"'})
                    return
        self._error(404, "EntryNotFound", "no such blob")

    # --- responses ---------------------------------------------------------------------
    def _json(self, data, method: str) -> None:
        body = json.dumps(data).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if method == "GET":
            self.wfile.write(body)

    def _error(self, status: int, code: str, message: str, commit: str | None = None) -> None:
        body = json.dumps({"error": message}).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("X-Error-Code", code)
        self.send_header("X-Error-Message", message)
        if commit:
            self.send_header("X-Repo-Commit", commit)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if self.command == "GET":
            self.wfile.write(body)

    def _file(self, method: str, path: str, data: bytes, headers: dict[str, str]) -> None:
        # A pending drop goes first: "cut mid-file, then be down for a while".
        if method == "GET" and path not in self.fake.drop_at and (status := self.fake.take_status(path)) is not None:
            self._error(status, "ServiceUnavailable", "try again later")
            return
        start = 0
        requested = self.headers.get("Range")
        if method == "GET" and requested and requested.startswith("bytes="):
            start = int(requested[len("bytes="):].split("-")[0])
        if start:
            self.send_response(206)
            self.send_header("Content-Range", f"bytes {start}-{len(data) - 1}/{len(data)}")
        else:
            self.send_response(200)
        for key, value in headers.items():
            self.send_header(key, value)
        self.send_header("Accept-Ranges", "bytes")
        self.send_header("Content-Type", "application/octet-stream")
        self.send_header("Content-Length", str(len(data) - start))
        self.end_headers()
        if method != "GET":
            return
        drop = self.fake.take_drop(path)
        chunk, delay = self.fake.throttle or (256 * 1024, 0.0)
        position = start
        while position < len(data):
            end = min(len(data), position + chunk)
            if drop is not None and end > drop:
                end = max(position, drop)
            self.wfile.write(data[position:end])
            position = end
            if drop is not None and position >= drop:
                # Cut the connection mid-body, as a flaky network or a restarting server does.
                self.close_connection = True
                try:
                    self.connection.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass
                return
            if delay:
                time.sleep(delay)


def point_hub_at(server: FakeHub, cache: Path, monkeypatch) -> None:
    """Make huggingface_hub (and so ``hermes_tui.hub``) download from ``server`` into ``cache``,
    online, as the tests of downloads do."""
    from huggingface_hub import constants

    for key in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE", "HF_TOKEN"):
        monkeypatch.delenv(key, raising=False)
    monkeypatch.setenv("HF_ENDPOINT", server.url)
    monkeypatch.setattr(constants, "HF_HUB_CACHE", str(cache))
    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", False)
    monkeypatch.setattr(constants, "ENDPOINT", server.url)
    monkeypatch.setattr(constants, "HUGGINGFACE_CO_URL_TEMPLATE", server.url + "/{repo_id}/resolve/{revision}/{filename}")
