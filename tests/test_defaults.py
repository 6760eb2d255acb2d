"""One set of defaults: the ones README.md documents are the schema's, and every path that builds
a compactor (the app's session, compact, demo, eval, bench, the replay benchmark) runs with them."""

from __future__ import annotations

import importlib.util
import re
from pathlib import Path
from typing import Any

import pytest
import yaml

from hermes_tui.analysis import bench as analysis_bench
from hermes_tui.analysis import evaluate as analysis_evaluate
from hermes_tui.analysis.bench_results import SAMPLE_SESSION
from hermes_tui.chat.unavailable import UnavailableChat
from hermes_tui.cli import bench as cli_bench
from hermes_tui.cli import compact as cli_replay
from hermes_tui.cli import root
from hermes_tui.compaction.engine import Compactor
from hermes_tui.compaction.window import ContextWindow
from hermes_tui.config import FALLBACK_CONTEXT_LIMIT, Config, load_config
from hermes_tui.providers.context_resolution import resolve
from hermes_tui.providers.extractive.summarizer import ExtractiveSummarizer
from hermes_tui.session.wiring import open_session
from hermes_tui.store import Store
from hermes_tui.util import paths

REPO = Path(__file__).resolve().parents[1]
DEMO_SESSION = REPO / "hermes_tui" / "assets" / "demo_session.json"


def readme_config_block() -> str:
    """The YAML block of README.md's "Configuration" section."""
    text = (REPO / "README.md").read_text(encoding="utf-8")
    section = text.split("\n## Configuration\n", 1)[1]
    found = re.search(r"```yaml\n(.*?)```", section, re.S)
    assert found, "README.md: no ```yaml block in the Configuration section"
    return found.group(1)


def flat(tree: dict[str, Any], prefix: str = "") -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in tree.items():
        if isinstance(value, dict) and value:
            out.update(flat(value, f"{prefix}{key}."))
        else:
            out[f"{prefix}{key}"] = value
    return out


README = flat(yaml.safe_load(readme_config_block()))


def test_the_readme_documents_every_schema_default():
    schema = flat(Config().model_dump(mode="json"))
    assert schema.pop("mcp_servers") == {}  # documented in its own section: none by default
    assert sorted(README) == sorted(schema)
    assert {key: README[key] for key in README if README[key] != schema[key]} == {}


def test_the_readme_names_the_one_fallback_window():
    line = next(line for line in readme_config_block().splitlines() if line.strip().startswith("context_length:"))
    documented = int(re.search(r"(\d[\d,]*) when none answers", line).group(1).replace(",", ""))
    assert documented == FALLBACK_CONTEXT_LIMIT
    assert ContextWindow(limit=None).effective_limit == FALLBACK_CONTEXT_LIMIT
    # A model no source knows: resolution ends at the same number.
    unknown = Config().model.model_copy(update={"provider": "openai-api", "model": "no-such-model-anywhere"})
    assert resolve(unknown, use_cache=False).tokens == FALLBACK_CONTEXT_LIMIT


def engine_values(compactor: Compactor) -> dict[str, list[Any]]:
    """Every config value the engine holds, by the config key it comes from.

    The ``compression`` section is one object, read by the passes, their window and the
    policy alike; the compression model's cap is the one value the pass holds itself.
    """
    ctx = compactor.ctx
    assert compactor.settings is ctx.settings is ctx.window.settings is compactor.policy.settings
    values = {f"compression.{name}": [getattr(ctx.settings, name)] for name in type(ctx.settings).model_fields}
    values["auxiliary.compression.max_tokens"] = [ctx.max_tokens_cap]
    return values


def assert_readme_defaults(compactor: Compactor) -> None:
    values = engine_values(compactor)
    undocumented = sorted(set(values) - set(README))
    assert undocumented == [], f"engine settings README.md does not document: {undocumented}"
    wrong = {key: vals for key, vals in values.items() if any(v != README[key] for v in vals)}
    assert wrong == {}, f"README.md says {({k: README[k] for k in wrong})}"


