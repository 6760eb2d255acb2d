"""Keep the garbage collector's full passes short while the app runs.

A full (generation 2) collection walks every object the collector tracks, holding the
GIL: with the app up on the bundled 182-message session that is ~220,000 objects
(Textual, the openai SDK's pydantic models, the message views) and ~100 ms, long
enough to hold up a keypress twice over (the typing-latency budget is 50 ms at p99),
and Python starts one whenever enough new objects have survived, so it lands at random,
often during a reply's layout pass.

Nearly all of those objects are there for good: the code, the config, the first
screen. ``settle_heap`` collects once, when the first chat screen is up, then freezes
what is left (``gc.freeze``): later collections skip it, so a full one walks only what
was made since. Once per process: a frozen object that later becomes cyclic garbage
(a view of the first screen, after ``/new``) stays in memory, a bounded cost paid once.
Models load on first use, after this, so their arrays are never frozen; at exit the
heap is unfrozen all the same, ahead of ``mlx_runtime``'s exit handler (exit handlers
run last registered first, and that module is imported before the app starts), whose
collection frees what sits in cycles while MLX is still alive.

Measured with ``benchmarks/bench_ui_latency.py`` (demo session): full collections
during the run took ~107-119 ms before, 10-16 ms after.
"""

from __future__ import annotations

import atexit
import gc
import time

from hermes_tui.logs import get_logger

log = get_logger("tui")

_settled = False


def settle_heap() -> None:
    """Collect, then freeze what is alive; once per process (later calls do nothing)."""
    global _settled
    if _settled:
        return
    _settled = True
    started = time.perf_counter()
    gc.collect()
    gc.freeze()
    atexit.register(gc.unfreeze)
    log.debug("heap settled: %d objects frozen in %.0f ms", gc.get_freeze_count(),
              (time.perf_counter() - started) * 1000)
