"""Model management (hermes_tui/hub/ and ``hermes-tui models``) against a fake hub.

The Hugging Face hub is unreachable here, so ``tests/support/fake_hub.py`` serves the tiny
4-bit model through the endpoints huggingface_hub calls, on a local port, with
HF_ENDPOINT pointing at it and HF_HOME in a temp dir. It can throttle a transfer (so
a test can cancel mid-file), cut a connection mid-file, and answer 503s.

huggingface_hub reads HF_ENDPOINT, HF_HUB_OFFLINE and the cache location once, at
import, and the test session may have imported it under ``hf_offline_env``. hub/
reads the endpoint and offline flag from the environment at call time; the fixture
also patches ``huggingface_hub.constants`` so the library (and resolve_model_path)
agree with it. The CLI tests run the real entry point in a subprocess, where the
environment is read fresh.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections import namedtuple
from pathlib import Path
from typing import NamedTuple

import pytest
from support.fake_hub import FakeHub, FakeRepo
from support.servers import free_port

from hermes_tui import hub
from hermes_tui.config import Config, load_config
from hermes_tui.config.write import save_config
from hermes_tui.hub import downloads
from hermes_tui.providers import selection
from hermes_tui.providers.choices import use_model

REPO = "tiny/model-4bit"
CLI = [sys.executable, "-m", "hermes_tui.cli"]


class HubEnv(NamedTuple):
    fake: FakeHub
    cache: Path
    home: Path        # HERMES_TUI_HOME
    env: dict         # for subprocesses


@pytest.fixture(scope="module")
def tiny_repo(tiny_model) -> FakeRepo:
    # README.md and .gitattributes are not in mlx_lm's allow patterns: never fetched.
    return FakeRepo.from_folder(
        REPO, tiny_model.q4, extra={"README.md": b"# tiny\n", ".gitattributes": b"*.safetensors filter=lfs\n"}
    )


@pytest.fixture
def fake(tiny_repo) -> FakeHub:
    gated = FakeRepo("org/gated-4bit", dict(tiny_repo.files), set(tiny_repo.lfs), gated=True)
    not_mlx = FakeRepo("org/some-gguf", {"model.Q4_0.gguf": b"GGUF" + bytes(100), "README.md": b"x"})
    server = FakeHub([tiny_repo, gated, not_mlx]).start()
    yield server
    server.stop()


@pytest.fixture
def hub_env(fake, tmp_path, monkeypatch, hermes_home) -> HubEnv:
    from huggingface_hub import constants

    hf_home = tmp_path / "hf_home"
    cache = hf_home / "hub"
    for key in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE", "HF_HUB_CACHE", "HF_TOKEN"):
        monkeypatch.delenv(key, raising=False)
    monkeypatch.setenv("HF_HOME", str(hf_home))
    monkeypatch.setenv("HF_ENDPOINT", fake.url)
    monkeypatch.setattr(constants, "HF_HUB_CACHE", str(cache))
    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", False)
    monkeypatch.setattr(constants, "ENDPOINT", fake.url)
    monkeypatch.setattr(constants, "HUGGINGFACE_CO_URL_TEMPLATE", fake.url + "/{repo_id}/resolve/{revision}/{filename}")
    monkeypatch.setattr(downloads, "RETRY_WAIT_S", 0.01)
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    return HubEnv(fake, cache, hermes_home, env)


def repo_bytes(repo: FakeRepo) -> int:
    """What a download fetches: the files mlx_lm's allow patterns select."""
    return sum(len(data) for name, data in repo.files.items() if name not in ("README.md", ".gitattributes"))


def partials(cache: Path) -> list[Path]:
    return sorted(cache.glob("models--*/blobs/*.incomplete"))


# --------------------------------------------------------------------------- catalog


