"""The models and benchmark screens, as a person uses them: ``App.run_test`` with the real code.

The flow the issue names runs in the real app (HermesApp, the tiny model as the chat
model in-process, a real Store, HERMES_TUI_HOME in a temp dir): open the models screen
(/models), import the tiny 4-bit MLX folder (and a GGUF file of the tiny model), set it
as the compression model (config.yaml on disk names it, and the app's compaction uses
it once the screen is left), and benchmark it (K=2, a small token cap): the results
table shows it with 2 passes and the run is saved in the store.

Downloads go to ``tests/support/fake_hub.py`` (HF_ENDPOINT points at it), serving the tiny model
under a catalog entry made for the test: progress shows, the model lands in Local; a
throttled download is cancelled (the partial file stays) and the next pull resumes it.
Delete asks first. Snapshots pin both screens at 80×24 and 160×48 with a fixed catalog,
a fixed local listing and benchmark runs with fixed, fabricated figures (saved with
``save_run`` for the picture only: live timings vary from run to run).
"""

from __future__ import annotations

import json
from pathlib import Path

import mlx_lm  # noqa: F401 - imported on the main thread before any worker loads a model
import pytest
import yaml
from support.chat_app import REPLY, ScreenApp, app_test, type_and_send, until
from support.fake_hub import FakeHub, FakeRepo
from textual.command import CommandList, CommandPalette
from textual.widgets import DataTable, Input, ProgressBar, Select, SelectionList, Static

from hermes_tui import hub
from hermes_tui.analysis import bench_results
from hermes_tui.analysis.bench_results import BenchRun, PassRow
from hermes_tui.config import Config, load_config
from hermes_tui.config.write import save_config
from hermes_tui.hub import downloads
from hermes_tui.store import Store
from hermes_tui.tui.app import HermesApp
from hermes_tui.tui.screens.bench import BenchScreen, DurationBar, model_label
from hermes_tui.tui.screens.chat import ChatScreen
from hermes_tui.tui.screens.dialogs import ConfirmDialog, ExportDialog
from hermes_tui.tui.screens.first_run import FirstRunScreen
from hermes_tui.tui.screens.model_import_dialog import ImportDialog
from hermes_tui.tui.screens.models import ModelsScreen
from hermes_tui.util import paths

SIZE = (120, 40)
CAP = 32  # tokens a benchmark call may generate: the tiny model never stops by itself
# Calls per pass: the tiny model's answers are cut off, so each pass asks again strictly, then
# absorbs the exchange's notes; a pass's generated tokens are both calls'.
CALLS = 2
T0 = 1_678_795_200.0  # 2023-03-14 12:00 UTC: the same calendar day in (nearly) every time zone
FAKE_REPO = "tiny/model-4bit"


# --- fixtures ----------------------------------------------------------------------------------


@pytest.fixture
def hf_cache(hf_offline_env, tmp_path, monkeypatch) -> Path:
    """An empty Hugging Face cache of this test's own (the listing starts empty)."""
    from huggingface_hub import constants

    cache = tmp_path / "hf_cache"
    cache.mkdir()
    monkeypatch.setattr(constants, "HF_HUB_CACHE", str(cache))
    return cache


def base_config(tiny_model) -> Config:
    """The tiny fp32 model chats; passes run on MLX too (provider mlx: the same on any machine)."""
    return Config().with_overrides({
        "model.provider": "mlx", "model.model": str(tiny_model.fp32), "model.context_length": 1024,
        "auxiliary.compression.provider": "mlx", "auxiliary.compression.model": str(tiny_model.fp32),
        "auxiliary.compression.max_tokens": CAP,
    })


@pytest.fixture
def config_path(tiny_model, hermes_home, hf_cache) -> Path:
    path = hermes_home / "config.yaml"
    save_config(base_config(tiny_model), path)
    return path


@pytest.fixture
def store(tmp_path):
    with Store(tmp_path / "state.db") as store:
        yield store


def hermes(config_path: Path, store: Store) -> HermesApp:
    return HermesApp(load_config(config_path), store, reply_tokens=REPLY, config_path=config_path)




def local_rows(screen: ModelsScreen) -> dict[str, hub.LocalModel]:
    return {m.name: m for m in screen.local}


def status(screen) -> str:
    return str(screen.query_one("#status", Static).content)


