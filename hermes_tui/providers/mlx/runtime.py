"""In-process MLX generation: each model loaded once, one generation at a time, KV prefixes reused.

The chat model and the compression model share one ``MlxRuntime`` (one device),
so when they are the same model it is loaded once, and a pass and a chat request
never run at the same time. Each caller role keeps its own prompt cache: the
tokens of its last prompt and their KV cache, so the next call prefills only the
part of its prompt that changed (for a pass: everything after the static
instructions; for the chat: the new turn).

All MLX work of a runtime (loading, generation, trimming the caches, freeing them)
runs on one long-lived thread it owns, "hermes-mlx", in the order it was asked
for; callers on any thread block until their job has run. MLX keeps per-thread
state (mlx_lm's generation stream is thread-local) that outlives the thread: every
Python thread that generated left about two OS threads behind for good (40 → 90
after 40 replies), so generating on the callers' short-lived threads leaked a
little with every reply and every pass.
"""

from __future__ import annotations

import atexit
import gc
import sys
import threading
import time
import weakref
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar, cast

from hermes_tui.hub.resolve import CANNOT_LOAD, ModelUnavailable, resolve_model_path

# Re-exported (``X as X``): part of this module's interface, read here by the chat client
# (POLL_S), the callers that catch GenerationAborted and the benchmarks.
from hermes_tui.providers.mlx.prefix import PREFILL_STEP_S as PREFILL_STEP_S
from hermes_tui.providers.mlx.prefix import (
    PrefixCache,
    keep_prefix,
    prefill,
    reuse_prefix,
    warm_prefix,
)
from hermes_tui.providers.mlx.prefix import common_prefix as common_prefix
from hermes_tui.providers.mlx.thread import POLL_S as POLL_S
from hermes_tui.providers.mlx.thread import Cancel, MlxJob, park_thread, take_thread
from hermes_tui.providers.mlx.thread import GenerationAborted as GenerationAborted

if TYPE_CHECKING:  # imported by the first load: MLX is slow to import
    import mlx.nn as nn
    from mlx_lm.tokenizer_utils import TokenizerWrapper

T = TypeVar("T")

EXIT_WAIT_S = 3.0   # at exit: how long to wait for the MLX thread to free the arrays


def import_mlx_on_main_thread() -> None:
    """Import mlx_lm now, on the calling (main) thread.

    MLX work runs on the runtime's own thread ("hermes-mlx"). When generation still
    ran on the callers' threads, a process whose first import of mlx_lm happened on
    one of them was seen to abort at exit ("terminate called without an active
    exception"; likely the thread-local destructors described at ``MlxThread``).
    Not reproduced with the tiny model (0 in 16 runs either way); kept as a
    precaution: every entry point that will generate with MLX calls this first, so
    MLX's static state is set up on the main thread.
    """
    import mlx_lm  # noqa: F401


@dataclass
class GenerationStats:
    text: str
    finish_reason: str          # "stop" (end token or stop string) | "length"
    prompt_tokens: int          # the whole prompt
    cached_tokens: int          # of which served from the prefix cache
    completion_tokens: int
    prompt_tps: float
    generation_tps: float
    peak_memory_gb: float
    duration_s: float


@dataclass
class LoadedModel:
    name: str
    path: Path
    model: nn.Module
    tokenizer: TokenizerWrapper
    config: dict[str, Any]
    prefixes: dict[str, PrefixCache] = field(default_factory=dict)


def gpu_available() -> bool:
    try:
        import mlx.core as mx

        return bool(mx.metal.is_available())
    except Exception:  # noqa: BLE001 - no MLX means no GPU
        return False


