"""The pass benchmark with the tiny model on both providers: MLX in-process (4-bit) and
openai-api against a real ``mlx_lm.server``; the store (migration 3), exports, the CLI.

The tiny model never emits its end token, so every summary is cut off by the cap and
rejected: passes are ``summarize_failed`` (the third attempt on an exchange,
``exchange_skipped``), and each one generates exactly ``CAP`` tokens. That measures
what a pass costs, which is what the benchmark is for.
"""

from __future__ import annotations

import importlib.util
import json
import logging
import os
import sqlite3
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from support.servers import free_port

from hermes_tui.analysis import bench, bench_results
from hermes_tui.analysis.bench import run_bench
from hermes_tui.analysis.bench_results import BenchConfig, BenchRun, PassRow
from hermes_tui.compaction.telemetry import MICRO_PREFIX
from hermes_tui.providers.mlx.runtime import MlxRuntime
from hermes_tui.store import Store
from hermes_tui.store.schema import SCHEMA_VERSION, migrate, user_version

REPO_ROOT = Path(__file__).resolve().parents[2]
CAP = 32  # below the engine's smallest budget (64), so every pass is capped at exactly this
PASSES = 3
REJECTED = {"summarize_failed", "exchange_skipped"}
# The tiny model never stops: each pass asks twice (plain, then strict), both answers are cut
# off, and the exchange's deterministic notes are absorbed in their place.
CALLS = 2
# What the engine says of a random model's answer: mostly cut off; a cut-off reply keeps its
# whole lines, and those may then read as empty, a scrap or a copy.
MISREAD = {"cut_off", "empty", "too_short", "copied", "grown", "instructions"}
PASS_KEYS = {f for f in PassRow.__dataclass_fields__}
RUN_KEYS = {
    "id", "model", "provider", "started_at", "started", "duration_s", "load_s", "cancelled", "error",
    "machine", "settings", "outcomes", "failures", "answered", "medians", "passes",
}
MEDIAN_KEYS = set(bench_results.MEDIAN_FIELDS) | {"duration_p90_s"}


class Recorder:
    def __init__(self):
        self.events = []

    def __call__(self, progress):
        self.events.append(progress)

    @property
    def phases(self):
        return [e.phase for e in self.events]


@pytest.fixture(scope="module")
def runtime():
    return MlxRuntime()


@pytest.fixture(scope="module")
def mlx_bench(tiny_model, hf_offline_env, runtime):
    progress = Recorder()
    cfg = BenchConfig([str(tiny_model.q4)], provider="mlx", passes=PASSES, warmup=1, max_tokens=CAP)
    runs = run_bench(cfg, progress=progress, runtime=runtime)
    return runs, progress


@pytest.fixture(scope="module")
def api_bench(mlx_server):
    progress = Recorder()
    cfg = BenchConfig([mlx_server.model], provider="openai-api", base_url=mlx_server.base_url,
                      passes=PASSES, warmup=1, max_tokens=CAP, timeout=60)
    return run_bench(cfg, progress=progress), progress


def check_medians(run: BenchRun) -> None:
    answered = [p for p in run.passes if p.completion_tokens is not None]
    for name in bench_results.MEDIAN_FIELDS:
        values = [getattr(p, name) for p in answered if getattr(p, name) is not None]
        assert run.medians[name] == (statistics.median(values) if values else None), name
    durations = sorted(p.duration_s for p in answered)
    rank = (len(durations) - 1) * 0.9
    low = int(rank)
    high = min(low + 1, len(durations) - 1)
    expected = durations[low] + (durations[high] - durations[low]) * (rank - low)
    assert run.medians["duration_p90_s"] == pytest.approx(expected)
    assert min(durations) <= run.medians["duration_p90_s"] <= max(durations)


# --- MLX, in-process ------------------------------------------------------------------


def test_mlx_passes_measure_tokens_speed_and_memory(mlx_bench, tiny_model):
    runs, _ = mlx_bench
    assert len(runs) == 1
    run = runs[0]
    assert run.error is None and not run.cancelled
    assert (run.model, run.provider) == (str(tiny_model.q4), "mlx")
    assert [p.index for p in run.passes] == list(range(1, PASSES + 1))
    for p in run.passes:
        assert p.duration_s > 0 and p.summarizer_s > 0 and p.duration_s >= p.summarizer_s - 0.001
        assert p.prompt_tokens > 0 and p.exchange_tokens > 0
        assert p.completion_tokens == CALLS * CAP
        assert p.prompt_tps > 0 and p.generation_tps > 0
        assert p.peak_memory_gb > 0
        assert p.outcome == "absorbed" and p.failure in MISREAD
        assert p.summary_tokens > 0  # the notes
    # The warm-up filled the prefix cache: from the second pass on (already from the
    # first, after the warm-up) a pass prefills only what changed.
    assert all(p.cached_tokens > 0 for p in run.passes[1:])
    assert all(p.cached_tokens < p.prompt_tokens for p in run.passes)
    # Each pass absorbs the next exchange.
    assert len({p.exchange_tokens for p in run.passes}) > 1
    assert run.outcomes == {"absorbed": PASSES}
    assert set(run.failures) <= MISREAD and sum(run.failures.values()) == PASSES and run.answered == PASSES