async def open_models(pilot) -> ModelsScreen:
    pilot.app.run_slash("/models")
    await until(pilot, lambda: isinstance(pilot.app.screen, ModelsScreen), "the models screen")
    await pilot.pause()
    return pilot.app.screen


async def import_folder(pilot, source: Path, name: str) -> None:
    """i, type the path and the name, Enter; wait until the import is done."""
    screen = pilot.app.screen
    await pilot.press("i")
    await until(pilot, lambda: isinstance(pilot.app.screen, ImportDialog), "the import dialog")
    dialog = pilot.app.screen
    dialog.query_one("#path", Input).value = str(source)
    dialog.query_one("#name", Input).value = name
    await pilot.press("enter")
    await until(pilot, lambda: pilot.app.screen is screen and screen.transfer is None, f"the import of {name}")
    await pilot.pause()


def run_over(screen: BenchScreen) -> bool:
    """The run has ended: its runs saved, or the status saying why not (both stay until the next run)."""
    line = screen.query_one("#status", Static)
    return not screen.running and ("Saved as run" in str(line.content) or line.has_class("-error"))


async def run_bench_screen(pilot, passes: int) -> BenchScreen:
    """Press r with K passes; wait until the run is over.

    Only for states that last: ``pilot.press`` returns once the app is idle or after ~2 s,
    and a K=2 run of the tiny model in a warm process (MLX loaded, prefix cache filled by
    an earlier test) takes about that long, so ``running`` or "pass 1/K" can come and go
    before the first look (issue 6).
    """
    screen = pilot.app.screen
    assert isinstance(screen, BenchScreen)
    screen.query_one("#passes", Input).value = str(passes)
    screen.query_one("#models", SelectionList).focus()
    await pilot.press("r")
    await until(pilot, lambda: run_over(screen), "the benchmark to finish", timeout=180)
    await pilot.pause()
    assert "Saved as run" in status(screen), status(screen)
    return screen


def table_rows(table: DataTable) -> list[list[str]]:
    return [[getattr(cell, "plain", str(cell)) for cell in table.get_row_at(i)] for i in range(table.row_count)]


# --- the flow: open, import, use, benchmark -----------------------------------------------------


@app_test
async def test_open_import_use_as_compression_model_and_benchmark_it(config_path, store, tiny_model):
    app = hermes(config_path, store)
    async with app.run_test(size=SIZE) as pilot:
        await until(pilot, lambda: isinstance(app.screen, ChatScreen), "the chat screen")
        screen = await open_models(pilot)
        assert not screen.local  # nothing here yet

        await import_folder(pilot, tiny_model.q4, "tiny-q4")
        imported = paths.models_dir() / "tiny-q4"
        assert (imported / "config.json").is_file()
        assert local_rows(screen)["tiny-q4"].source == "local"
        assert "Imported tiny-q4" in status(screen)
        assert screen.selected_local().name == "tiny-q4"  # the new model is highlighted in Local

        await pilot.press("u")
        await pilot.pause()
        on_disk = yaml.safe_load(config_path.read_text())
        assert on_disk["auxiliary"]["compression"]["model"] == str(imported)
        assert on_disk["auxiliary"]["compression"]["provider"] == "mlx"
        assert local_rows(screen)["tiny-q4"].roles == ("compression",)

        await pilot.press("b")
        await until(pilot, lambda: isinstance(app.screen, BenchScreen), "the bench screen")
        bench_screen = app.screen
        assert bench_screen.query_one("#models", SelectionList).selected == [str(imported)]
        await run_bench_screen(pilot, passes=2)

        [row] = table_rows(bench_screen.query_one("#results", DataTable))
        assert row[0] == "tiny-q4" and row[3] == "2"  # model, when, provider, passes
        [saved] = bench_results.list_runs(store)
        assert saved.model == str(imported) and len(saved.passes) == 2
        assert all(p.completion_tokens == CALLS * CAP for p in saved.passes)  # the cap held, per call
        assert saved.settings["max_tokens"] == CAP and saved.provider == "mlx"
        assert [r.id for r in bench_screen.history] == [saved.id]
        assert "Saved as run" in status(bench_screen)

        await pilot.press("escape")  # back to the models screen
        await until(pilot, lambda: app.screen is screen, "the models screen")
        await pilot.press("escape")  # back to the chat: the app reloads its clients
        await until(pilot, lambda: isinstance(app.screen, ChatScreen), "the chat screen")
        await pilot.pause()
        assert app.config.auxiliary.compression.model == str(imported)
        assert app.summarizer.model_name == str(imported)
        assert app.chat_screen.session.compactor.ctx.summarizer is app.summarizer


