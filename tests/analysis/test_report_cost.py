"""The report's "where the time goes" section, worked out by hand."""

from __future__ import annotations

import json

import pytest

from hermes_tui.analysis import report
from hermes_tui.compaction.telemetry import MICRO_FIELDS, MICRO_PREFIX


def micro(outcome="absorbed", *, prefill, cached, generated, model_ms, overhead_ms, mode="append",
          prompt_tps=None, generation_tps=None):
    return {
        "event": "micro_compaction", "session_id": "s", "outcome": outcome, "tokens_delta": -100,
        "duration_ms": model_ms + overhead_ms, "mode": mode,
        "prompt_tokens": prefill + cached, "cached_tokens": cached, "completion_tokens": generated,
        "prefill_tokens": prefill, "generated_tokens": generated, "summarizer_ms": model_ms,
        "overhead_ms": overhead_ms, "prompt_tps": prompt_tps, "generation_tps": generation_tps,
    }


RECORDS = [
    # MLX passes: prefill at 500 tok/s, generation at 50 tok/s.
    micro(prefill=500, cached=1500, generated=50, model_ms=2000, overhead_ms=10, prompt_tps=500.0, generation_tps=50.0),
    micro(prefill=1000, cached=2000, generated=100, model_ms=4000, overhead_ms=30, prompt_tps=500.0,
          generation_tps=50.0),
    # A merge pass on an endpoint that reports no speeds.
    micro(prefill=3000, cached=0, generated=900, model_ms=30000, overhead_ms=20, mode="merge"),
    # Never called the model: not counted.
    {"event": "micro_compaction", "outcome": "nothing_to_absorb", "duration_ms": 1, "overhead_ms": 1},
]


def test_pass_cost_figures():
    cost = report.summarize(RECORDS)["cost"]
    assert cost["prefill_tokens"] == {"count": 3, "total": 4500, "median": 1000}
    assert cost["cached_tokens"] == {"count": 3, "total": 3500, "median": 1500}
    assert cost["generated_tokens"] == {"count": 3, "total": 1050, "median": 100}
    assert cost["summarizer_ms"] == {"count": 3, "total": 36000, "median": 4000}
    assert cost["overhead_ms"] == {"count": 3, "total": 60, "median": 20}
    # Estimated only where the backend said its speeds: 1,500 / 500 s prefill, 150 / 50 s generation.
    assert cost["split"] == {"passes": 2, "prefill_ms": pytest.approx(3000), "generation_ms": pytest.approx(3000),
                             "summarizer_ms": 6000}
    assert cost["modes"] == {"append": 2, "merge": 1}


def test_no_cost_figures_without_the_fields():
    records = [{"event": "micro_compaction", "outcome": "absorbed", "tokens_delta": -5, "duration_ms": 3}]
    assert report.summarize(records)["cost"] is None
    assert not any("where the time goes" in line for line in report.format_figures(report.summarize(records)))


def test_the_text_section(tmp_path, capsys):
    log = tmp_path / "agent.log"
    log.write_text("\n".join(f"2026-01-01 INFO hermes_tui.compaction: {MICRO_PREFIX}{json.dumps(r)}" for r in RECORDS))
    assert report.main([str(log)]) == 0
    out = capsys.readouterr().out
    section = out.split("where the time goes", 1)[1]
    assert "(passes by mode: append 2, merge 1)" in out
    lines = {line.strip().split("  ")[0]: line for line in section.splitlines() if line.strip()}
    assert "total 4,500, median 1,000 per pass  (3 passes)" in lines["prefill tokens"]
    assert "total 3,500, median 1,500 per pass" in lines["cached tokens"]
    assert "total 1,050, median 100 per pass" in lines["generated tokens"]
    assert "total 36.0s, median 4.0s per pass" in lines["model time"]
    assert "total 60ms, median 20ms per pass" in lines["engine overhead"]
    assert "the model takes 100% of pass time" in section
    assert "~50% prefill, ~50% generation" in lines["model time split"]
    assert "over 2 passes" in lines["model time split"]


def test_the_engine_logs_every_cost_field():
    for name in report.COST_FIELDS + ("mode", "prompt_tps", "generation_tps"):
        assert name in MICRO_FIELDS
