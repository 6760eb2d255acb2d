"""The MLX summarizer's timeout is a deadline for the whole call, as the OpenAI one's:
waiting for the device (a chat reply holding it), loading and generation all count.
Real mlx_lm generation with the tiny model (it never emits an end token).

A long prompt is checked between the runtime's prefill steps (about
``runtime.PREFILL_STEP_S`` each): ``test_mlx.test_a_deadline_ends_a_long_prefill_part_way``."""

from __future__ import annotations

import threading
import time

import pytest

from hermes_tui.compaction.summarizer import SummarizerError
from hermes_tui.core.failures import TIMEOUT
from hermes_tui.providers.mlx.runtime import GenerationAborted, MlxRuntime
from hermes_tui.providers.mlx.summarizer import MlxSummarizer

CHAT = [{"role": "system", "content": "You are terse."}, {"role": "user", "content": "Name three fruits."}]
TIMEOUT_S = 1.0
MARGIN_S = 3.0  # generous: the machine is shared; this bounds a hang, not the speed


class HoldDevice:
    """A chat-like generation that holds ``runtime``'s device until ``close``."""

    def __init__(self, runtime: MlxRuntime, model: str) -> None:
        loaded = runtime.load(model)
        self.holding, self.stop = threading.Event(), threading.Event()

        def run() -> None:
            try:
                runtime.generate(loaded, CHAT, max_tokens=100_000, cancel=self.stop,
                                 on_text=lambda _text: self.holding.set())
            except GenerationAborted:
                pass

        self.thread = threading.Thread(target=run)
        self.thread.start()
        assert self.holding.wait(60), "the holding generation never produced text"

    def close(self) -> None:
        self.stop.set()
        self.thread.join(30)


def timed_out(summarizer: MlxSummarizer, **kwargs) -> tuple[SummarizerError, float]:
    started = time.perf_counter()
    with pytest.raises(SummarizerError) as info:
        summarizer.complete(CHAT, **{"max_tokens": 100_000, **kwargs})
    elapsed = time.perf_counter() - started
    assert info.value.kind == TIMEOUT, str(info.value)
    assert str(info.value) == (
        f"MLX compression model {summarizer.model_name} did not answer within {TIMEOUT_S:g} s: "
        "raise auxiliary.compression.timeout or use a smaller model"
    )
    return info.value, elapsed


@pytest.mark.timeout(120)
def test_a_long_generation_ends_at_the_deadline(tiny_model):
    runtime = MlxRuntime()
    runtime.load(str(tiny_model.fp32))
    summarizer = MlxSummarizer(str(tiny_model.fp32), runtime=runtime, timeout=TIMEOUT_S)
    _, elapsed = timed_out(summarizer)
    assert TIMEOUT_S - 0.05 < elapsed < TIMEOUT_S + MARGIN_S, elapsed
    assert not runtime.busy


@pytest.mark.timeout(120)
def test_waiting_for_the_device_counts(tiny_model):
    runtime = MlxRuntime()
    held = HoldDevice(runtime, str(tiny_model.fp32))
    try:
        summarizer = MlxSummarizer(str(tiny_model.fp32), runtime=runtime, timeout=TIMEOUT_S)
        _, elapsed = timed_out(summarizer, max_tokens=8)
        assert elapsed < TIMEOUT_S + MARGIN_S, elapsed
        assert held.thread.is_alive() and runtime.waiting == 0  # the reply went on; the pass left the queue
    finally:
        held.close()


@pytest.mark.timeout(120)
def test_waiting_for_the_device_to_load_the_model_counts(tiny_model):
    """The compression model is not loaded yet and a chat reply holds the device: the
    load waits in the same queue, and that wait counts too."""
    runtime = MlxRuntime()
    held = HoldDevice(runtime, str(tiny_model.fp32))
    try:
        summarizer = MlxSummarizer(str(tiny_model.q4), runtime=runtime, timeout=TIMEOUT_S)
        _, elapsed = timed_out(summarizer, max_tokens=8)
        assert elapsed < TIMEOUT_S + MARGIN_S, elapsed
        assert held.thread.is_alive() and not runtime._mlx.queue  # the load left the queue
    finally:
        held.close()