@app_test
async def test_import_a_gguf_file_and_make_it_the_chat_model(config_path, store, tiny_model, tmp_path):
    pytest.importorskip("gguf")
    from support.gguf_files import write_gguf

    gguf_file = write_gguf(tiny_model.fp32, tmp_path / "tiny-f32.gguf")
    app = hermes(config_path, store)
    async with app.run_test(size=SIZE) as pilot:
        await until(pilot, lambda: isinstance(app.screen, ChatScreen), "the chat screen")
        screen = await open_models(pilot)
        await import_folder(pilot, gguf_file, "tiny-gguf")
        converted = paths.models_dir() / "tiny-gguf"
        assert (converted / "config.json").is_file() and (converted / "tokenizer.json").is_file()
        assert screen.selected_local().name == "tiny-gguf"

        await pilot.press("U")
        await pilot.pause()
        assert load_config(config_path).model.model == str(converted)
        assert local_rows(screen)["tiny-gguf"].roles == ("chat",)
        await pilot.press("escape")
        await until(pilot, lambda: isinstance(app.screen, ChatScreen), "the chat screen")
        await pilot.pause()
        assert app.chat.model_name == str(converted)


@app_test
async def test_an_import_error_is_one_line_and_nothing_is_written(config_path, store, tmp_path):
    not_a_model = tmp_path / "notes.txt"
    not_a_model.write_text("hello")
    app = ScreenApp(lambda: ModelsScreen(config_path))
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        screen = app.screen
        await pilot.press("i")
        await until(pilot, lambda: isinstance(app.screen, ImportDialog), "the import dialog")
        dialog = app.screen
        dialog.query_one("#path", Input).value = str(tmp_path / "missing")
        await pilot.press("enter")
        await pilot.pause()
        assert app.screen is dialog  # the dialog says what is wrong and stays
        assert "no such file or folder" in str(dialog.query_one("#error", Static).content)
        dialog.query_one("#path", Input).value = str(not_a_model)
        await pilot.press("enter")
        await until(pilot, lambda: app.screen is screen and screen.transfer is None, "the import to fail")
        await pilot.pause()
        assert "not a GGUF file" in status(screen) and "\n" not in status(screen)
        assert screen.query_one("#status", Static).has_class("-error")
        assert not screen.local
        assert not paths.models_dir().exists() or not [p for p in paths.models_dir().iterdir()]


@app_test
async def test_first_run_open_models_leads_to_a_working_chat(tiny_model, hermes_home, hf_cache, store):
    """From nothing: no chat model configured, Open models, import one, use it for chat, chat."""
    config_path = hermes_home / "config.yaml"
    save_config(Config().with_overrides({"model.provider": "mlx", "auxiliary.compression.provider": "extractive"}),
                config_path)
    app = hermes(config_path, store)
    async with app.run_test(size=SIZE) as pilot:
        await until(pilot, lambda: isinstance(app.screen, FirstRunScreen), "the first-run screen")
        index = [action for _, action in app.screen.actions].index("models")
        # The setup offers above it (servers found on this machine's usual ports, models on
        # disk) may push the button below the fold: scroll to it first, as a user would.
        app.screen.query_one(f"#action-{index}").scroll_visible(animate=False, immediate=True)
        await pilot.pause()
        await pilot.click(f"#action-{index}")
        await until(pilot, lambda: isinstance(app.screen, ModelsScreen), "the models screen")
        await import_folder(pilot, tiny_model.q4, "first-model")
        await pilot.press("U")
        await pilot.pause()
        await pilot.press("escape")
        await until(pilot, lambda: isinstance(app.screen, ChatScreen), "the chat screen")
        await pilot.pause()
        assert not isinstance(app.screen, FirstRunScreen)
        assert app.chat.model_name == str(paths.models_dir() / "first-model")