class MlxRuntime:
    """Process-wide: use ``MlxRuntime.shared()``.

    Every MLX call runs on the runtime's own thread (see the module docstring); the
    public methods may be called from any thread and block until their job has run.
    """

    _shared: MlxRuntime | None = None

    def __init__(self) -> None:
        self._models: dict[Path, LoadedModel] = {}
        self._models_lock = threading.Lock()
        self._mlx = take_thread()
        weakref.finalize(self, park_thread, self._mlx).atexit = False
        _RUNTIMES.add(self)

    def release(self) -> None:
        """Forget every loaded model and its prefix caches (the next call loads again).

        The arrays are freed on the MLX thread, after the generation running now."""
        if self._mlx.alive() and not self._mlx.on_thread():
            self._call(self._forget_models)
        else:
            self._forget_models()

    def _forget_models(self) -> None:
        with self._models_lock:
            self._models.clear()

    def _free_arrays(self) -> None:
        import mlx.core as mx

        self._forget_models()
        gc.collect()  # models and KV caches sit in reference cycles
        mx.synchronize()

    def _shut_down(self, wait: float) -> bool:
        """At exit: stop the running generation (at its next token), drop the queued jobs,
        refuse new ones and free every array on the MLX thread, which then stays parked.

        True when the arrays were freed within ``wait`` seconds."""
        worker = self._mlx
        with worker.lock:
            worker.closing = True
            queued = list(worker.queue)
        for job in queued:
            worker.drop(job, GenerationAborted("cancelled", "the MLX runtime is shutting down"))
        if not worker.alive():
            self._forget_models()
            return True
        freed = worker.submit(MlxJob(worker, self._free_arrays), at_exit=True)
        return freed.wait(wait)  # False: still busy (a long prefill step), its arrays stay

    @classmethod
    def shared(cls) -> MlxRuntime:
        if cls._shared is None:
            cls._shared = cls()
        return cls._shared

    @property
    def busy(self) -> bool:
        """Work is running on the MLX thread or queued for it."""
        return self._mlx.current is not None or bool(self._mlx.queue)

    @property
    def waiting(self) -> int:
        """Generations queued behind the running one (the UI shows it)."""
        return self._mlx.waiting

    def load(self, name: str, *, timeout: float | None = None) -> LoadedModel:
        """The model, loaded on the MLX thread the first time.

        ``timeout`` bounds the wait for the device (a generation may hold it): past it
        the load leaves the queue with GenerationAborted("timeout"). A load that has
        started runs to its end."""
        path = resolve_model_path(name).resolve()
        with self._models_lock:
            loaded = self._models.get(path)
        return loaded if loaded is not None else self._call(lambda: self._load_once(name, path), timeout=timeout)

    def loaded(self, name: str) -> LoadedModel | None:
        """The model if it is loaded already (never loads it)."""
        try:
            path = resolve_model_path(name).resolve()
        except ModelUnavailable:
            return None
        with self._models_lock:
            return self._models.get(path)

    def _load_once(self, name: str, path: Path) -> LoadedModel:
        with self._models_lock:  # loads run one after the other: the first one fills it
            if path in self._models:
                return self._models[path]
        loaded = self._load(name, path)
        with self._models_lock:
            return self._models.setdefault(path, loaded)

    def _call(self, fn: Callable[[], T], *, timeout: float | None = None) -> T:
        deadline = time.perf_counter() + timeout if timeout else None
        return self._mlx.submit(MlxJob(self._mlx, fn, deadline=deadline, timeout=timeout)).result()

    def _load(self, name: str, path: Path) -> LoadedModel:
        import mlx.core as mx
        from mlx_lm import load

        try:
            # With return_config the config comes third (mlx_lm types both shapes as one union).
            model, tokenizer, config = cast(
                "tuple[nn.Module, TokenizerWrapper, dict[str, Any]]", load(str(path), return_config=True))
        except Exception as exc:  # noqa: BLE001 - mlx_lm raises many kinds; one clear message
            raise ModelUnavailable(
                f"{path}: cannot load the model ({type(exc).__name__}: {exc})", kind=CANNOT_LOAD, model=str(path)
            ) from None
        if not gpu_available():
            # On the CPU backend fp16/bf16 compute is tens of times slower than fp32.
            model.set_dtype(mx.float32)
        return LoadedModel(name, path, model, tokenizer, config)

    def prompt_tokens(
        self, loaded: LoadedModel, messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None = None,
    ) -> list[int]:
        return _template_tokens(loaded, messages, tools, add_generation_prompt=True)

    def generate(self, loaded: LoadedModel, messages: list[dict[str, Any]], **options: Any) -> GenerationStats:
        """Run one generation and wait for it: ``start_generation(...).result()`` (same options).

        Blocks while another generation holds the device. Raises GenerationAborted on
        cancel or timeout (the timeout counts from the call, waiting included); a
        cancel while waiting for the device returns at once.
        """
        return self.start_generation(loaded, messages, **options).result()

    def start_generation(
        self,
        loaded: LoadedModel,
        messages: list[dict[str, Any]],
        *,
        max_tokens: int,
        cache_key: str | None = None,
        stop: list[str] | None = None,
        timeout: float | None = None,
        cancel: Cancel | None = None,
        on_text: Callable[[str], None] | None = None,
        on_done: Callable[[], None] | None = None,
        tools: list[dict[str, Any]] | None = None,
    ) -> MlxJob[GenerationStats]:
        """Queue one generation and return its job (``result()`` waits for it).

        ``on_text`` receives each text segment as it is decoded (on the MLX thread);
        ``on_done`` is called once when the job ends, after its last ``on_text``.
        ``tools`` (OpenAI function specs) are rendered into the prompt by the chat template.
        """
        started = time.perf_counter()
        deadline = started + timeout if timeout else None
        tokens = self.prompt_tokens(loaded, messages, tools)  # the tokenizer only: no MLX
        worker = self._mlx

        def run() -> GenerationStats:
            return self._generate_now(loaded, tokens, max_tokens, cache_key, stop, deadline, cancel, on_text, started)

        return worker.submit(MlxJob(
            worker, run, generation=True, cancel=cancel, deadline=deadline, timeout=timeout, on_done=on_done,
        ))

    def start_warm(
        self, loaded: LoadedModel, messages: list[dict[str, Any]], *, cache_key: str,
        tools: list[dict[str, Any]] | None = None,
    ) -> MlxJob[tuple[int, int]]:
        """Queue reading ``messages`` into ``cache_key``'s prefix cache (after a compaction
        splice: the next request's start), so that request prefills only what is new. The
        job's result: (tokens reused, tokens read)."""
        tokens = _template_tokens(loaded, messages, tools, add_generation_prompt=False)
        return self._mlx.submit(MlxJob(self._mlx, lambda: warm_prefix(loaded, cache_key, tokens)))

    def _generate_now(
        self, loaded: LoadedModel, tokens: list[int], max_tokens: int, cache_key: str | None, stop: list[str] | None,
        deadline: float | None, cancel: Cancel | None, on_text: Callable[[str], None] | None, started: float,
    ) -> GenerationStats:
        import mlx.core as mx
        from mlx_lm import stream_generate

        worker = self._mlx

        def check(*_: Any) -> None:
            if (cancel is not None and cancel.is_set()) or worker.closing:
                raise GenerationAborted("cancelled", "generation cancelled")
            if deadline is not None and time.perf_counter() > deadline:
                raise GenerationAborted("timeout", f"generation took longer than {deadline - started:.0f} s")

        check()
        cache, reused = reuse_prefix(loaded, cache_key, tokens)
        mx.reset_peak_memory()
        text, finish, response = "", "length", None
        processed, prompt_tps = reused, 0.0
        prefill_started = time.perf_counter()
        try:
            for processed in prefill(loaded.model, cache, tokens, reused):  # noqa: B007 - read after the loop
                check()
            for response in stream_generate(
                loaded.model, loaded.tokenizer, mx.array(tokens[processed:]), max_tokens=max_tokens,
                prompt_cache=cache, prompt_progress_callback=check,
            ):
                if not prompt_tps:  # the first token: the prompt has been read
                    processed = len(tokens)
                    prompt_tps = (len(tokens) - reused) / max(time.perf_counter() - prefill_started, 1e-9)
                text += response.text
                if stop and (cut := _stop_at(text, stop)) is not None:
                    text, finish = text[:cut], "stop"
                    break
                if response.text and on_text is not None:
                    on_text(response.text)
                if response.finish_reason:
                    finish = response.finish_reason
                check()
        except BaseException as exc:
            if cache_key:
                loaded.prefixes.pop(cache_key, None)  # half-filled: not reusable
            if isinstance(exc, GenerationAborted):
                exc.prompt_tokens, exc.prompt_tokens_processed = len(tokens), processed
            raise
        if cache_key:
            keep_prefix(loaded, cache_key, tokens, cache)
        generated = response.generation_tokens if response else 0
        return GenerationStats(
            text=text,
            finish_reason=finish,
            prompt_tokens=len(tokens),
            cached_tokens=reused,
            completion_tokens=generated,
            prompt_tps=prompt_tps,
            generation_tps=response.generation_tps if response else 0.0,
            peak_memory_gb=response.peak_memory if response else 0.0,
            duration_s=time.perf_counter() - started,
        )