def test_catalog_loads_small_models_first_with_one_default():
    catalog = hub.load_catalog()
    assert 8 <= len(catalog) <= 12
    defaults = [m for m in catalog if m.default_compression]
    assert len(defaults) == 1
    default = defaults[0]
    assert "compression" in default.roles and not default.reasoning and default.parameters_b <= 4
    sizes = [m.parameters_b for m in catalog]
    assert sizes == sorted(sizes), "small models first"
    assert all(m.repo.startswith("mlx-community/") and "4bit" in m.repo for m in catalog)
    assert all(m.memory_gb > m.disk_gb for m in catalog)
    assert all(m.reasoning for m in catalog if m.repo.startswith("mlx-community/Qwen3-"))
    assert hub.default_compression_model(catalog) == default
    chat = hub.default_chat_model(catalog)
    assert chat.default_chat and "chat" in chat.roles and not chat.reasoning
    assert chat.memory_gb + default.memory_gb <= 6, "both fit beside each other on an 8 GB Mac"


@pytest.mark.parametrize(
    ("edit", "expected"),
    [
        (lambda e: e.pop("repo"), "entry 2: missing repo"),
        (lambda e: e.update(disk_gb="big"), "entry 2 (org/b): disk_gb must be a positive number"),
        (lambda e: e.update(roles=["summaries"]), "entry 2 (org/b): roles must be"),
        (lambda e: e.update(default_compression=True), "exactly one entry must have default_compression"),
        (lambda e: e.update(colour="red"), "entry 2 (org/b): unknown field colour"),
        (lambda e: e.update(default_chat=True), "entry 2 (org/b): the default chat model must have the chat role"),
    ],
)
def test_a_bad_catalog_names_the_file_and_the_entry(tmp_path, edit, expected):
    import yaml

    entry = {
        "repo": "org/a", "family": "A", "parameters_b": 1.0, "disk_gb": 0.5, "memory_gb": 1.0,
        "context_length": 4096, "license": "mit", "roles": ["compression"], "default_compression": True,
    }
    second = {**entry, "repo": "org/b", "default_compression": False}
    edit(second)
    path = tmp_path / "catalog.yaml"
    path.write_text(yaml.safe_dump({"models": [entry, second]}))
    with pytest.raises(hub.CatalogError) as info:
        hub.load_catalog(path)
    assert str(path) in str(info.value) and expected in str(info.value)
    assert "\n" not in str(info.value)


# --------------------------------------------------------------------------- download


def test_downloads_fetch_the_files_resolve_model_path_expects():
    from mlx_lm.utils import DEFAULT_ALLOW_PATTERNS

    assert downloads.ALLOW_PATTERNS == DEFAULT_ALLOW_PATTERNS


def test_a_download_reports_progress_and_the_model_loads_and_generates(hub_env, tiny_repo, monkeypatch):
    events: list[hub.DownloadProgress] = []
    path = hub.download(REPO, progress=events.append)

    total = repo_bytes(tiny_repo)
    assert events[-1].finished and events[-1].bytes_done == events[-1].bytes_total == total
    done = [e.bytes_done for e in events]
    assert done == sorted(done), "progress never goes backwards"
    assert all(e.bytes_total == total and e.files_total == 4 for e in events)
    assert any(e.current_file == "model.safetensors" for e in events)
    assert events[-1].files_done == 4 and events[-1].eta_s == 0

    assert path.parent.parent == hub_env.cache / "models--tiny--model-4bit"
    assert sorted(p.name for p in path.iterdir()) == ["config.json", "model.safetensors", "tokenizer.json",
                                                     "tokenizer_config.json"]
    for name in ("model.safetensors", "config.json"):
        assert (path / name).read_bytes() == tiny_repo.files[name]
    assert (hub_env.cache / "models--tiny--model-4bit" / "refs" / "main").read_text() == tiny_repo.commit
    assert not hub_env.fake.gets("README.md") and not partials(hub_env.cache)
    # LFS files came from the "CDN" (another host), like on the real hub.
    assert len(hub_env.fake.gets(tiny_repo.etag("model.safetensors"))) == 1

    # The model now resolves offline, the way the app loads it, and generates.
    from huggingface_hub import constants

    from hermes_tui.hub.resolve import resolve_model_path
    from hermes_tui.providers.mlx.runtime import MlxRuntime

    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", True)
    assert resolve_model_path(REPO) == path
    runtime = MlxRuntime()
    loaded = runtime.load(REPO)
    stats = runtime.generate(loaded, [{"role": "user", "content": "hello"}], max_tokens=2)
    assert stats.completion_tokens == 2

    # Downloading again fetches nothing.
    before = len(hub_env.fake.requests)
    monkeypatch.delenv("HF_HUB_OFFLINE")
    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", False)
    assert hub.download(REPO) == path
    assert not [r for r in hub_env.fake.requests[before:] if r.method == "GET" and "/cdn/" in r.path]


