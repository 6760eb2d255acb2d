"""The in-process MLX backend with the tiny model (fp32 and 4-bit): real mlx_lm loading and generation."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time

import pytest
from helpers import agent_session

from hermes_tui.chat.client import CANCELLED, ChatDelta, ChatDone, ChatError
from hermes_tui.compaction.prompts import absorb_prompt
from hermes_tui.compaction.summarizer import SummarizerError
from hermes_tui.compaction.telemetry import MICRO_PREFIX
from hermes_tui.config import Config
from hermes_tui.core.conversation import Conversation
from hermes_tui.core.failures import TIMEOUT, UNAVAILABLE
from hermes_tui.hub.resolve import ModelUnavailable, resolve_model_path
from hermes_tui.providers.mlx.chat import MlxChatClient
from hermes_tui.providers.mlx.runtime import GenerationAborted, MlxRuntime
from hermes_tui.providers.mlx.summarizer import MlxSummarizer
from hermes_tui.session.wiring import make_compactor, make_counter

CHAT = [{"role": "system", "content": "You are terse."}, {"role": "user", "content": "Name three fruits."}]


@pytest.fixture(scope="module")
def runtime():
    return MlxRuntime()


@pytest.fixture(params=["fp32", "q4"])
def model_dir(request, tiny_model):
    return str(getattr(tiny_model, request.param))


def test_a_model_is_loaded_once_and_shared(runtime, tiny_model):
    first = runtime.load(str(tiny_model.fp32))
    again = runtime.load(str(tiny_model.fp32) + "/")  # another spelling of the same folder
    assert first is again
    chat, summarizer = MlxChatClient(str(tiny_model.fp32), runtime=runtime), MlxSummarizer(str(tiny_model.fp32), runtime=runtime)
    chat.complete(CHAT, max_tokens=2)
    summarizer.complete(CHAT, max_tokens=2)
    assert len(runtime._models) == 1


def test_cpu_compute_is_fp32(runtime, tiny_model):
    import mlx.core as mx
    from mlx.utils import tree_flatten

    loaded = runtime.load(str(tiny_model.q4))
    floats = [v.dtype for _, v in tree_flatten(loaded.model.parameters()) if mx.issubdtype(v.dtype, mx.floating)]
    assert floats and set(floats) == {mx.float32}


def test_streaming_usage_and_max_tokens(runtime, model_dir):
    client = MlxChatClient(model_dir, runtime=runtime)
    events = list(client.stream(CHAT, max_tokens=12))
    deltas, done = events[:-1], events[-1]
    assert isinstance(done, ChatDone) and all(isinstance(d, ChatDelta) for d in deltas)
    assert done.text == "".join(d.text for d in deltas)
    loaded = runtime.load(model_dir)
    usage = done.usage
    assert usage.prompt_tokens == len(runtime.prompt_tokens(loaded, CHAT))  # the chat template was applied
    assert usage.completion_tokens == 12 and usage.finish_reason == "length"  # random weights never stop
    assert usage.prompt_tps > 0 and usage.generation_tps > 0 and usage.peak_memory_gb > 0


def test_chat_template_is_chatml(runtime, tiny_model):
    loaded = runtime.load(str(tiny_model.fp32))
    text = loaded.tokenizer.apply_chat_template(CHAT, add_generation_prompt=True, tokenize=False)
    assert text.startswith("<|im_start|>system\nYou are terse.<|im_end|>")
    assert text.endswith("<|im_start|>assistant\n")


def test_cancel_stops_a_generation_in_flight(runtime, tiny_model):
    client = MlxChatClient(str(tiny_model.fp32), runtime=runtime)
    cancel = threading.Event()
    seen = 0
    started = time.perf_counter()
    with pytest.raises(ChatError) as info:
        for _event in client.stream(CHAT, max_tokens=5000, cancel=cancel):
            seen += 1
            cancel.set()
    assert info.value.kind == CANCELLED
    assert seen >= 1 and time.perf_counter() - started < 10
    assert not runtime.busy  # the device is free again
    assert client.complete(CHAT, max_tokens=3).usage.completion_tokens == 3


def test_timeout(runtime, tiny_model):
    summarizer = MlxSummarizer(str(tiny_model.fp32), runtime=runtime, timeout=0.3)
    with pytest.raises(SummarizerError) as info:
        summarizer.complete(CHAT, max_tokens=100_000)
    assert info.value.kind == TIMEOUT and "auxiliary.compression.timeout" in str(info.value)


def test_stop_strings(runtime, tiny_model):
    client = MlxChatClient(str(tiny_model.fp32), runtime=runtime)
    free = client.complete(CHAT, max_tokens=20).text
    stop = free[5:8]
    assert stop
    stopped = client.complete(CHAT, max_tokens=20, stop=[stop])
    assert stopped.usage.finish_reason == "stop" and stop not in stopped.text and free.startswith(stopped.text)


def test_one_generation_at_a_time(runtime, tiny_model):
    client = MlxChatClient(str(tiny_model.fp32), runtime=runtime)
    spans: list[tuple[float, float]] = []

    def call() -> None:
        start = time.perf_counter()
        done = client.complete(CHAT, max_tokens=40)
        spans.append((start + done.usage.duration_s - done.usage.duration_s, time.perf_counter()))

    observed_waiting = []
    threads = [threading.Thread(target=call) for _ in range(3)]
    for t in threads:
        t.start()
    while any(t.is_alive() for t in threads):
        observed_waiting.append(runtime.waiting)
        time.sleep(0.005)
    for t in threads:
        t.join()
    assert max(observed_waiting) >= 1  # callers queued behind the running generation


def test_prefix_cache_reuses_the_static_pass_instructions(tiny_model):
    runtime = MlxRuntime()
    summarizer = MlxSummarizer(str(tiny_model.fp32), runtime=runtime)
    session = agent_session(exchanges=4, size=40)
    first = summarizer.complete(absorb_prompt("", session[2:4]), max_tokens=4)
    second_prompt = absorb_prompt("- read the file.", session[4:6])
    second = summarizer.complete(second_prompt, max_tokens=4)
    loaded = runtime.load(str(tiny_model.fp32))
    system_only = runtime.prompt_tokens(loaded, second_prompt[:1])
    assert first.cached_tokens == 0
    assert second.cached_tokens >= len(system_only) - 4  # everything up to the user part
    # A cached prefix must not change the result: same tokens as a cold runtime.
    cold = MlxSummarizer(str(tiny_model.fp32), runtime=MlxRuntime()).complete(second_prompt, max_tokens=4)
    assert cold.cached_tokens == 0 and cold.text == second.text


def test_chat_follow_up_prefills_only_the_new_turn(tiny_model):
    runtime = MlxRuntime()
    client = MlxChatClient(str(tiny_model.fp32), runtime=runtime)
    first = client.complete(CHAT, max_tokens=5)
    follow_up = CHAT + [{"role": "assistant", "content": first.text}, {"role": "user", "content": "And two more?"}]
    second = client.complete(follow_up, max_tokens=5)
    assert second.usage.cached_tokens >= first.usage.prompt_tokens - 2


def test_a_pass_through_the_compactor(tiny_model, caplog):
    config = Config().with_overrides({
        "auxiliary.compression.provider": "mlx",
        "auxiliary.compression.model": str(tiny_model.q4),
        "auxiliary.compression.max_tokens": 8,
    })
    counter = make_counter(config)
    compactor = make_compactor(config, counter=counter, context_limit=8192)
    conv = Conversation(agent_session(exchanges=14, size=60), counter=counter)
    before = [m.id for m in conv.messages]
    with caplog.at_level("INFO", logger="hermes_tui.compaction"):
        report = compactor.micro_pass(conv)
    # Random weights never end an answer: it is cut off at max_tokens (or keeps no whole
    # line) and rejected; the strict retry is too, and the exchange's deterministic notes
    # are absorbed in its place.
    fields = report.fields
    assert report.outcome == "absorbed" and fields["failure"] is None
    assert (fields["written_by"], fields["model_calls"]) == ("notes", 2)
    assert len(fields["rejected"]) == 2 and set(fields["rejected"]) <= {"cut_off", "empty"}, fields["rejected"]
    assert fields["completion_tokens"] == 2 * 8 and fields["prompt_tokens"] > 100
    assert fields["aux_model"] == str(tiny_model.q4)
    assert fields["tokens_delta"] < 0 and sum(m.is_marker for m in conv.messages) == 1
    assert {m.id for m in conv.messages if not m.is_marker} < set(before)
    assert any(MICRO_PREFIX in r.getMessage() for r in caplog.records)


def test_missing_models_say_what_to_do(tmp_path, hf_offline_env):
    with pytest.raises(ModelUnavailable, match="no such model folder"):
        resolve_model_path(str(tmp_path / "nope"))
    (tmp_path / "empty").mkdir()
    with pytest.raises(ModelUnavailable, match="not an MLX model folder"):
        resolve_model_path(str(tmp_path / "empty"))
    with pytest.raises(ModelUnavailable) as info:
        resolve_model_path("mlx-community/Not-Downloaded-4bit")
    assert "mlx-community/Not-Downloaded-4bit" in str(info.value) and "download" in str(info.value)
    summarizer = MlxSummarizer(str(tmp_path / "nope"))
    with pytest.raises(SummarizerError) as err:
        summarizer.complete(CHAT, max_tokens=2)
    assert err.value.kind == UNAVAILABLE


def test_compact_with_the_mlx_provider_end_to_end(tiny_model, hermes_home, hf_offline_env, tmp_path):
    (hermes_home / "config.yaml").write_text("auxiliary:\n  compression:\n    max_tokens: 8\n")
    transcript = tmp_path / "session.json"
    transcript.write_text(json.dumps([m.to_openai() for m in agent_session(exchanges=5, size=40)]))
    proc = subprocess.run(
        [sys.executable, "-m", "hermes_tui.cli", "compact", str(transcript), "--provider", "mlx",
         "--model", str(tiny_model.q4), "--context-limit", "2048", "--turns", "step",
         "--policy", "per_exchange"],
        capture_output=True, text=True, timeout=300, env={**os.environ, "HERMES_TUI_HOME": str(hermes_home)},
    )
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout)
    assert [m["content"] for m in out if m["role"] == "user"] == [
        m["content"] for m in json.loads(transcript.read_text()) if m["role"] == "user"
    ]
    log = (hermes_home / "logs" / "agent.log").read_text()
    lines = [json.loads(line.split(MICRO_PREFIX, 1)[1]) for line in log.splitlines() if MICRO_PREFIX in line]
    called = [r for r in lines if r["outcome"] != "nothing_to_absorb"]
    # Each pass asks twice (8 tokens each, cut off), then absorbs the exchange's notes.
    assert called and all(r["completion_tokens"] == 2 * 8 and r["aux_model"] == str(tiny_model.q4) for r in called)
    assert all((r["outcome"], r["written_by"], r["model_calls"]) == ("absorbed", "notes", 2) for r in called), called
    assert all(len(r["rejected"]) == 2 and set(r["rejected"]) <= {"cut_off", "empty"} for r in called)


def test_generation_aborted_frees_the_prefix(tiny_model):
    runtime = MlxRuntime()
    loaded = runtime.load(str(tiny_model.fp32))
    cancel = threading.Event()
    cancel.set()
    with pytest.raises(GenerationAborted):
        runtime.generate(loaded, CHAT, max_tokens=5, cache_key="x", cancel=cancel)
    assert "x" not in loaded.prefixes and not runtime.busy


# --- the runtime's own MLX thread ---------------------------------------------------------


def os_threads() -> int:
    """The process's OS threads (MLX's own threads are invisible to ``threading``)."""
    return len(os.listdir("/proc/self/task"))


@pytest.mark.skipif(not os.path.isdir("/proc/self/task"), reason="counts /proc/self/task (Linux)")
def test_generations_from_fresh_threads_do_not_leave_os_threads_behind(tiny_model):
    # Generating on each caller's thread left ~2 OS threads behind per thread, for good
    # (MLX keeps per-thread streams): +60 here. On the runtime's one thread: flat.
    runtime = MlxRuntime()
    loaded = runtime.load(str(tiny_model.fp32))
    ran_on: set[str] = set()

    def once() -> None:
        runtime.generate(loaded, CHAT, max_tokens=8, on_text=lambda _: ran_on.add(threading.current_thread().name))

    def in_a_fresh_thread() -> None:
        thread = threading.Thread(target=once)
        thread.start()
        thread.join()

    in_a_fresh_thread()  # the first generation creates MLX's threads for the runtime's thread
    before = os_threads()
    for _ in range(30):
        in_a_fresh_thread()
    assert os_threads() - before <= 3
    assert ran_on == {"hermes-mlx"}


class HeldDevice:
    """A generation running on ``runtime`` that holds the device until ``close``."""

    def __init__(self, runtime: MlxRuntime, loaded) -> None:
        self.holding, self.gate, self.stop = threading.Event(), threading.Event(), threading.Event()

        def hold(_text: str) -> None:
            self.holding.set()
            self.gate.wait(30)

        def run() -> None:
            with pytest.raises(GenerationAborted):
                runtime.generate(loaded, CHAT, max_tokens=5000, cancel=self.stop, on_text=hold)

        self.thread = threading.Thread(target=run)
        self.thread.start()
        assert self.holding.wait(30), "the holding generation never produced text"

    def close(self) -> None:
        self.stop.set()
        self.gate.set()
        self.thread.join(30)


def in_a_thread(call):
    """Run ``call`` in a new thread; a dict that gets its "error" (or "value") and "seconds"."""
    outcome: dict = {}

    def run() -> None:
        started = time.perf_counter()
        try:
            outcome["value"] = call()
        except BaseException as exc:  # noqa: BLE001 - examined by the test
            outcome["error"] = exc
        outcome["seconds"] = time.perf_counter() - started

    thread = threading.Thread(target=run)
    thread.start()
    return thread, outcome


def wait_for(predicate, what: str, limit: float = 10.0) -> None:
    end = time.monotonic() + limit
    while not predicate():
        assert time.monotonic() < end, what
        time.sleep(0.005)


def test_a_queued_generation_ends_at_once_on_cancel_or_timeout(tiny_model):
    runtime = MlxRuntime()
    loaded = runtime.load(str(tiny_model.fp32))
    held = HeldDevice(runtime, loaded)
    try:
        # cancelled while waiting for the device
        cancel = threading.Event()
        thread, outcome = in_a_thread(lambda: runtime.generate(loaded, CHAT, max_tokens=5, cancel=cancel))
        wait_for(lambda: runtime.waiting == 1, "the generation never queued")
        cancel.set()
        cancelled_at = time.perf_counter()
        thread.join(5)
        assert time.perf_counter() - cancelled_at < 1
        assert isinstance(outcome["error"], GenerationAborted) and outcome["error"].reason == "cancelled"
        assert runtime.waiting == 0 and runtime.busy  # the holding one still runs

        # its timeout counts the time spent waiting
        thread, outcome = in_a_thread(lambda: runtime.generate(loaded, CHAT, max_tokens=5, timeout=0.3))
        thread.join(5)
        assert isinstance(outcome["error"], GenerationAborted) and outcome["error"].reason == "timeout"
        assert outcome["seconds"] < 1.3 and runtime.waiting == 0

        # a chat reply waiting behind the device, stopped by its user
        client = MlxChatClient(str(tiny_model.fp32), runtime=runtime)
        cancel = threading.Event()
        thread, outcome = in_a_thread(lambda: list(client.stream(CHAT, max_tokens=5, cancel=cancel)))
        wait_for(lambda: runtime.waiting == 1, "the reply never queued")
        cancel.set()
        cancelled_at = time.perf_counter()
        thread.join(5)
        assert time.perf_counter() - cancelled_at < 1
        assert isinstance(outcome["error"], ChatError) and outcome["error"].kind == CANCELLED
    finally:
        held.close()
    assert not held.thread.is_alive() and not runtime.busy
    assert runtime.generate(loaded, CHAT, max_tokens=3).completion_tokens == 3  # the queue still runs


# The tiny model prefills ~200 tokens/s on this project's CPU test machines, so a ~3K-token
# prompt takes ~15 s to read: long enough to stop it part-way. mlx_lm reads a prompt in
# steps of 2048 tokens by default and a step cannot be interrupted.
LONG_PROMPT_TOKENS = 3000
MLX_LM_DEFAULT_PREFILL_STEP = 2048


def long_prompt(runtime: MlxRuntime, loaded, tokens: int = LONG_PROMPT_TOKENS) -> list[dict]:
    """A chat whose prompt is at least ``tokens`` tokens long (and not much longer)."""
    lines = []
    while True:
        messages = [{"role": "system", "content": "You are terse."},
                    {"role": "user", "content": "\n".join(lines) or "Summarise this build log."}]
        if len(runtime.prompt_tokens(loaded, messages)) >= tokens:
            return messages
        lines.append(f"step {len(lines)}: compiling module_{len(lines)}.c with -O2, 3 warnings, error E{len(lines) % 97}")


def started_running(job) -> None:
    wait_for(lambda: job.state != "queued", "the generation never started", limit=30)


@pytest.mark.timeout(180)
def test_cancel_during_a_long_prefill_stops_before_the_prompt_is_read(tiny_model):
    runtime = MlxRuntime()
    loaded = runtime.load(str(tiny_model.fp32))
    messages = long_prompt(runtime, loaded)
    cancel = threading.Event()
    job = runtime.start_generation(loaded, messages, max_tokens=8, cancel=cancel)
    started_running(job)
    time.sleep(0.5)
    cancel.set()
    cancelled_at = time.perf_counter()
    assert job.wait(60), "the cancelled prefill never ended"
    stopped_in = time.perf_counter() - cancelled_at
    with pytest.raises(GenerationAborted) as info:
        job.result()
    aborted = info.value
    assert aborted.reason == "cancelled"
    assert aborted.prompt_tokens == len(runtime.prompt_tokens(loaded, messages)) >= LONG_PROMPT_TOKENS
    assert 0 < aborted.prompt_tokens_processed < MLX_LM_DEFAULT_PREFILL_STEP  # stopped inside the first default step
    assert stopped_in < 5, stopped_in  # bounds a hang; the benchmark measures the figure
    assert not runtime.busy
    assert runtime.generate(loaded, CHAT, max_tokens=3).completion_tokens == 3


@pytest.mark.timeout(180)
def test_a_deadline_ends_a_long_prefill_part_way(tiny_model):
    runtime = MlxRuntime()
    loaded = runtime.load(str(tiny_model.fp32))
    messages = long_prompt(runtime, loaded)
    started = time.perf_counter()
    with pytest.raises(GenerationAborted) as info:
        runtime.generate(loaded, messages, max_tokens=8, timeout=1.0)
    elapsed = time.perf_counter() - started
    assert info.value.reason == "timeout"
    assert info.value.prompt_tokens_processed < MLX_LM_DEFAULT_PREFILL_STEP
    assert elapsed < 6, elapsed


@pytest.mark.timeout(300)
def test_a_prompt_read_in_steps_generates_what_mlx_lm_generates(tiny_model):
    from mlx_lm import generate as mlx_lm_generate

    runtime = MlxRuntime()
    loaded = runtime.load(str(tiny_model.fp32))
    messages = long_prompt(runtime, loaded, tokens=1200)
    ours = runtime.generate(loaded, messages, max_tokens=12)
    tokens = runtime.prompt_tokens(loaded, messages)
    theirs = runtime._call(lambda: mlx_lm_generate(loaded.model, loaded.tokenizer, tokens, max_tokens=13))
    # mlx_lm.generate stops one token short of stream_generate's count for the same max_tokens
    assert ours.prompt_tokens == len(tokens) and ours.completion_tokens == 12
    assert theirs.startswith(ours.text) and ours.text, (ours.text, theirs)
    assert ours.prompt_tps > 0


EXIT_SCRIPT = """
import sys, threading
from hermes_tui.providers.mlx.runtime import MlxRuntime
runtime, model = MlxRuntime(), sys.argv[1]
chat = [{"role": "user", "content": "hello"}]
def reply(max_tokens, on_text=None):
    try:
        runtime.generate(runtime.load(model), chat, max_tokens=max_tokens, cache_key="chat", on_text=on_text)
    except Exception as exc:
        print(type(exc).__name__, exc)