@app_test
async def test_use_for_chat_without_a_gpu_ends_in_a_chat_not_the_first_run_screen_again(
    tiny_model, hermes_home, hf_cache, store
):
    """provider auto (the default) on a machine where MLX has no GPU: U must make the model run."""
    config_path = hermes_home / "config.yaml"
    save_config(Config().with_overrides({"auxiliary.compression.provider": "extractive"}), config_path)
    app = hermes(config_path, store)
    async with app.run_test(size=SIZE) as pilot:
        await until(pilot, lambda: isinstance(app.screen, FirstRunScreen), "the first-run screen")
        app.open_tool_screen("models")
        await until(pilot, lambda: isinstance(app.screen, ModelsScreen), "the models screen")
        await import_folder(pilot, tiny_model.q4, "cpu-model")
        await pilot.press("U")
        await pilot.pause()
        await pilot.press("escape")
        await until(pilot, lambda: isinstance(app.screen, ChatScreen), "the chat screen")
        await pilot.pause()
        assert not isinstance(app.screen, FirstRunScreen)
        assert load_config(config_path).model.provider == "mlx"
        assert app.chat.model_name == str(paths.models_dir() / "cpu-model")
        await type_and_send(pilot, "Hello")
        await until(pilot, lambda: any(m.role == "assistant" and m.content for m in app.screen.session.conv.messages),
                    "a reply from the model on the CPU", timeout=120)


@app_test
async def test_slash_bench_and_the_command_palette_open_the_screens(config_path, store):
    app = hermes(config_path, store)
    async with app.run_test(size=SIZE) as pilot:
        await until(pilot, lambda: isinstance(app.screen, ChatScreen), "the chat screen")
        await type_and_send(pilot, "/bench")
        await until(pilot, lambda: isinstance(app.screen, BenchScreen), "the bench screen")
        assert app.screen.store is store  # runs are saved in the app's store
        await pilot.press("escape")
        await until(pilot, lambda: isinstance(app.screen, ChatScreen), "the chat screen")

        await pilot.press("ctrl+p")
        await pilot.pause()
        await pilot.press(*"/models")
        await until(pilot, lambda: isinstance(app.screen, CommandPalette)
                    and app.screen.query_one(CommandList).option_count > 0, "palette hits", timeout=10)
        await pilot.press("enter")
        await until(pilot, lambda: isinstance(app.screen, ModelsScreen), "the models screen")
        await pilot.press("escape")
        await until(pilot, lambda: isinstance(app.screen, ChatScreen), "the chat screen")


@app_test
async def test_space_marks_local_models_and_b_benchmarks_the_marked_ones(config_path, store):
    for name in ("alpha", "beta", "gamma"):
        folder = paths.models_dir() / name
        folder.mkdir(parents=True)
        (folder / "config.json").write_text("{}")
    app = ScreenApp(lambda: ModelsScreen(config_path), store=store)
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.pause()
        screen = app.screen
        local = screen.query_one("#local", DataTable)
        local.focus()
        await pilot.pause()
        await pilot.press("space", "down", "down", "space")
        await pilot.pause()
        assert screen.marked == {"alpha", "gamma"}
        assert [table_rows(local)[i][0] for i in range(3)] == ["✓", "", "✓"]
        await pilot.press("b")
        await until(pilot, lambda: isinstance(app.screen, BenchScreen), "the bench screen")
        picked = app.screen.query_one("#models", SelectionList).selected
        assert picked == [str(paths.models_dir() / "alpha"), str(paths.models_dir() / "gamma")]


# --- downloads through the fake hub -------------------------------------------------------------


@pytest.fixture
def fake_hub(tiny_model, hf_cache, monkeypatch):
    """The fake hub serving the tiny 4-bit model as FAKE_REPO, the environment pointing at it."""
    from huggingface_hub import constants

    server = FakeHub([FakeRepo.from_folder(FAKE_REPO, tiny_model.q4)]).start()
    for key in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE", "HF_TOKEN"):
        monkeypatch.delenv(key, raising=False)
    monkeypatch.setenv("HF_ENDPOINT", server.url)
    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", False)
    monkeypatch.setattr(constants, "ENDPOINT", server.url)
    monkeypatch.setattr(constants, "HUGGINGFACE_CO_URL_TEMPLATE", server.url + "/{repo_id}/resolve/{revision}/{filename}")
    yield server
    server.stop()


def fake_catalog() -> list[hub.CatalogModel]:
    return [hub.CatalogModel(
        repo=FAKE_REPO, family="tiny", parameters_b=0.003, disk_gb=0.002, memory_gb=0.1, context_length=2048,
        license="mit", roles=("compression", "chat"), default_compression=True,
        notes="The tiny test model, served by the fake hub.",
    )]