def test_mlx_run_records_machine_settings_and_load(mlx_bench):
    run = mlx_bench[0][0]
    assert run.machine["device"] in ("cpu", "gpu")
    assert run.machine["cpu_count"] == os.cpu_count() and run.machine["platform"]
    assert run.machine["mlx"] and run.machine["mlx_lm"]
    assert run.settings["passes"] == PASSES and run.settings["warmup"] == 1 and run.settings["max_tokens"] == CAP
    assert run.settings["session"] == "bench_session.json" and run.settings["base_url"] is None
    assert run.load_s is not None and run.load_s >= 0
    assert run.duration_s >= sum(p.duration_s for p in run.passes)
    assert abs(run.started_at - time.time()) < 600


def test_mlx_medians_match_the_rows(mlx_bench):
    check_medians(mlx_bench[0][0])


def test_progress_reports_each_phase_in_order(mlx_bench):
    _, progress = mlx_bench
    assert progress.phases == ["loading", "warmup"] + ["pass"] * PASSES + ["done"]
    passes = [e for e in progress.events if e.phase == "pass"]
    assert [e.done for e in passes] == list(range(1, PASSES + 1))
    assert all(e.total == PASSES and e.last is not None and e.model_index == 1 and e.models == 1 for e in passes)
    assert progress.events[1].warmup_done == 1 and progress.events[1].warmup_total == 1


# --- openai-api, a real mlx_lm.server ---------------------------------------------------


def test_openai_api_passes_measure_tokens(api_bench, mlx_server):
    runs, progress = api_bench
    (run,) = runs
    assert run.error is None and (run.model, run.provider) == (mlx_server.model, "openai-api")
    assert len(run.passes) == PASSES
    for p in run.passes:
        assert p.duration_s > 0 and p.summarizer_s > 0
        assert p.prompt_tokens > 0 and p.completion_tokens == CALLS * CAP
        assert p.outcome == "absorbed" and p.failure in MISREAD
        # mlx_lm.server reports no timings and the memory is the server's
        assert p.prompt_tps is None and p.generation_tps is None and p.peak_memory_gb is None
    assert run.machine["device"] is None and run.settings["base_url"] == mlx_server.base_url
    assert run.load_s is None
    assert progress.phases == ["loading", "warmup"] + ["pass"] * PASSES + ["done"]
    check_medians(run)
    assert run.medians["prompt_tps"] is None and run.medians["duration_s"] > 0


def test_openai_api_refusals_are_failed_passes(hf_offline_env):
    base_url = f"http://127.0.0.1:{free_port()}/v1"
    runs = run_bench(BenchConfig(["any"], provider="openai-api", base_url=base_url, passes=2, warmup=0, timeout=5))
    (run,) = runs
    assert run.error is None and len(run.passes) == 2 and run.answered == 0
    assert all(p.failure == "refused" and p.outcome in REJECTED and p.prompt_tokens is None for p in run.passes)
    assert run.failures == {"refused": 2}
    assert all(value is None for value in run.medians.values())


def test_server_timings_are_used_when_reported():
    body = json.dumps({"timings": {"prompt_per_second": 812.5, "predicted_per_second": 41.0}})
    assert bench._server_timings(body) == bench.ServerTimings(812.5, 41.0)
    assert bench._server_timings(json.dumps({"choices": []})) is None
    assert bench._server_timings("not json") is None


# --- errors, cancel -----------------------------------------------------------------------


def test_a_model_that_cannot_load_is_an_error_for_that_model(tiny_model, hf_offline_env, runtime, tmp_path):
    progress = Recorder()
    missing = str(tmp_path / "no-such-model")
    runs = run_bench(
        BenchConfig([missing, str(tiny_model.q4)], passes=1, warmup=0, max_tokens=CAP),
        progress=progress, runtime=runtime,
    )
    assert [r.model for r in runs] == [missing, str(tiny_model.q4)]
    assert runs[0].error and missing in runs[0].error and runs[0].passes == []
    assert runs[1].error is None and len(runs[1].passes) == 1
    assert progress.phases[:2] == ["loading", "error"]