def test_cancel_keeps_the_partial_file_and_the_next_call_resumes_it(hub_env, tiny_repo):
    fake = hub_env.fake
    fake.throttle = (16 * 1024, 0.01)  # ~1.6 MB/s: the 1.66 MB weights take about a second
    cancel = threading.Event()
    seen: list[hub.DownloadProgress] = []

    def progress(p: hub.DownloadProgress) -> None:
        seen.append(p)
        if p.current_file == "model.safetensors" and p.bytes_done > 400_000:
            cancel.set()

    with pytest.raises(hub.DownloadCancelled):
        hub.download(REPO, progress=progress, cancel=cancel)
    [partial] = partials(hub_env.cache)
    kept = partial.stat().st_size
    assert partial.name == f"{tiny_repo.etag('model.safetensors')}.incomplete"
    assert 0 < kept < len(tiny_repo.files["model.safetensors"])
    assert not (hub_env.cache / "models--tiny--model-4bit" / "snapshots").exists()
    listed = {m.name: m for m in hub.local_models()}
    assert not listed[REPO].complete and listed[REPO].partial_bytes == kept

    fake.throttle = None
    events: list[hub.DownloadProgress] = []
    path = hub.download(REPO, progress=events.append)
    resumed = fake.gets(tiny_repo.etag("model.safetensors"))[-1]
    assert resumed.range == f"bytes={kept}-"
    assert events[0].resumed_bytes >= kept and events[0].bytes_done == events[0].resumed_bytes
    assert (path / "model.safetensors").read_bytes() == tiny_repo.files["model.safetensors"]
    assert not partials(hub_env.cache)


def test_a_dropped_connection_is_resumed_automatically(hub_env, tiny_repo):
    weights = tiny_repo.files["model.safetensors"]
    hub_env.fake.drop_at["model.safetensors"] = 500_000
    events: list[hub.DownloadProgress] = []
    path = hub.download(REPO, progress=events.append)
    ranges = [r.range for r in hub_env.fake.gets(tiny_repo.etag("model.safetensors"))]
    assert ranges == [None, "bytes=500000-"]
    assert (path / "model.safetensors").read_bytes() == weights
    done = [e.bytes_done for e in events]
    assert done == sorted(done) and done[-1] == repo_bytes(tiny_repo)


def test_when_retries_fail_the_error_is_one_line_and_a_rerun_resumes(hub_env, tiny_repo):
    fake = hub_env.fake
    fake.drop_at["model.safetensors"] = 600_000
    fake.statuses["model.safetensors"] = [503] * (downloads.RETRIES + 1)  # the server stays down a while
    with pytest.raises(hub.HubError) as info:
        hub.download(REPO)
    message = str(info.value)
    assert "\n" not in message and "interrupted" in message and "resume" in message
    assert partials(hub_env.cache)[0].stat().st_size == 600_000

    path = hub.download(REPO)
    assert fake.gets(tiny_repo.etag("model.safetensors"))[-1].range == "bytes=600000-"
    assert (path / "model.safetensors").read_bytes() == tiny_repo.files["model.safetensors"]