def models_app(config_path: Path) -> ScreenApp:
    return ScreenApp(lambda: ModelsScreen(config_path, catalog=fake_catalog()))


@app_test
async def test_pull_shows_progress_and_the_model_lands_in_local(config_path, fake_hub, hf_cache):
    fake_hub.throttle = (16 * 1024, 0.01)  # ~1.6 MB/s: the progress is visible for a moment
    figures: list[str] = []
    app = models_app(config_path)
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.pause()
        screen = app.screen
        assert screen._state(FAKE_REPO) == ""
        await pilot.press("p")
        assert screen.transfer == "download" and screen.has_class("-busy")
        while screen.transfer is not None:
            figures.append(str(screen.query_one("#transfer-figures", Static).content))
            await pilot.pause(0.05)
        await pilot.pause()
        assert not screen.has_class("-busy")
        shown = [f for f in figures if " / " in f]
        assert shown, "no progress figures were shown"
        assert any("B/s" in f and "left" in f for f in shown), shown[-3:]
        assert screen._state(FAKE_REPO) == "●"
        model = local_rows(screen)[FAKE_REPO]
        assert model.source == "hf-cache" and model.complete
        assert screen.selected_local() == model and "is ready" in status(screen)
        assert (hub.find_local_model(FAKE_REPO).path / "model.safetensors").is_file()

        await pilot.press("u")  # a downloaded model is named by its repo id in config.yaml
        await pilot.pause()
        assert load_config(config_path).auxiliary.compression.model == FAKE_REPO
        assert app.screen is screen and screen.new_config is not None


@app_test
async def test_cancel_a_throttled_pull_keeps_the_partial_file_and_p_resumes_it(config_path, fake_hub, hf_cache):
    fake_hub.throttle = (4 * 1024, 0.02)  # ~200 KB/s: seconds to go when cancelled
    app = models_app(config_path)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        screen = app.screen
        await pilot.press("p")
        bar = screen.query_one("#transfer-bar", ProgressBar)
        await until(pilot, lambda: (bar.progress or 0) > 100_000, "some bytes of the weights")
        await pilot.press("c")
        await until(pilot, lambda: screen.transfer is None, "the download to stop")
        await pilot.pause()
        assert "cancelled" in status(screen) and "resume" in status(screen)
        partial = list(hf_cache.glob("models--*/blobs/*.incomplete"))
        assert len(partial) == 1 and partial[0].stat().st_size > 0
        assert screen._state(FAKE_REPO) == "◐"
        assert not local_rows(screen)[FAKE_REPO].complete

        fake_hub.throttle = None
        screen.query_one("#catalog", DataTable).focus()
        await pilot.press("p")
        await until(pilot, lambda: screen.transfer is None, "the resumed download")
        await pilot.pause()
        assert screen._state(FAKE_REPO) == "●"
        assert any(r.range and r.range.startswith("bytes=") for r in fake_hub.requests if r.method == "GET")
        assert not list(hf_cache.glob("models--*/blobs/*.incomplete"))


