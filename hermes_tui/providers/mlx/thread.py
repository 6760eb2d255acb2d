"""The one thread that runs a runtime's MLX work, and the jobs queued on it.

MLX keeps per-thread state (mlx_lm's generation stream is thread-local) that outlives
the thread, so every job of a runtime (loading, generation, trimming caches, freeing
them) runs on one long-lived thread, "hermes-mlx", in the order it was asked for;
callers on any thread block until their job has run.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import deque
from collections.abc import Callable
from typing import Any, Generic, Protocol, TypeVar, cast

THREAD_NAME = "hermes-mlx"
POLL_S = 0.05       # how often a caller whose job waits in the queue looks at its cancel event
_QUEUED, _RUNNING, _DONE = "queued", "running", "done"

T = TypeVar("T")


class Cancel(Protocol):
    """What a job's cancel can be: anything with ``is_set()`` (a ``threading.Event``)."""

    def is_set(self) -> bool: ...


class GenerationAborted(Exception):
    """Cancelled or timed out; ``reason`` is "cancelled" or "timeout".

    A generation that had started says how far it got: ``prompt_tokens`` (the whole
    prompt) and ``prompt_tokens_processed`` (those in the KV cache when it stopped,
    prefix-cache hits included); both None when it never started.
    """

    def __init__(self, reason: str, message: str):
        super().__init__(message)
        self.reason = reason
        self.prompt_tokens: int | None = None
        self.prompt_tokens_processed: int | None = None


class MlxJob(Generic[T]):
    """One piece of work queued for a runtime's MLX thread: a handle to wait on.

    A job still in the queue when its ``cancel`` is set or its deadline passes is
    dropped there and ends with GenerationAborted at once: it never waits for the
    device. Once running, a generation checks both itself at every token.
    """

    def __init__(
        self, worker: MlxThread, fn: Callable[[], T], *, generation: bool = False,
        cancel: Cancel | None = None, deadline: float | None = None, timeout: float | None = None,
        on_done: Callable[[], None] | None = None,
    ) -> None:
        self._worker = worker
        self._fn: Callable[[], T] | None = fn
        self.generation = generation  # counted in ``waiting`` while queued
        self.cancel = cancel
        self.deadline = deadline      # time.perf_counter() value
        self.timeout = timeout
        self.on_done = on_done        # called once, when the job ends (on whichever thread ends it)
        self.state = _QUEUED
        self.value: T | None = None
        self.error: BaseException | None = None
        self.done = threading.Event()

    def expire(self) -> bool:
        """Drop the job if it is still queued and cancelled or past its deadline; True when done."""
        if self.state == _QUEUED:
            if self.cancel is not None and self.cancel.is_set():
                self._worker.drop(self, GenerationAborted("cancelled", "generation cancelled"))
            elif self.deadline is not None and time.perf_counter() > self.deadline:
                self._worker.drop(self, GenerationAborted(
                    "timeout", f"waited {self.timeout or 0:.0f} s for the model to be free"))
        return self.done.is_set()

    def wait(self, timeout: float | None = None) -> bool:
        """Block until the job has ended (or ``timeout`` s passed); True when it has."""
        end = None if timeout is None else time.monotonic() + timeout
        while not self.expire():
            step = None if self.cancel is None and self.deadline is None else POLL_S
            if end is not None:
                left = end - time.monotonic()
                if left <= 0:
                    return False
                step = left if step is None else min(step, left)
            self.done.wait(step)
        return True

    def result(self) -> T:
        """Wait for the job; its return value, or the exception it raised."""
        self.wait()
        if self.error is not None:
            raise self.error
        return cast(T, self.value)  # no error: ``_run`` returned, and set the value

    def _run(self) -> None:
        try:
            if self._fn is None:
                raise RuntimeError("an MLX job runs once")
            self.value = self._fn()
        except BaseException as exc:  # noqa: BLE001 - handed to the waiting caller
            self.error = exc
        self._fn = None  # drop what the closure holds (prompt, on_text, …)

    def _finish(self) -> None:
        self.state = _DONE
        self.done.set()
        if self.on_done is not None:
            try:
                self.on_done()
            except Exception:
                logging.getLogger(__name__).exception("on_done callback of an MLX job failed")


class MlxThread:
    """The one thread that runs a runtime's MLX work, jobs in the order they came.

    The thread never ends. A Python thread that used MLX runs MLX's thread-local
    destructors when it ends, and they take the GIL: if that happens while the
    interpreter is shutting down the process aborts ("terminate called without an
    active exception"; seen with a core dump, a Python thread ending in
    ``__call_tls_dtors`` → ``PyGILState_Ensure`` → ``pthread_exit``). So a runtime
    that is collected hands its thread to the next runtime instead (``take_thread``),
    and at exit the thread is left parked, holding no Python state.

    Kept apart from ``MlxRuntime`` so the thread holds no reference to the runtime.
    """

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.wakeup = threading.Condition(self.lock)
        self.queue: deque[MlxJob[Any]] = deque()
        self.thread: threading.Thread | None = None
        self.current: MlxJob[Any] | None = None
        self.waiting = 0       # generations in the queue
        self.closing = False   # at exit: the running generation stops, new jobs are refused

    def on_thread(self) -> bool:
        return self.thread is not None and threading.current_thread() is self.thread

    def alive(self) -> bool:
        return self.thread is not None and self.thread.is_alive()

    def submit(self, job: MlxJob[T], *, at_exit: bool = False) -> MlxJob[T]:
        if self.on_thread():  # asked from a job (e.g. from on_text): run it now, not behind itself
            job.state = _RUNNING
            job._run()
            job._finish()
            return job
        with self.lock:
            if self.closing and not at_exit:
                raise GenerationAborted("cancelled", "the MLX runtime is shutting down")
            if not self.alive():
                self.thread = threading.Thread(target=self._serve, name=THREAD_NAME, daemon=True)
                self.thread.start()
            self.queue.append(job)
            if job.generation:
                self.waiting += 1
            self.wakeup.notify()
        return job

    def drop(self, job: MlxJob[Any], error: BaseException) -> None:
        """End a job that is still queued, with ``error``; nothing if it has started."""
        with self.lock:
            if job.state != _QUEUED:
                return
            self.queue.remove(job)
            if job.generation:
                self.waiting -= 1
            job.error = error
            job.state = _DONE
        job._finish()

    def _serve(self) -> None:
        while True:
            with self.lock:
                while not self.queue:
                    self.wakeup.wait()
                job = self.queue[0]
            job.expire()  # cancelled while queued, with nobody polling it: dropped now
            with self.lock:
                if job.state != _QUEUED:
                    continue
                self.queue.popleft()
                if job.generation:
                    self.waiting -= 1
                job.state = _RUNNING
                self.current = job
            try:
                job._run()
            finally:
                with self.lock:
                    self.current = None
                job._finish()  # after ``current`` is cleared: a returned caller sees the device free
            del job


_IDLE: list[MlxThread] = []  # the threads of collected runtimes, for the next runtime
_IDLE_LOCK = threading.Lock()


def take_thread() -> MlxThread:
    with _IDLE_LOCK:
        return _IDLE.pop() if _IDLE else MlxThread()


def park_thread(worker: MlxThread) -> None:
    """A collected runtime's thread: idle (its jobs held the runtime), kept for reuse."""
    with _IDLE_LOCK:
        _IDLE.append(worker)