def _template_tokens(
    loaded: LoadedModel, messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None, *,
    add_generation_prompt: bool,
) -> list[int]:
    """``messages`` as the model's chat template renders them, in tokens."""
    # ``tools`` reach the Hugging Face template, which renders them its own way.
    extra = {"tools": tools} if tools else {}
    text = loaded.tokenizer.apply_chat_template(  # type: ignore[no-untyped-call]  # mlx_lm leaves it unannotated
        messages, add_generation_prompt=add_generation_prompt, tokenize=False, **extra)
    return list(loaded.tokenizer.encode(text, add_special_tokens=False))


def _stop_at(text: str, stop: list[str]) -> int | None:
    positions = [text.find(s) for s in stop if s and s in text]
    return min(positions) if positions else None


_RUNTIMES: weakref.WeakSet[MlxRuntime] = weakref.WeakSet()


@atexit.register
def _free_mlx_arrays_before_exit() -> None:
    """Free every MLX array while MLX itself is still alive.

    Models and KV caches sit in reference cycles, so without this they are freed by
    the interpreter's last collection, after MLX's own static state is gone, and the
    process aborts at exit ("terminate called without an active exception") about
    one run in three. Measured: 10 aborts in 24 runs without this, 0 in 24 with it.
    A generation still running at exit (a daemon thread's) is stopped at its next
    token first: left running into the interpreter's shutdown it aborted the process
    every time (16 in 16 runs; 0 in 16 with this). The release runs as a job on each
    runtime's MLX thread, which then stays parked (see ``MlxThread``: ending it here
    aborted ~1 pytest run in 15); a runtime still busy after EXIT_WAIT_S keeps its arrays.
    """
    if "mlx.core" not in sys.modules:
        return
    for runtime in list(_RUNTIMES):
        runtime._shut_down(EXIT_WAIT_S)
    gc.collect()
    sys.modules["mlx.core"].synchronize()