@app_test
async def test_offline_is_one_clear_line(config_path, fake_hub, monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    app = models_app(config_path)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        screen = app.screen
        await pilot.press("p")
        await until(pilot, lambda: screen.transfer is None, "the download to fail")
        await pilot.pause()
        assert "cannot reach the Hugging Face hub" in status(screen) and "HF_HUB_OFFLINE" in status(screen)
        assert screen.query_one("#status", Static).has_class("-error")


@app_test
async def test_delete_asks_first_escape_keeps_it_confirm_removes_it(config_path, fake_hub, hf_cache):
    app = models_app(config_path)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        screen = app.screen
        await pilot.press("p")
        await until(pilot, lambda: screen.transfer is None, "the download")
        await pilot.pause()
        size = local_rows(screen)[FAKE_REPO].size_bytes

        await pilot.press("d")
        await until(pilot, lambda: isinstance(app.screen, ConfirmDialog), "the confirmation")
        question = str(app.screen.query_one("#question", Static).content)
        assert FAKE_REPO in question and downloads._format_bytes(size).split()[0] in question
        await pilot.press("escape")
        await pilot.pause()
        assert app.screen is screen and FAKE_REPO in local_rows(screen)
        assert "Nothing deleted" in status(screen)

        await pilot.press("d")
        await until(pilot, lambda: isinstance(app.screen, ConfirmDialog), "the confirmation")
        await pilot.click("#confirm")
        await until(pilot, lambda: app.screen is screen, "the models screen")
        await pilot.pause()
        assert FAKE_REPO not in local_rows(screen)
        assert not (hf_cache / "models--tiny--model-4bit").exists()
        assert screen._state(FAKE_REPO) == "" and "freed" in status(screen)


# --- the benchmark screen -----------------------------------------------------------------------


@app_test
async def test_bench_cancel_keeps_the_measured_passes_and_export_writes_csv_and_json(
    config_path, store, tiny_model, tmp_path
):
    passes = 200  # far more than run before the cancel lands, even on a fast machine
    app = ScreenApp(lambda: BenchScreen([str(tiny_model.q4)], config_path=config_path, export_dir=lambda: tmp_path),
                    store=store)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        screen = app.screen
        assert screen.query_one("#models", SelectionList).selected == [str(tiny_model.q4)]
        assert screen.query_one("#provider", Select).value == "mlx"
        screen.query_one("#passes", Input).value = str(passes)
        screen.query_one("#models", SelectionList).focus()
        await pilot.press("r")
        # The bar's count only grows during a run (the label's "pass 1/K" lasts one pass).
        bar = screen.query_one("#bar", ProgressBar)
        await until(pilot, lambda: (bar.progress or 0) >= 1, "the first measured pass", timeout=120)
        await pilot.press("c")
        await until(pilot, lambda: run_over(screen), "the benchmark to stop")
        await pilot.pause()
        [run] = bench_results.list_runs(store)
        assert run.cancelled and 1 <= len(run.passes) < passes
        assert all(p.completion_tokens is None or p.completion_tokens <= CALLS * CAP for p in run.passes)
        assert screen.shown[0].cancelled and "Cancelled" in status(screen)
        [row] = table_rows(screen.query_one("#results", DataTable))
        assert row[0] == "q4 (cancelled)" and row[3] == str(len(run.passes))  # model, when, provider, passes

        def csv_rows(text: str) -> bool:
            lines = text.splitlines()  # the header, then a row per measured pass
            return lines[0].startswith("run,run_id,model") and len(lines) == 1 + len(run.passes)

        def json_runs(text: str) -> bool:
            data = json.loads(text)
            [exported] = data["runs"]
            return data["schema"] == bench_results.JSON_SCHEMA and (exported["id"], len(exported["passes"])) == (
                run.id, len(run.passes))

        for fmt, check in (("csv", csv_rows), ("json", json_runs)):
            await pilot.press("e")
            await until(pilot, lambda: isinstance(app.screen, ExportDialog), "the export dialog")
            dialog = app.screen
            if fmt == "json":
                dialog.query_one("#json").value = True
                await pilot.pause()
            dialog.query_one("#path", Input).value = f"runs.{fmt}"
            await pilot.press("enter")
            await until(pilot, lambda: app.screen is screen, "the export")
            written = tmp_path / f"runs.{fmt}"
            assert check(written.read_text()), fmt
            assert str(written) in status(screen)


@app_test
async def test_bench_on_an_openai_compatible_endpoint(config_path, store, mlx_server):
    # config.yaml's compression model is the tiny fp32 folder: the very model the server serves.
    app = ScreenApp(lambda: BenchScreen(provider="openai-api", config_path=config_path), store=store)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        screen = app.screen
        assert screen.has_class("-api")  # the base URL field shows
        assert screen.query_one("#models", SelectionList).selected == [mlx_server.model]
        screen.query_one("#base-url", Input).value = mlx_server.base_url
        await run_bench_screen(pilot, passes=1)
        [run] = bench_results.list_runs(store)
        assert run.provider == "openai-api" and run.settings["base_url"] == mlx_server.base_url
        assert len(run.passes) == 1 and run.passes[0].completion_tokens is not None
        [row] = table_rows(screen.query_one("#results", DataTable))
        assert row[2] == "openai-api" and row[3] == "1"


@app_test
async def test_bench_history_enter_shows_a_saved_run_and_space_compares(config_path, store):
    fast, slow = save_fixed_runs(store)
    app = ScreenApp(lambda: BenchScreen(config_path=config_path), store=store)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        screen = app.screen
        assert [r.id for r in screen.shown] == [slow, fast]  # the newest run of each model
        history = screen.query_one("#history", DataTable)
        history.focus()
        history.move_cursor(row=history.get_row_index(str(fast)))
        await pilot.press("enter")
        await pilot.pause()
        assert [r.id for r in screen.shown] == [fast]
        assert table_rows(screen.query_one("#results", DataTable))[0][0] == "fixture/fast-model"
        history.move_cursor(row=history.get_row_index(str(slow)))
        await pilot.press("space")
        await pilot.pause()
        assert [r.id for r in screen.shown] == [fast, slow]
        bars = list(screen.query(DurationBar))
        assert [b.value for b in bars] == [0.85, 2.9] and all(b.maximum == 2.9 for b in bars)
        await pilot.press("escape")
        await pilot.pause()
    assert app.results == [None]


@app_test
async def test_bench_refuses_to_run_without_a_model(hermes_home, hf_cache, store):
    app = ScreenApp(lambda: BenchScreen(config_path=hermes_home / "config.yaml"), store=store)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        screen = app.screen
        await pilot.press("r")
        await pilot.pause()
        assert not screen.running and "pick at least one model" in status(screen)


def test_model_label():
    assert model_label("/home/me/.hermes/models/tiny-q4") == "tiny-q4"
    assert model_label("mlx-community/Qwen2.5-0.5B-Instruct-4bit") == "mlx-community/Qwen2.5-0.5B-Instruct-4bit"
    assert model_label("mlx-community/Qwen2.5-0.5B-Instruct-4bit", short=True) == "Qwen2.5-0.5B-Instruct-4bit"


# --- snapshots ----------------------------------------------------------------------------------

SIZES = [(80, 24), (160, 48)]


def fixed_run(model: str, started: float, durations: list[float], gen_tps: float) -> BenchRun:
    """A run with fabricated figures, for the picture only (live timings differ every run)."""
    run = BenchRun(model, "mlx", started, {"processor": "fabricated for a snapshot", "device": "gpu"},
                   {"passes": len(durations), "warmup": 1, "max_tokens": None})
    run.passes = [
        PassRow(index=i, outcome="absorbed", failure=None, duration_s=d, summarizer_s=round(d * 0.95, 4),
                exchange_tokens=420, prompt_tokens=1800, cached_tokens=1500, completion_tokens=96,
                prompt_tps=2400.0, generation_tps=gen_tps, peak_memory_gb=1.25, summary_tokens=180 + 20 * i)
        for i, d in enumerate(durations, 1)
    ]
    run.medians = bench_results.medians(run.passes)
    run.duration_s = round(sum(durations) + 1.5, 4)
    return run


def save_fixed_runs(store: Store) -> tuple[int, int]:
    fast = bench_results.save_run(store, fixed_run("fixture/fast-model", T0, [0.8, 0.9, 0.85, 1.1, 0.7], 95.0))
    slow = bench_results.save_run(store, fixed_run("fixture/slow-model", T0 + 86_400, [2.8, 3.1, 2.5, 3.3, 2.9], 31.0))
    return fast, slow


@pytest.fixture
def fixed_home(hermes_home, hf_cache) -> Path:
    """One imported model of a fixed size, named as the compression model; an empty HF cache."""
    folder = paths.models_dir() / "tiny-q4"
    folder.mkdir(parents=True)
    (folder / "config.json").write_text('{"model_type": "llama"}\n')
    (folder / "model.safetensors").write_bytes(b"\0" * 1_234_567)
    config_path = hermes_home / "config.yaml"
    save_config(Config().with_overrides({"auxiliary.compression.model": str(folder)}), config_path)
    return config_path


@pytest.mark.parametrize("size", SIZES, ids=lambda s: f"{s[0]}x{s[1]}")
def test_snapshot_models(snap_compare, fixed_home, size):
    app = ScreenApp(lambda: ModelsScreen(fixed_home))
    assert snap_compare(app, terminal_size=size)


@pytest.mark.parametrize("size", SIZES, ids=lambda s: f"{s[0]}x{s[1]}")
def test_snapshot_bench(snap_compare, fixed_home, tmp_path, size):
    with Store(tmp_path / "snapshot.db") as store:
        save_fixed_runs(store)
        app = ScreenApp(lambda: BenchScreen(config_path=fixed_home), store=store)
        assert snap_compare(app, terminal_size=size)
