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

Until then the collector is held off altogether (``hold_collections``, from the start of
the app's command): start-up makes some 200,000 objects that all stay, and the collections
their numbers set off find nothing to free while they cost 35-90 ms of the time to the
first frame (``benchmarks/bench_startup.py``). ``settle_heap`` turns it back on; the app
calls it after its first screen is up and, whatever screen that is, within
``HOLD_LIMIT_S`` of mounting.
"""

from __future__ import annotations

import atexit
import gc
import time

from hermes_tui.logs import get_logger

log = get_logger("tui")

HOLD_LIMIT_S = 2.0  # the collector is back on this long after the app mounts at the latest

_settled = False
_held = False


def hold_collections() -> None:
    """No automatic collections until ``settle_heap`` (or ``release_collections``)."""
    global _held
    if not _settled and gc.isenabled():
        gc.disable()
        _held = True


def release_collections() -> None:
    """The collector as it was before ``hold_collections``."""
    global _held
    if _held:
        _held = False
        gc.enable()


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
    release_collections()
    log.debug("heap settled: %d objects frozen in %.0f ms", gc.get_freeze_count(),
              (time.perf_counter() - started) * 1000)
