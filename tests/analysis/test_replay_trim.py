"""The trim stage on real agent sessions: replayed with a summarizer that always fails, the
window holds lower with trim than without (benchmarks/bench_trim.py prints the full table)."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
SESSIONS = sorted((REPO.parent / "shared" / "data" / "sessions").glob("*.json"))


def bench():
    spec = importlib.util.spec_from_file_location("bench_trim", REPO / "benchmarks" / "bench_trim.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.skipif(not SESSIONS, reason="no real sessions next to the repository (../shared/data/sessions)")
@pytest.mark.parametrize("path", SESSIONS, ids=[p.stem for p in SESSIONS])
def test_trim_keeps_peak_occupancy_lower_while_the_summarizer_fails(path, capsys):
    module = bench()
    off = module.peak_occupancy(path, trim=False, failing=True)
    on = module.peak_occupancy(path, trim=True, failing=True)
    with capsys.disabled():
        print(f"\n{path.stem}: peak occupancy with a failing summarizer {off['peak_pct']}% without trim, "
              f"{on['peak_pct']}% with ({on['results_trimmed']} results trimmed in {on['trims']} publishes)")
    assert off["absorbed"] == on["absorbed"] == 0 and off["batches"] == on["batches"] == 0  # nothing else helped
    assert on["results_trimmed"] > 0
    assert on["peak_pct"] < off["peak_pct"]
    assert on["final_pct"] < off["final_pct"]
