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
heap is unfrozen all the same, ahead of ``providers.mlx.runtime``'s exit handler (exit handlers
run last registered first, and that module is imported before the app starts), whose
collection frees what sits in cycles while MLX is still alive.

Measured with ``benchmarks/bench_ui_latency.py`` (demo session): full collections
during the run took ~107-119 ms before, 10-16 ms after.

After that, full collections run when the user is not typing (``FullCollections``): each
still walks everything made since the first screen (the views, Textual's caches, the
replies), 25-40 ms on a busy machine, and Python starts one whenever enough objects have
survived two younger collections, so in ``bench_ui_latency.py --contention`` they landed
among the keys every few seconds and made most of its slow ones. While the app runs,
Python's own full collections are off; the app asks ``FullCollections.tick`` every second
and one runs once ``EVERY_S`` have passed since the last and no key came for ``QUIET_S``,
or in any case after ``LATEST_S``. The young generations are collected as Python does.

Until the first screen the collector is held off altogether (``hold_collections``, from the start of
the app's command): start-up leaves ~54,000 tracked objects (~70,000 with a resumed
2,000-message session), and the 130-180 collections their numbers set off before the first
frame free fewer than 2,500 of them while they cost 35-90 ms of it
(``benchmarks/bench_startup.py``). ``settle_heap`` turns it back on; the app
calls it after its first screen is up and, whatever screen that is, within
``HOLD_LIMIT_S`` of mounting.
"""

from __future__ import annotations

import atexit
import gc
import time
from collections.abc import Callable

from hermes_tui.util.logs import get_logger

log = get_logger("tui")

HOLD_LIMIT_S = 2.0  # the collector is back on this long after the app mounts at the latest
NEVER = 2**31 - 1   # a threshold no count reaches: Python's own full collections are off

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


class FullCollections:
    """Full collections when the user is not typing (see the module's text): ``start`` and
    ``stop`` with the app, ``typed`` at each key, ``tick`` every second or so."""

    EVERY_S = 30.0    # at most one this often
    QUIET_S = 1.0     # ... once no key has come for this long
    LATEST_S = 120.0  # ... and one this long after the last, typing or not

    def __init__(self, clock: Callable[[], float] = time.monotonic):
        self._clock = clock
        self.last_key = self.last_full = clock()
        self.runs = 0
        self._threshold: tuple[int, int, int] | None = None

    def start(self) -> None:
        """Python's own full collections off: ours run from ``tick``."""
        if self._threshold is None:
            self._threshold = gc.get_threshold()
            gc.set_threshold(self._threshold[0], self._threshold[1], NEVER)

    def stop(self) -> None:
        """Python's full collections back as they were (the process may go on without us)."""
        if self._threshold is not None:
            gc.set_threshold(*self._threshold)
            self._threshold = None

    def typed(self) -> None:
        self.last_key = self._clock()

    def tick(self) -> bool:
        """Run a full collection if one is due now; whether one ran."""
        now = self._clock()
        since = now - self.last_full
        if since < self.EVERY_S or (now - self.last_key < self.QUIET_S and since < self.LATEST_S):
            return False
        started = time.perf_counter()
        found = gc.collect()
        self.last_full = self._clock()
        self.runs += 1
        log.debug("full collection: %d objects freed in %.0f ms", found, (time.perf_counter() - started) * 1000)
        return True