@pytest.mark.parametrize("change, message", [
    ({"models": []}, "no model"),
    ({"passes": 0}, "passes must be at least 1"),
    ({"warmup": -1}, "warmup"),
    ({"provider": "openai-api"}, "needs a base URL"),
    ({"provider": "extractive"}, "provider must be one of"),
])
def test_bad_settings_are_refused_before_any_work(change, message):
    cfg = BenchConfig(["m"])
    for key, value in change.items():
        setattr(cfg, key, value)
    with pytest.raises(bench_results.BenchError, match=message):
        run_bench(cfg)


def test_cancel_mid_run_stops_promptly_and_keeps_telemetry_out_of_the_log(
    tiny_model, hf_offline_env, runtime, caplog
):
    """Cancelled during a generation (no cap: ~260 tokens, seconds on a CPU), the run returns within
    a fraction of a second; the aborted pass is not recorded."""
    cancel = threading.Event()
    cancelled_at: list[float] = []

    def progress(p):
        if p.phase == "pass" and p.done == 1:
            def fire():
                cancelled_at.append(time.perf_counter())
                cancel.set()
            threading.Timer(0.3, fire).start()

    caplog.set_level(logging.INFO, logger="hermes_tui.compaction")
    runs = run_bench(BenchConfig([str(tiny_model.q4)], passes=1000, warmup=0), progress=progress,
                     cancel=cancel, runtime=runtime)
    returned = time.perf_counter()
    (run,) = runs
    assert run.cancelled and len(run.passes) == 1
    assert cancelled_at and returned - cancelled_at[0] < 1.0
    assert run.passes[0].completion_tokens > CAP  # the engine's own budget: no cap given
    assert not [r for r in caplog.records if r.getMessage().startswith(MICRO_PREFIX)]
    # the shared runtime is usable again afterwards
    again = run_bench(BenchConfig([str(tiny_model.q4)], passes=1, warmup=0, max_tokens=CAP), runtime=runtime)
    assert again[0].passes[0].completion_tokens == CALLS * CAP


# --- store ---------------------------------------------------------------------------------


def test_saved_runs_reload_from_the_store(mlx_bench, api_bench, hermes_home):
    runs = mlx_bench[0] + api_bench[0]
    with Store(hermes_home / "state.db") as store:
        ids = [bench_results.save_run(store, BenchRun.from_dict(r.to_dict())) for r in runs]
    assert len(set(ids)) == 2
    with Store(hermes_home / "state.db") as store:
        listed = bench_results.list_runs(store)
        assert [r.id for r in listed] == ids[::-1]  # newest first
        for run_id, original in zip(ids, runs):
            loaded = bench_results.load_run(store, run_id)
            assert loaded.to_dict() == {**original.to_dict(), "id": run_id}
        assert [r.id for r in bench_results.list_runs(store, model=runs[0].model)] == [ids[0]]
        bench_results.delete_run(store, ids[0])
        with pytest.raises(KeyError):
            bench_results.load_run(store, ids[0])


def test_migration_3_applies_to_an_existing_v2_database(tmp_path, mlx_bench):
    path = tmp_path / "v2.db"
    conn = sqlite3.connect(path, isolation_level=None)
    migrate(conn, target=2)
    assert user_version(conn) == 2
    conn.execute("INSERT INTO sessions (id, title, created, updated) VALUES ('s1', 'an old session', 1.0, 2.0)")
    for n, (role, content) in enumerate([("user", "find the zebra"), ("assistant", "the zebra is in crossing.py")]):
        conn.execute(
            "INSERT INTO messages (id, session_id, position, role, content, created) VALUES (?, 's1', ?, ?, ?, 3.0)",
            (f"m{n}", n, role, content),
        )
    conn.close()

    with Store(path) as store:
        assert user_version(store.conn) == SCHEMA_VERSION == 8
        assert store.get_session("s1").kind == "chat"  # sessions stored before kinds existed count as chats
        assert [m.content for m in store.load_active("s1")] == ["find the zebra", "the zebra is in crossing.py"]
        assert {h.message_id for h in store.search("zebra")} == {"m0", "m1"}
        assert bench_results.list_runs(store) == []
        run_id = bench_results.save_run(store, BenchRun.from_dict(mlx_bench[0][0].to_dict()))
        assert bench_results.load_run(store, run_id).passes == mlx_bench[0][0].passes
        assert store.conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"