def test_a_corrupt_partial_file_is_caught_by_the_checksum(hub_env, tiny_repo):
    blobs = hub_env.cache / "models--tiny--model-4bit" / "blobs"
    blobs.mkdir(parents=True)
    partial = blobs / f"{tiny_repo.etag('model.safetensors')}.incomplete"
    partial.write_bytes(b"\xff" * 1000)  # not what the server holds at those offsets
    with pytest.raises(hub.HubError, match="checksum"):
        hub.download(REPO)
    assert not partial.exists()
    path = hub.download(REPO)
    assert (path / "model.safetensors").read_bytes() == tiny_repo.files["model.safetensors"]


def test_not_enough_disk_space_stops_before_anything_is_written(hub_env, tiny_repo, monkeypatch):
    usage = namedtuple("usage", "total used free")
    monkeypatch.setattr(downloads.shutil, "disk_usage", lambda path: usage(10**9, 10**9 - 50_000, 50_000))
    with pytest.raises(hub.NotEnoughSpace) as info:
        hub.download(REPO)
    message = str(info.value)
    assert "1.7 MB" in message and "50.0 KB free" in message and str(hub_env.cache) in message
    assert not (hub_env.cache / "models--tiny--model-4bit").exists()
    assert not [r for r in hub_env.fake.requests if "/resolve/" in r.path or "/cdn/" in r.path]


def test_a_server_that_is_down_gives_one_clear_message(hub_env, monkeypatch):
    endpoint = f"http://127.0.0.1:{free_port()}"
    monkeypatch.setenv("HF_ENDPOINT", endpoint)
    with pytest.raises(hub.HubUnreachable) as info:
        hub.download(REPO)
    message = str(info.value)
    assert message.startswith(f"cannot reach the Hugging Face hub at {endpoint} (")
    assert "already downloaded still work" in message and "hermes-tui models import PATH" in message
    assert "\n" not in message


