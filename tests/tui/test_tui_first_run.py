"""The first run, as a new user meets it: nothing configured, ``App.run_test`` with the real app.

Linux (MLX without a GPU): the screen finds an OpenAI-compatible server on loopback (a
scripted server on a port the test tells it to probe) and one press later a reply from
it arrives in the chat. Mac (MLX reported as having a GPU: the GPU check is the only
thing replaced): the catalog's recommended chat and compression models download from a
local stand-in for the Hugging Face hub (serving the tiny model under their repo ids),
with progress, a cancel and a resume, and the chat and the passes then run in-process.
Hermes Agent's config, when found, is offered key by key and left byte for byte as it was.
"""

from __future__ import annotations

import hashlib
from pathlib import Path

import mlx_lm  # noqa: F401 - imported on the main thread before any worker loads a model
import pytest
from support.chat_app import REPLY, app_test, type_and_send, until
from support.fake_hub import FakeHub, FakeRepo, point_hub_at
from support.hermes_home import EXPECTED_FROM_HERMES_CONFIG as EXPECTED
from support.hermes_home import HERMES_CONFIG, write_hermes_config
from support.scripted_openai_server import MODEL_ID
from support.servers import ScriptedServer, free_port
from textual.widgets import Button, ProgressBar, Static

from hermes_tui import hub
from hermes_tui.config import load_config
from hermes_tui.hermes_agent.config import hermes_config_path
from hermes_tui.providers import selection
from hermes_tui.providers.mlx.summarizer import MlxSummarizer
from hermes_tui.tui.app import HermesApp
from hermes_tui.tui.screens.chat import ChatScreen
from hermes_tui.tui.screens.first_run import FirstRunScreen

SIZE = (120, 60)


def replies(app: HermesApp) -> list[str]:
    screen = app.chat_screen
    if screen is None:
        return []
    return [m.content for m in screen.session.conv.messages if m.role == "assistant" and m.content]


def text(widget: Static) -> str:
    return str(widget.content)


def app_on(config_path: Path, store, *ports: int) -> HermesApp:
    """The app as ``hermes-tui`` starts it on ``config_path``; ``ports``: the loopback ports its
    first run looks for servers on (none given: the usual ones)."""
    return HermesApp(load_config(config_path), store, reply_tokens=REPLY, config_path=config_path,
                     **({"server_ports": ports} if ports else {}))


async def first_run(pilot) -> FirstRunScreen:
    await until(pilot, lambda: isinstance(pilot.app.screen, FirstRunScreen), "the first-run screen")
    await pilot.pause()
    return pilot.app.screen


async def until_chatting_with(pilot, model: str, timeout: float = 60) -> None:
    """The first-run screen gone and the app's clients rebuilt from the saved settings."""
    app = pilot.app
    await until(pilot, lambda: isinstance(app.screen, ChatScreen) and getattr(app.chat, "model_name", None) == model,
                f"the chat screen with {model}", timeout=timeout)
    await pilot.pause()


async def press(pilot, button: Button) -> None:
    button.scroll_visible(animate=False)
    await pilot.pause()
    button.press()
    await pilot.pause()


@pytest.fixture
def scripted(tmp_path):
    server = ScriptedServer([{"text": ["Hello ", "from the server."]}], tmp_path / "scripted")
    yield server
    server.stop()


@app_test
async def test_linux_first_run_finds_a_loopback_server_and_the_chat_replies(hermes_home, store, scripted):
    assert not selection.gpu_available()  # this machine: MLX on the CPU backend
    config_path = hermes_home / "config.yaml"   # nothing configured: no file at all
    app = app_on(config_path, store, free_port(), scripted.port)
    async with app.run_test(size=SIZE) as pilot:
        screen = await first_run(pilot)
        assert screen.query("#cpu") and not screen.query("#recommended")  # MLX on the CPU is offered too
        await until(pilot, lambda: bool(screen.query(".server")), "the server to be found")
        button = screen.query_one("#server-0", Button)
        assert MODEL_ID in str(button.label)
        await press(pilot, button)
        await until_chatting_with(pilot, MODEL_ID)
        config = load_config(config_path)
        assert (config.model.provider, config.model.base_url, config.model.model) == (
            "openai-api", scripted.base_url, MODEL_ID)
        assert config.auxiliary.compression.base_url == scripted.base_url  # passes go to it too
        await type_and_send(pilot, "Hello?")
        await until(pilot, lambda: "Hello from the server." in replies(app), "the server's reply")
        assert not isinstance(app.screen, FirstRunScreen)
    assert scripted.requests()[-1]["messages"][-1] == {"role": "user", "content": "Hello?"}


