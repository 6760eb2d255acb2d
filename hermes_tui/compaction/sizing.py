"""Work sized to the compression model: how much a call may carry so the model finishes in time.

A small model on a CPU reads a prompt at tens to hundreds of tokens a second and writes at a
third of that or less (Qwen2.5-Coder-0.5B under llama-server on two cores: ~176 and ~48;
the 1.5B: about a third of those). A defrag of a 2,000-token summary plus the middle, or a
batch chunk of 8,000 tokens, then takes minutes and fails for time, however often it is
retried. So defrag and batch take their input in pieces sized from the model's measured
speeds: a piece's prefill plus its expected output must fit in a share of the timeout.

Speeds come from the calls themselves (``ModelSpeed.observe``): the backend's own figures
where it reports them (MLX, llama.cpp's ``timings``), else a fit of duration against prompt
and generated tokens over the recent calls; a call that times out halves them. Until a model
has been measured the slowest model the app is meant for is assumed, so a first defrag on a
slow CPU is not the one that times out.

What was measured outlives the process: the session layer keeps each model's speeds in the
store, under the summarizer's ``speed_key``, once a pass that measured something is
published, and gives them back (``ModelSpeed.restore``) when a session is opened, so a new
session's first defrag or batch is sized to the model as last measured on this machine. A
summarizer with no model (``instant``) has nothing to keep.

One ``ModelSpeed`` per model: the summarizer owns it (``speed_for``), so every session and
every copy of a ``PassContext`` built on one summarizer learns into the same object.
"""

from __future__ import annotations

import math
import time
from collections import deque
from dataclasses import dataclass, field

from hermes_tui.compaction.summarizer import runs_a_model

# What is assumed before any call is measured: Qwen2.5-Coder-1.5B on two CPU cores, with
# margin (measured here: ~60 prompt and ~16 generated tokens/s).
ASSUMED_PROMPT_TPS = 50.0
ASSUMED_GENERATION_TPS = 12.0
# A piece's expected time may take this share of the timeout: the model may be slower on a
# given prompt, and the machine busy.
SHARE_OF_TIMEOUT = 0.5
# Never smaller than this: below it a consolidation has nothing to work with.
MIN_PIECE_TOKENS = 400
# Calls the speed fit looks back over.
RECENT_CALLS = 16


@dataclass
class ModelSpeed:
    """A compression model's prompt and generation speeds, tokens per second, as measured."""

    prompt_tps: float = ASSUMED_PROMPT_TPS
    generation_tps: float = ASSUMED_GENERATION_TPS
    measured: bool = False
    fixed: bool = False  # not learnt: a summarizer with no model, or a test's
    # When the speeds were last measured (Unix seconds; here or by an earlier session): what
    # the store keeps with them, and how a save knows there is something new to keep.
    measured_at: float | None = None
    _calls: deque[tuple[int, int, float]] = field(default_factory=lambda: deque(maxlen=RECENT_CALLS), repr=False)

    def observe(self, prefill_tokens: int | None, generated_tokens: int | None, seconds: float,
                prompt_tps: float | None = None, generation_tps: float | None = None) -> None:
        """Learn from one call: the backend's own speeds when it reports them, else the fit."""
        if self.fixed:
            return
        if prompt_tps and generation_tps:
            self._adopt(prompt_tps, generation_tps)
            return
        if prefill_tokens is None or generated_tokens is None or seconds <= 0:
            return
        self._calls.append((max(0, prefill_tokens), max(0, generated_tokens), seconds))
        fitted = _fit(list(self._calls))
        if fitted is not None:
            self._adopt(*fitted)

    def timed_out(self) -> None:
        """A call ran out of time: the model is slower than thought (or the machine busier)."""
        if self.fixed:
            return
        self._adopt(self.prompt_tps / 2, self.generation_tps / 2)
        self._calls.clear()

    def restore(self, prompt_tps: float, generation_tps: float, measured_at: float) -> bool:
        """Adopt speeds measured before (kept in the store) unless this object holds newer
        ones; whether it did. A fixed speed, or figures that are not positive, change nothing."""
        if self.fixed or not (_usable(prompt_tps) and _usable(generation_tps)):
            return False
        if self.measured_at is not None and self.measured_at >= measured_at:
            return False
        self._adopt(prompt_tps, generation_tps, at=measured_at)
        return True

    def _adopt(self, prompt_tps: float, generation_tps: float, *, at: float | None = None) -> None:
        self.prompt_tps, self.generation_tps, self.measured = prompt_tps, generation_tps, True
        self.measured_at = time.time() if at is None else at

    def seconds(self, input_tokens: int, output_tokens: int) -> float:
        return input_tokens / self.prompt_tps + output_tokens / self.generation_tps

    def piece_tokens(self, timeout_s: float, output_ratio: float) -> int:
        """The largest input whose prefill and ``output_ratio`` of it in output fit in
        ``SHARE_OF_TIMEOUT`` of ``timeout_s``."""
        per_token = 1 / self.prompt_tps + output_ratio / self.generation_tps
        return max(MIN_PIECE_TOKENS, int(SHARE_OF_TIMEOUT * timeout_s / per_token))


def _fit(calls: list[tuple[int, int, float]]) -> tuple[float, float] | None:
    """Least squares of ``seconds = a * prefill + b * generated`` (no intercept), a and b > 0;
    None until the calls tell the two apart."""
    sxx = sum(p * p for p, _, _ in calls)
    syy = sum(g * g for _, g, _ in calls)
    sxy = sum(p * g for p, g, _ in calls)
    sxt = sum(p * t for p, _, t in calls)
    syt = sum(g * t for _, g, t in calls)
    det = sxx * syy - sxy * sxy
    if len(calls) < 3 or det <= 1e-9 * max(sxx * syy, 1.0):
        return None
    a = (sxt * syy - syt * sxy) / det
    b = (syt * sxx - sxt * sxy) / det
    if a <= 0 or b <= 0:
        return None
    return 1 / a, 1 / b


def speed_for(summarizer: object) -> ModelSpeed:
    """The speed a pass sizes its work by: the summarizer's own ``speed`` when it keeps one.

    The summarizer owns it because the speed is the model's, and the summarizer is the
    model's one handle in a process: the app builds one per configured compression model and
    hands it to every session it opens, so what one session measures sizes the next one's
    work, and a changed model (a new summarizer) never inherits another model's figures.
    Without one: a summarizer with no model (``summarizer.runs_a_model``: the extractive one)
    takes any piece whole; any other starts from the assumed speeds.
    """
    own = getattr(summarizer, "speed", None)
    if isinstance(own, ModelSpeed):
        return own
    if not runs_a_model(summarizer):
        return instant()
    return ModelSpeed()


def instant() -> ModelSpeed:
    """A speed that takes any piece whole and learns nothing."""
    return ModelSpeed(prompt_tps=1e9, generation_tps=1e9, measured=True, fixed=True)


def _usable(tps: float) -> bool:
    return math.isfinite(tps) and tps > 0