def test_offline_mode_gives_the_same_message_without_a_request(hub_env, monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    with pytest.raises(hub.HubUnreachable) as info:
        hub.download(REPO)
    assert str(info.value).startswith(f"cannot reach the Hugging Face hub at {hub_env.fake.url} (offline mode")
    assert not hub_env.fake.requests


@pytest.mark.parametrize(
    ("repo", "expected"),
    [
        ("nobody/missing-4bit", "nobody/missing-4bit: no such model on http://127.0.0.1:"),
        ("org/gated-4bit", "org/gated-4bit is gated: accept its terms at"),
        ("org/some-gguf", "org/some-gguf is not an MLX model"),
        ("not a repo", "expected a Hugging Face repo id"),
    ],
)
def test_hub_errors_are_one_line(hub_env, repo, expected):
    with pytest.raises(hub.HubError) as info:
        hub.download(repo)
    assert str(info.value).startswith(expected) and "\n" not in str(info.value)


def test_an_unknown_revision_is_one_line(hub_env):
    with pytest.raises(hub.HubError, match=r"no revision 'v9'"):
        hub.download(REPO, revision="v9")


# --------------------------------------------------------------------------- local models, delete, use


@pytest.fixture
def imported(hub_env, tiny_model) -> Path:
    """A model folder in $HERMES_TUI_HOME/models, as `models import` leaves it."""
    folder = hub_env.home / "models" / "my-tiny"
    shutil.copytree(tiny_model.q4, folder)
    (hub_env.home / "models" / ".half-written").mkdir()  # hidden: work in progress, never listed
    return folder


def test_local_models_lists_the_cache_and_the_models_folder(hub_env, imported, tiny_repo):
    snapshot = hub.download(REPO)
    models = hub.local_models()
    assert [(m.name, m.source) for m in models] == [(REPO, "hf-cache"), ("my-tiny", "local")]
    cached, local = models
    assert cached.path == snapshot and cached.complete and not cached.in_catalog
    # Blobs plus the small refs and tree-cache files; the snapshot symlinks count nothing.
    assert repo_bytes(tiny_repo) <= cached.size_bytes < repo_bytes(tiny_repo) + 10_000
    assert local.path == imported and local.size_bytes == sum(p.stat().st_size for p in imported.iterdir())
    assert cached.roles == local.roles == ()


def test_use_model_writes_the_role_to_config(hub_env, imported, monkeypatch):
    monkeypatch.setattr(selection, "gpu_available", lambda: True)  # auto runs it: auto stays
    hub.download(REPO)
    result = use_model(REPO, "compression")
    assert (result.value, result.provider, result.provider_changed) == (REPO, "auto", False)
    result = use_model("my-tiny", "chat")
    assert result.value == str(imported)
    config = load_config()
    assert config.auxiliary.compression.model == REPO
    assert config.model.model == str(imported)
    roles = {m.name: m.roles for m in hub.local_models()}
    assert roles == {REPO: ("compression",), "my-tiny": ("chat",)}


def test_use_model_switches_a_provider_that_could_not_run_it(hub_env, imported, monkeypatch):
    monkeypatch.setattr(selection, "gpu_available", lambda: True)
    config = Config().with_overrides({
        "auxiliary.compression.provider": "extractive",
        "model.provider": "openai-api", "model.base_url": "",
    })
    save_config(config)
    assert use_model("my-tiny", "compression").provider == "auto"
    assert use_model("my-tiny", "chat").provider == "auto"

    save_config(Config().with_overrides({"model.provider": "openai-api", "model.base_url": "http://127.0.0.1:9/v1"}))
    result = use_model("my-tiny", "chat")
    assert result.provider == "openai-api" and not result.provider_changed and "endpoint must serve" in result.note
    assert load_config().model.base_url == "http://127.0.0.1:9/v1"


def test_use_model_without_a_gpu_sets_provider_mlx_so_the_model_runs_on_the_cpu(hub_env, imported):
    assert not selection.gpu_available()  # this machine: MLX on the CPU backend
    save_config(Config())  # provider auto for both roles
    for role, section in (("chat", "model"), ("compression", "auxiliary.compression")):
        result = use_model("my-tiny", role)
        assert (result.provider, result.provider_changed) == ("mlx", True)
        assert "no GPU" in result.note and "slowly" in result.note and f"{section}.provider" in result.note
    config = load_config()
    assert (config.model.provider, config.model.model) == ("mlx", str(imported))
    assert config.auxiliary.compression.provider == "mlx"
    assert selection.resolve_provider(config.model, role="model") == "mlx"


def test_use_model_refuses_what_does_not_resolve(hub_env):
    with pytest.raises(hub.HubError, match="not in the local Hugging Face cache"):
        use_model("mlx-community/not-here-4bit", "compression")
    with pytest.raises(hub.HubError, match="role must be"):
        use_model(REPO, "summaries")
    assert not (hub_env.home / "config.yaml").exists()


def test_delete_frees_the_bytes_and_touches_nothing_else(hub_env, imported, tmp_path):
    hub.download(REPO)
    other_repo = hub_env.cache / "models--someone--else" / "blobs"
    other_repo.mkdir(parents=True)
    (other_repo / "keep").write_bytes(b"k" * 100)
    (hub_env.cache / "version.txt").write_text("1")
    outside = tmp_path / "outside-model"
    shutil.copytree(imported, outside)
    listed = {m.name: m.size_bytes for m in hub.local_models()}

    assert hub.delete_model(REPO) == listed[REPO]
    assert not (hub_env.cache / "models--tiny--model-4bit").exists()
    assert not (hub_env.cache / ".locks" / "models--tiny--model-4bit").exists()
    assert hub.delete_model("my-tiny") == listed["my-tiny"]
    assert not imported.exists()
    assert [m.name for m in hub.local_models()] == []

    assert (other_repo / "keep").exists() and (hub_env.cache / "version.txt").exists()
    assert (hub_env.home / "models" / ".half-written").exists()
    for name in (str(outside), "../outside-model", "someone/else", str(hub_env.cache), "/", ".."):
        with pytest.raises(hub.HubError, match="no such model"):
            hub.delete_model(name)
    assert outside.exists() and (other_repo / "keep").exists()


def test_a_link_in_the_models_folder_is_unlinked_not_followed(hub_env, tmp_path, tiny_model):
    target = tmp_path / "elsewhere"
    shutil.copytree(tiny_model.q4, target)
    (hub_env.home / "models").mkdir()
    (hub_env.home / "models" / "linked").symlink_to(target)
    assert hub.delete_model("linked") == 0
    assert not (hub_env.home / "models" / "linked").exists() and (target / "config.json").exists()


# --------------------------------------------------------------------------- CLI


def run_cli(env: HubEnv, *args: str, timeout: float = 60) -> subprocess.CompletedProcess:
    return subprocess.run(
        [*CLI, "models", *args], env=env.env, stdin=subprocess.DEVNULL, capture_output=True, text=True,
        timeout=timeout,
    )


def explain(proc: subprocess.CompletedProcess) -> str:
    return f"exit {proc.returncode}\n--- stdout ---\n{proc.stdout[-3000:]}\n--- stderr ---\n{proc.stderr[-3000:]}"


def test_cli_pull_list_use_rm(hub_env, imported):
    proc = run_cli(hub_env, "pull", REPO)
    assert proc.returncode == 0, explain(proc)
    assert f"{REPO}: ready in {hub_env.cache}" in proc.stdout
    assert "100% 1.7 MB / 1.7 MB" in proc.stderr  # not a terminal: plain progress lines

    proc = run_cli(hub_env, "use", REPO, "--role", "compression")
    assert proc.returncode == 0, explain(proc)
    # A subprocess on this machine: MLX has no GPU, so auto becomes mlx (and the note says so).
    assert proc.stdout.strip() == f"auxiliary.compression.model = {REPO} (provider was changed to mlx)"
    assert "runs on the CPU" in proc.stderr + proc.stdout
    assert load_config().auxiliary.compression.model == REPO

    proc = run_cli(hub_env, "list")
    assert proc.returncode == 0, explain(proc)
    assert "mlx-community/Qwen2.5-1.5B-Instruct-4bit" in proc.stdout and "DEFAULT" in proc.stdout
    assert f"{REPO}" in proc.stdout and "in use: compression" in proc.stdout and "my-tiny" in proc.stdout

    proc = run_cli(hub_env, "list", "--json")
    data = json.loads(proc.stdout)
    assert len(data["catalog"]) == len(hub.load_catalog()) and not any(m["downloaded"] for m in data["catalog"])
    assert [(m["name"], m["source"], m["roles"]) for m in data["local"]] == [
        (REPO, "hf-cache", ["compression"]), ("my-tiny", "local", []),
    ]

    proc = run_cli(hub_env, "rm", REPO)  # stdin is not a terminal: no prompt, no deletion
    assert proc.returncode == 2 and "pass --yes" in proc.stderr and len(proc.stderr.splitlines()) == 1
    assert (hub_env.cache / "models--tiny--model-4bit").exists()
    proc = run_cli(hub_env, "rm", REPO, "--yes")
    assert proc.returncode == 0, explain(proc)
    assert proc.stdout.startswith(f"deleted {REPO}: 1.7 MB freed")
    assert "still names it as the compression model" in proc.stderr
    assert not (hub_env.cache / "models--tiny--model-4bit").exists()


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (("pull", "nobody/missing-4bit"), "hermes-tui: nobody/missing-4bit: no such model on"),
        (("rm", "nobody/missing-4bit", "--yes"), "hermes-tui: nobody/missing-4bit: no such model in"),
        (("use", "nobody/missing-4bit", "--role", "chat"), "hermes-tui: model nobody/missing-4bit is not in"),
    ],
)
def test_cli_errors_are_one_line(hub_env, args, expected):
    proc = run_cli(hub_env, *args)
    assert proc.returncode == 2, explain(proc)
    assert proc.stderr.startswith(expected) and len(proc.stderr.splitlines()) == 1, explain(proc)