@pytest.fixture
def mac(tiny_model, hermes_home, tmp_path, monkeypatch):
    """MLX reported as having a GPU; the hub stand-in serves the tiny model as both recommended models."""
    monkeypatch.setattr(selection, "gpu_available", lambda: True)
    catalog = hub.load_catalog()
    repos = (hub.default_chat_model(catalog).repo, hub.default_compression_model(catalog).repo)
    server = FakeHub([FakeRepo.from_folder(repo, tiny_model.q4) for repo in repos]).start()
    cache = tmp_path / "hf_cache"
    point_hub_at(server, cache, monkeypatch)
    yield server, repos, cache
    server.stop()


@app_test
async def test_mac_first_run_downloads_the_recommended_models_with_cancel_and_resume(mac, hermes_home, store):
    server, (chat_repo, compression_repo), cache = mac
    config_path = hermes_home / "config.yaml"
    app = app_on(config_path, store, free_port())
    async with app.run_test(size=SIZE) as pilot:
        screen = await first_run(pilot)
        section = screen.query_one("#recommended")
        lines = [text(s) for s in section.query(".setup-line")]
        assert any(chat_repo in line and "GB download" in line and "GB memory" in line and "licence" in line
                   for line in lines), lines
        assert any(compression_repo in line for line in lines), lines

        server.throttle = (4 * 1024, 0.02)  # ~200 KB/s: seconds to go when cancelled
        await press(pilot, section.query_one("#download", Button))
        bar = section.query_one("#download-bar", ProgressBar)
        await until(pilot, lambda: (bar.progress or 0) > 100_000, "some bytes of the weights")
        assert " / " in text(section.query_one("#download-figures", Static))
        await press(pilot, section.query_one("#cancel-download", Button))
        await until(pilot, lambda: not section.running, "the download to stop")
        assert "cancelled" in text(section.query_one("#download-status", Static))
        assert list(cache.glob("models--*/blobs/*.incomplete")), "the partial download is kept"
        download = section.query_one("#download", Button)
        assert str(download.label) == "Resume download"

        server.throttle = None
        await press(pilot, download)
        await until_chatting_with(pilot, chat_repo, timeout=120)
        assert any(r.range and r.range.startswith("bytes=") for r in server.requests if r.method == "GET")
        assert not list(cache.glob("models--*/blobs/*.incomplete"))
        config = load_config(config_path)
        assert (config.model.provider, config.model.model) == ("auto", chat_repo)
        assert (config.auxiliary.compression.provider, config.auxiliary.compression.model) == ("auto", compression_repo)
        assert isinstance(app.summarizer, MlxSummarizer) and app.summarizer.model_name == compression_repo
        await type_and_send(pilot, "Hello?")
        await until(pilot, lambda: bool(replies(app)), "a reply from the in-process model", timeout=120)


@app_test
async def test_hermes_agents_compression_settings_are_offered_and_its_file_stays_byte_identical(
    hermes_home, store, scripted
):
    hermes_file = write_hermes_config(hermes_config_path().parent, HERMES_CONFIG)
    before = hashlib.sha256(hermes_file.read_bytes()).hexdigest()
    config_path = hermes_home / "config.yaml"
    app = app_on(config_path, store, scripted.port)
    async with app.run_test(size=SIZE) as pilot:
        screen = await first_run(pilot)
        section = screen.query_one("#hermes")
        shown = text(section.query_one("#hermes-lines", Static))
        assert str(hermes_file) in text(section.query_one(".setup-title", Static))
        assert "compression.threshold: 0.6" in shown and "auxiliary.compression.model: qwen2.5:1.5b" in shown
        await press(pilot, section.query_one("#use-hermes", Button))
        await until(pilot, lambda: section.query_one("#use-hermes", Button).disabled, "the settings to be taken")
        config = load_config(config_path)
        for key, value in EXPECTED.items():
            section_name, _, leaf = key.rpartition(".")
            target = config
            for part in section_name.split("."):
                target = getattr(target, part)
            assert getattr(target, leaf) == value, key
        assert isinstance(app.screen, FirstRunScreen)  # still to choose: the chat model

        # Then a chat model: Hermes' compression settings stay (the server is not given the passes).
        await until(pilot, lambda: bool(screen.query(".server")), "the server to be found")
        await press(pilot, screen.query_one("#server-0", Button))
        await until_chatting_with(pilot, MODEL_ID)
        assert load_config(config_path).auxiliary.compression.base_url == "http://127.0.0.1:11434/v1"
    assert hashlib.sha256(hermes_file.read_bytes()).hexdigest() == before