class Captured:
    """Wraps a function that receives the compactor: records it, then runs the real function on a
    few messages (what is checked is the engine the path built, not the replay)."""

    def __init__(self, real, keep: int = 6):
        self.real, self.keep, self.compactors = real, keep, []

    def __call__(self, messages, *args, **kw):
        compactor = next(a for a in (*args, *kw.values()) if isinstance(a, Compactor))
        self.compactors.append(compactor)
        return self.real(messages[: self.keep], *args, **kw)

    @property
    def one(self) -> Compactor:
        assert len(self.compactors) == 1
        return self.compactors[0]


def test_the_app_session_runs_with_the_documented_defaults(hermes_home):
    with Store(paths.state_db_path()) as store:
        session = open_session(load_config(), store, chat=UnavailableChat(RuntimeError("no model")),
                               summarizer=ExtractiveSummarizer())
        assert_readme_defaults(session.compactor)


def test_compact_runs_with_the_documented_defaults(hermes_home, tmp_path, monkeypatch, capsys):
    spy = Captured(cli_replay.replay)
    monkeypatch.setattr(cli_replay, "replay", spy)
    out = tmp_path / "out.json"
    assert root.main(["compact", str(DEMO_SESSION), "--provider", "extractive", "--out", str(out)]) == 0
    assert_readme_defaults(spy.one)
    assert spy.one.ctx.window.limit == FALLBACK_CONTEXT_LIMIT  # no flag, no config, an unknown model


def test_demo_runs_with_the_documented_defaults(hermes_home, monkeypatch, capsys):
    spy = Captured(cli_replay.replay)
    monkeypatch.setattr(cli_replay, "replay", spy)
    assert root.main(["demo"]) == 0
    assert_readme_defaults(spy.one)
    assert spy.one.ctx.window.limit == FALLBACK_CONTEXT_LIMIT
    assert f"{FALLBACK_CONTEXT_LIMIT:,}-token window" in capsys.readouterr().out


def test_eval_runs_with_the_documented_defaults(hermes_home, monkeypatch, capsys):
    spy = Captured(analysis_evaluate.evaluate)
    monkeypatch.setattr(analysis_evaluate, "evaluate", spy)
    assert root.main(["eval", str(DEMO_SESSION), "--provider", "extractive"]) == 0
    assert_readme_defaults(spy.one)
    assert spy.one.ctx.window.limit == FALLBACK_CONTEXT_LIMIT


def test_bench_runs_with_the_documented_defaults(hermes_home):
    args = root.build_parser().parse_args(
        ["bench", "--model", "m", "--provider", "openai-api", "--base-url", "http://127.0.0.1:9/v1"]
    )
    cfg = cli_bench.bench_config(args)
    source = analysis_bench._PassSource(analysis_bench.load_session(SAMPLE_SESSION), ExtractiveSummarizer(), cfg)
    assert_readme_defaults(source.compactor)


def test_the_replay_benchmark_runs_with_the_documented_defaults(monkeypatch):
    spec = importlib.util.spec_from_file_location("bench_replay", REPO / "benchmarks" / "bench_replay.py")
    bench_replay = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench_replay)
    spy = Captured(bench_replay.replay)
    monkeypatch.setattr(bench_replay, "replay", spy)
    bench_replay.replay_session(DEMO_SESSION, "step", bench_replay.CONTEXT_LIMIT)
    assert_readme_defaults(spy.one)


@pytest.mark.parametrize("key, value", [("compression.micro_compact_mode", "merge"), ("compression.fact_guard", False)])
def test_a_config_value_reaches_every_copy_the_engine_holds(hermes_home, key, value):
    config = Config().with_overrides({key: value})
    with Store(paths.state_db_path()) as store:
        session = open_session(config, store, chat=UnavailableChat(RuntimeError("no model")),
                               summarizer=ExtractiveSummarizer())
    assert set(engine_values(session.compactor)[key]) == {value}
