"""The trim stage on real agent sessions, replayed with a summarizer that always fails: batch
compaction lands each chunk's notes, so the window holds with trim or without; with trim it
takes no more batch compactions (each one a cache break and a lossy condensation), and
fewer in all (benchmarks/bench_trim.py prints the full table)."""

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
def test_with_a_failing_summarizer_the_window_holds_and_trim_spares_batch_compactions(path, capsys):
    module = bench()
    off = module.peak_occupancy(path, trim=False, failing=True)
    on = module.peak_occupancy(path, trim=True, failing=True)
    with capsys.disabled():
        print(f"\n{path.stem}: with a failing summarizer, without trim: peak {off['peak_pct']}%, end "
              f"{off['final_pct']}%, {off['batches']} batch compactions; with trim: peak {on['peak_pct']}%, end "
              f"{on['final_pct']}%, {on['batches']} ({on['results_trimmed']} results trimmed in {on['trims']} publishes)")
    assert off["absorbed"] == on["absorbed"] == 0  # no micro pass helped
    assert off["batches"] > 0 and off["final_pct"] <= 100 and on["final_pct"] <= 100
    assert on["results_trimmed"] > 0
    assert on["batches"] <= off["batches"]