@app_test
async def test_mac_first_run_offline_says_so_and_an_imported_model_becomes_the_chat_model(
    tiny_model, hermes_home, store, monkeypatch
):
    from hermes_tui.tui.screens.model_import_dialog import ImportDialog
    from hermes_tui.util import paths

    monkeypatch.setattr(selection, "gpu_available", lambda: True)
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    config_path = hermes_home / "config.yaml"
    app = app_on(config_path, store, free_port())
    async with app.run_test(size=SIZE) as pilot:
        screen = await first_run(pilot)
        section = screen.query_one("#recommended")
        assert "Offline" in text(section.query_one("#download-status", Static))
        assert section.query_one("#download", Button).disabled
        await press(pilot, section.query_one("#import", Button))
        await until(pilot, lambda: isinstance(app.screen, ImportDialog), "the import dialog")
        app.screen.query_one("#path").value = str(tiny_model.q4)
        app.screen.query_one("#name").value = "my-model"
        await pilot.press("enter")
        imported = str(paths.models_dir() / "my-model")
        await until_chatting_with(pilot, imported)
        assert load_config(config_path).model.model == imported


@pytest.fixture
def empty_hf_cache(tmp_path, monkeypatch):
    """An empty Hugging Face cache: only the models a test puts on disk are there."""
    from huggingface_hub import constants

    cache = tmp_path / "empty_hf_cache"
    cache.mkdir()
    monkeypatch.setattr(constants, "HF_HUB_CACHE", str(cache))
    return cache


@app_test
async def test_linux_first_run_offers_the_mlx_models_on_disk_that_run_slowly_on_the_cpu(
    tiny_model, hermes_home, store, empty_hf_cache
):
    import shutil

    from hermes_tui.util import paths

    assert not selection.gpu_available()
    on_disk = paths.models_dir() / "tiny-chat"
    shutil.copytree(tiny_model.q4, on_disk)
    config_path = hermes_home / "config.yaml"
    app = app_on(config_path, store, free_port())
    async with app.run_test(size=SIZE) as pilot:
        screen = await first_run(pilot)
        section = screen.query_one("#on-disk")
        await until(pilot, lambda: bool(section.query(".disk-model")), "the models on disk to be listed")
        assert section.display
        assert "runs slowly on the CPU" in text(section.query_one(".setup-title", Static))
        button = section.query_one("#disk-0", Button)
        assert "tiny-chat" in str(button.label)
        await press(pilot, button)
        await until_chatting_with(pilot, str(on_disk))
        config = load_config(config_path)
        assert (config.model.provider, config.model.model) == ("mlx", str(on_disk))
        assert any("runs on the CPU, slowly" in str(n.message) for n in app._notifications)
        await type_and_send(pilot, "Hello?")
        await until(pilot, lambda: bool(replies(app)), "a reply from the model on the CPU", timeout=120)


@app_test
async def test_first_run_with_no_model_on_disk_hides_that_section(hermes_home, store, empty_hf_cache):
    config_path = hermes_home / "config.yaml"
    app = app_on(config_path, store, free_port())
    async with app.run_test(size=SIZE) as pilot:
        screen = await first_run(pilot)
        section = screen.query_one("#on-disk")
        await until(pilot, lambda: not any(w.group == "first-run-disk" and not w.is_finished for w in app.workers),
                    "the listing to finish")
        await pilot.pause()
        assert not section.display and not section.query(".disk-model")


def chat_on(config_path, server) -> None:
    config_path.write_text(f"model:\n  provider: openai-api\n  base_url: {server.base_url}\n  model: {MODEL_ID}\n")


def compression_notice(app: HermesApp) -> str:
    (notice,) = [str(n.message) for n in app._notifications if n.title == "No compression model"]
    return notice


@app_test
async def test_mac_with_no_compression_model_the_notice_names_the_recommended_one_and_how_to_get_it(
    hermes_home, store, scripted, empty_hf_cache, monkeypatch
):
    monkeypatch.setattr(selection, "gpu_available", lambda: True)
    recommended = hub.default_compression_model()
    config_path = hermes_home / "config.yaml"
    chat_on(config_path, scripted)
    app = app_on(config_path, store)
    async with app.run_test(size=SIZE) as pilot:
        await until(pilot, lambda: isinstance(app.screen, ChatScreen), "the chat")
        notice = compression_notice(app)
        assert notice.startswith("Passes use the built-in extractive summarizer")
        assert f"Recommended for this Mac: {recommended.repo} ({recommended.disk_gb:.2f} GB download" in notice
        assert f"hermes-tui models pull {recommended.repo}" in notice and "/models" in notice
        assert "passes use it once it is downloaded" in notice


@app_test
async def test_linux_with_no_compression_model_the_notice_recommends_no_mlx_model(
    hermes_home, store, scripted, empty_hf_cache
):
    config_path = hermes_home / "config.yaml"
    chat_on(config_path, scripted)
    app = app_on(config_path, store)
    async with app.run_test(size=SIZE) as pilot:
        await until(pilot, lambda: isinstance(app.screen, ChatScreen), "the chat")
        assert compression_notice(app) == "Passes use the built-in extractive summarizer until one is set in /settings."