# --- export ----------------------------------------------------------------------------------


def test_json_export_round_trips(mlx_bench, api_bench):
    runs = mlx_bench[0] + api_bench[0]
    text = bench_results.to_json(runs)
    data = json.loads(text)
    assert data["schema"] == bench_results.JSON_SCHEMA and len(data["runs"]) == 2
    for run in data["runs"]:
        assert set(run) == RUN_KEYS and set(run["medians"]) == MEDIAN_KEYS
        assert all(set(p) == PASS_KEYS for p in run["passes"])
    assert [r.to_dict() for r in bench_results.from_json(text)] == [r.to_dict() for r in runs]


def test_csv_export_round_trips(mlx_bench, api_bench, tmp_path):
    runs = mlx_bench[0] + api_bench[0]
    text = bench_results.to_csv(runs)
    lines = text.splitlines()
    assert len(lines) == 1 + 2 * PASSES and lines[0].startswith("run,run_id,model,provider,")
    back = bench_results.from_csv(text)
    assert [(r.model, r.provider) for r in back] == [(r.model, r.provider) for r in runs]
    for original, restored in zip(runs, back):
        assert restored.passes == original.passes
        assert restored.medians == original.medians
        assert restored.started_at == original.started_at
        assert restored.machine["device"] == original.machine["device"]


# --- the sample session ------------------------------------------------------------------------