USER_CONFIG = """\
# my own config: the chat model runs on the laptop
model:
  provider: mlx        # in-process
  model: /somewhere/chat-model

auxiliary:
  compression:
    provider: extractive   # until I pick a model
    model: ""

compression:
  threshold: 0.5  # compact early
"""


def test_cli_use_edits_only_the_role_and_keeps_the_users_comments(hub_env, imported):
    path = hub_env.home / "config.yaml"
    path.write_text(USER_CONFIG, encoding="utf-8")
    proc = run_cli(hub_env, "use", "my-tiny", "--role", "compression")
    assert proc.returncode == 0, explain(proc)
    assert "provider was changed to mlx" in proc.stdout  # no GPU here: auto would not run it
    # The two keys change in place (the comment keeps its column); every other byte stays.
    assert path.read_text(encoding="utf-8") == USER_CONFIG.replace(
        "provider: extractive   #", "provider: mlx          #"
    ).replace('model: ""', f"model: {imported}")
    config = load_config(path)  # and the result is a valid config holding the new value
    assert (config.auxiliary.compression.provider, config.auxiliary.compression.model) == ("mlx", str(imported))
    assert (config.model.model, config.compression.threshold) == ("/somewhere/chat-model", 0.5)


def test_cli_use_with_a_bad_config_names_the_problem_and_writes_nothing(hub_env, imported):
    path = hub_env.home / "config.yaml"
    bad = USER_CONFIG.replace("threshold: 0.5", "threshold: 5")
    path.write_text(bad, encoding="utf-8")
    proc = run_cli(hub_env, "use", "my-tiny", "--role", "compression")
    assert proc.returncode == 2, explain(proc)
    assert proc.stderr.startswith(f"hermes-tui: {path}: line 12: compression.threshold: "), explain(proc)
    assert len(proc.stderr.splitlines()) == 1, explain(proc)
    assert path.read_text(encoding="utf-8") == bad  # not rewritten, and no backup made of it
    assert not path.with_name("config.yaml.bak").exists()