threads = [threading.Thread(target=reply, args=(8,)) for _ in range(3)]
for t in threads:
    t.start()
for t in threads:
    t.join()
started = threading.Event()
threading.Thread(target=reply, args=(100_000, lambda _: started.set()), daemon=True).start()
assert started.wait(60)
print("exiting mid-generation", flush=True)
"""


def test_the_process_exits_cleanly_even_mid_generation(tiny_model, tmp_path):
    # MLX used from several threads, then exit while a daemon thread's generation runs:
    # before the runtime stopped it and freed the arrays at exit, this aborted every time
    # ("terminate called without an active exception", exit code 134).
    script = tmp_path / "exit.py"
    script.write_text(EXIT_SCRIPT)
    proc = subprocess.run([sys.executable, str(script), str(tiny_model.fp32)], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "exiting mid-generation" in proc.stdout and "GenerationAborted" in proc.stdout


def test_a_queued_generation_stops_waiting_when_cancelled(runtime, tiny_model):
    """A reply stopped while a pass holds the device ends at once, not when the pass ends."""
    loaded = runtime.load(str(tiny_model.fp32))
    holder_started = threading.Event()
    holder_cancel = threading.Event()
    holder = threading.Thread(target=lambda: _generate_until_cancelled(runtime, loaded, holder_started, holder_cancel))
    holder.start()
    try:
        assert holder_started.wait(60), "the first generation never produced text"
        queued_cancel = threading.Event()
        outcome: dict = {}

        def queued() -> None:
            try:
                runtime.generate(loaded, CHAT, max_tokens=8, cancel=queued_cancel)
            except GenerationAborted as exc:
                outcome["reason"] = exc.reason
            outcome["ended"] = time.perf_counter()

        waiter = threading.Thread(target=queued)
        waiter.start()
        deadline = time.monotonic() + 10
        while runtime.waiting == 0 and time.monotonic() < deadline:
            time.sleep(0.01)
        assert runtime.waiting == 1 and runtime.busy
        cancelled_at = time.perf_counter()
        queued_cancel.set()
        waiter.join(10)
        assert outcome.get("reason") == "cancelled"
        assert outcome["ended"] - cancelled_at < 1.0
        assert holder.is_alive() and runtime.busy  # the other generation went on
    finally:
        holder_cancel.set()
        holder.join(30)
    assert not runtime.busy and runtime.waiting == 0


def _generate_until_cancelled(runtime, loaded, started: threading.Event, cancel: threading.Event) -> None:
    try:
        runtime.generate(loaded, CHAT, max_tokens=100_000, cancel=cancel, on_text=lambda _: started.set())
    except GenerationAborted:
        pass