def test_the_bench_sample_is_derived_from_the_demo_session():
    spec = importlib.util.spec_from_file_location("make_bench_session", REPO_ROOT / "benchmarks" / "make_bench_session.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    demo = json.loads(module.SOURCE.read_text(encoding="utf-8"))
    assert module.TARGET == bench_results.SAMPLE_SESSION
    assert bench_results.SAMPLE_SESSION.read_text(encoding="utf-8") == module.render(demo)
    messages = bench.load_session(bench_results.SAMPLE_SESSION)
    assert len(messages) == len(demo) == 182
    assert all(len(m.content) <= module.MAX_CHARS + 60 for m in messages if m.role in ("assistant", "tool"))


def test_a_session_that_runs_out_of_exchanges_starts_again(tiny_model, hf_offline_env, runtime, tmp_path):
    """A short session: system, user, one head exchange, then two exchanges and a tail."""
    def call(n):
        return [{"id": f"c{n}", "type": "function", "function": {"name": "bash", "arguments": "{}"}}]

    messages = [{"role": "system", "content": "sys"}, {"role": "user", "content": "do it"}]
    for n in range(4):
        messages.append({"role": "assistant", "content": f"step {n}", "tool_calls": call(n)})
        messages.append({"role": "tool", "tool_call_id": f"c{n}", "content": f"output {n} " * 20})
    short = tmp_path / "short.json"
    short.write_text(json.dumps(messages[:6]))  # the head, then one exchange: in the tail
    cfg = BenchConfig([str(tiny_model.q4)], passes=1, warmup=0, max_tokens=CAP, session_path=short)
    with pytest.raises(bench_results.BenchError, match="no exchange to absorb"):
        run_bench(cfg, runtime=runtime)
    # A tail budget of 80 tokens holds the last exchange (~59) only: two exchanges to absorb,
    # each left as it is at once (the tiny model's answers are rejected, and the exchange's own
    # notes are larger than it beside a first marker's scaffolding), then the walk starts again.
    path = tmp_path / "four.json"
    path.write_text(json.dumps(messages))
    cfg = BenchConfig([str(tiny_model.q4)], passes=7, warmup=0, max_tokens=CAP, session_path=path,
                      context_limit=500)
    (run,) = run_bench(cfg, runtime=runtime)
    assert [p.outcome for p in run.passes] == ["exchange_skipped"] * 7


# --- the command line --------------------------------------------------------------------------


def test_cli_bench_json(tiny_model, hf_offline_env, hermes_home):
    env = {**os.environ, **hf_offline_env, "HERMES_TUI_HOME": str(hermes_home)}
    proc = subprocess.run(
        [sys.executable, "-m", "hermes_tui.cli", "bench", "--provider", "mlx", "--model", str(tiny_model.q4),
         "--passes", "2", "--json", "--max-tokens", str(CAP)],
        capture_output=True, text=True, env=env, stdin=subprocess.DEVNULL, timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    data = json.loads(proc.stdout)
    assert data["schema"] == bench_results.JSON_SCHEMA and len(data["runs"]) == 1
    run = data["runs"][0]
    assert set(run) == RUN_KEYS and set(run["medians"]) == MEDIAN_KEYS
    assert run["model"] == str(tiny_model.q4) and run["provider"] == "mlx" and run["error"] is None
    assert len(run["passes"]) == 2 and all(set(p) == PASS_KEYS for p in run["passes"])
    assert all(p["duration_s"] > 0 and p["completion_tokens"] == CALLS * CAP and p["generation_tps"] > 0
               for p in run["passes"])
    assert run["settings"]["max_tokens"] == CAP and run["settings"]["warmup"] == 1
    # not a terminal: one progress line per pass on stderr
    assert [line for line in proc.stderr.splitlines() if " pass " in line][-1].split(": ", 1)[1].startswith("pass 2/2")
    # saved in the store
    with Store(hermes_home / "state.db") as store:
        (saved,) = bench_results.list_runs(store)
    assert saved.id == run["id"] and [p.duration_s for p in saved.passes] == [p["duration_s"] for p in run["passes"]]


def test_cli_bench_missing_model_is_one_line_and_exit_2(hf_offline_env, hermes_home, tmp_path):
    env = {**os.environ, **hf_offline_env, "HERMES_TUI_HOME": str(hermes_home)}
    missing = tmp_path / "nothing-here"
    proc = subprocess.run(
        [sys.executable, "-m", "hermes_tui.cli", "bench", "--provider", "mlx", "--model", str(missing), "--no-save"],
        capture_output=True, text=True, env=env, stdin=subprocess.DEVNULL, timeout=60,
    )
    assert proc.returncode == 2
    errors = [line for line in proc.stderr.splitlines() if line.startswith("hermes-tui bench:")]
    assert len(errors) == 1 and str(missing) in errors[0]
    assert "Traceback" not in proc.stderr


def test_the_bench_session_keeps_every_field_of_its_messages(tmp_path):
    from hermes_tui.core.transcript import wire_view
    from hermes_tui.providers.extractive.summarizer import ExtractiveSummarizer

    image = {"type": "image_url", "image_url": {"url": "data:image/png;base64,iVBORw0KGgo="}}
    session = json.loads(bench_results.SAMPLE_SESSION.read_text(encoding="utf-8"))
    first_user = next(n for n, m in enumerate(session) if m["role"] == "user")
    session[first_user] = {"role": "user", "content": [{"type": "text", "text": session[first_user]["content"]}, image]}
    path = tmp_path / "with_image.json"
    path.write_text(json.dumps(session), encoding="utf-8")

    loaded = bench.load_session(path)
    source = bench._PassSource(loaded, ExtractiveSummarizer(), BenchConfig(["extractive"], session_path=path))

    assert wire_view(source.conv.messages, merge_same_role=False) == [
        {k: v for k, v in m.items() if k != "meta"} for m in session]
    assert {m.id for m in source.conv.messages}.isdisjoint(m.id for m in loaded)  # fresh copies


def test_cli_bench_takes_the_name_a_model_was_imported_under(tiny_model, hf_offline_env, hermes_home):
    """``models import DIR --name NAME``, then NAME works wherever a model name is taken."""
    from hermes_tui.config import Config
    from hermes_tui.providers.selection import make_chat_client, make_summarizer

    env = {**os.environ, **hf_offline_env, "HERMES_TUI_HOME": str(hermes_home)}
    cli = [sys.executable, "-m", "hermes_tui.cli"]
    imported = subprocess.run([*cli, "models", "import", str(tiny_model.q4), "--name", "tiny-q4"],
                              capture_output=True, text=True, env=env, stdin=subprocess.DEVNULL, timeout=120)
    assert imported.returncode == 0, imported.stderr

    proc = subprocess.run(
        [*cli, "bench", "--provider", "mlx", "--model", "tiny-q4", "--passes", "1", "--warmup", "0",
         "--json", "--no-save", "--max-tokens", str(CAP)],
        capture_output=True, text=True, env=env, stdin=subprocess.DEVNULL, timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    (run,) = json.loads(proc.stdout)["runs"]
    assert run["model"] == "tiny-q4" and run["error"] is None and len(run["passes"]) == 1

    config = Config().with_overrides({
        "model.provider": "mlx", "model.model": "tiny-q4",
        "auxiliary.compression.provider": "mlx", "auxiliary.compression.model": "tiny-q4",
    })
    assert make_chat_client(config.model) is not None  # the chat model and /model resolve it too
    assert make_summarizer(config.auxiliary.compression) is not None