def test_cli_pull_with_the_server_down(hub_env):
    endpoint = f"http://127.0.0.1:{free_port()}"
    proc = run_cli(hub_env._replace(env={**hub_env.env, "HF_ENDPOINT": endpoint}), "pull", REPO)
    assert proc.returncode == 2, explain(proc)
    assert proc.stderr.startswith(f"hermes-tui: cannot reach the Hugging Face hub at {endpoint} (")
    assert len(proc.stderr.splitlines()) == 1


def test_cli_ctrl_c_cancels_and_the_same_command_resumes(hub_env, tiny_repo):
    fake = hub_env.fake
    fake.throttle = (8 * 1024, 0.02)  # ~400 KB/s: seconds for the weights
    process = subprocess.Popen(
        [*CLI, "models", "pull", REPO], env=hub_env.env, stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        # A test run started in the background (`cmd &` in a script) ignores SIGINT, and
        # children inherit that: give the CLI the default a terminal gives it.
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )
    weights = tiny_repo.etag("model.safetensors")
    blob = hub_env.cache / "models--tiny--model-4bit" / "blobs" / f"{weights}.incomplete"
    deadline = time.monotonic() + 30
    while not (blob.exists() and blob.stat().st_size > 100_000):
        assert process.poll() is None and time.monotonic() < deadline, process.communicate()
        time.sleep(0.02)
    process.send_signal(signal.SIGINT)
    stdout, stderr = process.communicate(timeout=30)
    assert process.returncode == 130, stderr
    assert stderr.strip().splitlines()[-1] == (
        f"hermes-tui: cancelled; run the same command to resume (hermes-tui models pull {REPO})"
    )
    kept = blob.stat().st_size
    assert 100_000 <= kept < len(tiny_repo.files["model.safetensors"])

    fake.throttle = None
    proc = run_cli(hub_env, "pull", REPO)
    assert proc.returncode == 0, explain(proc)
    assert "resumed at" in proc.stderr
    assert fake.gets(weights)[-1].range == f"bytes={kept}-"
    snapshot = next((hub_env.cache / "models--tiny--model-4bit" / "snapshots").iterdir())
    assert hashlib.sha256((snapshot / "model.safetensors").read_bytes()).hexdigest() == weights
