"""The HTTP client under the openai SDK, with two bounds its own timeout cannot express.

The SDK's timeout (httpx's) bounds connecting and each single read or write. It cannot
say "this call ends at T": a server that sends one byte every 0.5 s is never timed out,
however long its reply takes. Nor can it say "stop now": while a server sends nothing,
a cancel set by the user waits for the next byte or for the timeout.

``CallLimits`` is both, a deadline for the whole call and a cancel event. They are
enforced inside every connect, read and write on the connections of a client made by
``transport.http_client()``, for the calls made on the thread that entered ``applied()`` and only
while inside it (a streaming reply's generator enters it around each read, never across
a ``yield``)::

    limits = CallLimits(deadline=time.monotonic() + 2)
    with limits.applied():
        ...  # SDK calls and reads of their responses
    limits.stopped  # None, TIMED_OUT or CANCELLED

A read waits at most until the deadline, in slices short enough to notice a cancel; the
SDK's per-read timeout still holds inside a read. A call the limits stop raises the HTTP
layer's own ReadTimeout (deadline) or ReadError (cancel), so the SDK and httpx handle it
as any broken read: the connection is closed, not returned to the pool. No thread is
started. The caller reads ``stopped`` to tell its own limit from a server's failure.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Iterator
from types import ModuleType
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # imported by the first call (``SdkClient.get``): it is slow to import
    import openai

TIMED_OUT = "timeout"
CANCELLED = "cancelled"

# How often a read that waits for data looks at the cancel event.
CANCEL_POLL_S = 0.1

_current = threading.local()


def http_core() -> ModuleType:
    """The HTTP library under the openai SDK: httpx2's httpcore2 from openai 3 on. Imported
    by the first call, like the SDK: the app's first frame does not wait for it."""
    if TYPE_CHECKING:  # checked against httpcore2, the library of the openai SDK installed
        import httpcore2 as core
    else:
        try:
            import httpcore2 as core
        except ImportError:  # pragma: no cover - an older openai
            import httpcore as core
    return core


def limits() -> CallLimits | None:
    """The limits the calling thread is inside (``CallLimits.applied``), if any."""
    return getattr(_current, "limits", None)


class CallLimits:
    """A deadline (``time.monotonic()`` value) and a cancel event for one call."""

    def __init__(self, *, deadline: float | None = None, cancel: threading.Event | None = None) -> None:
        self.deadline = deadline
        self.cancel = cancel
        self.stopped: str | None = None  # set when these limits ended the call

    @contextlib.contextmanager
    def applied(self) -> Iterator[CallLimits]:
        """Apply the limits to the HTTP calls this thread makes inside the block."""
        previous = getattr(_current, "limits", None)
        _current.limits = self
        try:
            yield self
        finally:
            _current.limits = previous

    def check(self) -> None:
        """Raise if the call is cancelled or past its deadline."""
        if self.cancel is not None and self.cancel.is_set():
            self.stopped = CANCELLED
            raise http_core().ReadError("the call was cancelled")
        if self.deadline is not None and time.monotonic() >= self.deadline:
            self.stopped = TIMED_OUT
            raise http_core().ReadTimeout("the call's deadline passed")

    def next_wait(self, idle_end: float | None) -> float | None:
        """How long the next slice of a read may block; raises when the read must end.

        ``idle_end``: when the SDK's per-read timeout runs out (None: it never does)."""
        self.check()
        now = time.monotonic()
        if idle_end is not None and now >= idle_end:
            raise http_core().ReadTimeout("timed out")  # the server's silence, not these limits
        ends = [t - now for t in (self.deadline, idle_end) if t is not None]
        if self.cancel is not None:
            ends.append(CANCEL_POLL_S)
        return min(ends) if ends else None

    def clamp(self, timeout: float | None) -> float | None:
        """``timeout`` for one blocking step (connect, write), cut at the deadline."""
        self.check()
        if self.deadline is None:
            return timeout
        left = self.deadline - time.monotonic()
        return left if timeout is None else min(timeout, left)

    def note_timeout(self) -> None:
        """A clamped step timed out: say so when it was the deadline that ended it."""
        if self.deadline is not None and time.monotonic() >= self.deadline:
            self.stopped = TIMED_OUT


class SdkClient:
    """An ``openai.OpenAI`` client on ``http_client()`` (the SDK's retries off), made by the
    first ``get()``, once, whichever thread asks first.

    The SDK is imported then, by the first call that needs it, on the thread that makes the
    call: it takes seconds to import on a slow machine (most of it building its typed models),
    which must not happen on the UI thread nor before the app's first frame.
    """

    def __init__(self, base_url: str, api_key: str, timeout: float):
        self._base_url = base_url
        self._api_key = api_key
        self._timeout = timeout
        self._client: openai.OpenAI | None = None
        self._lock = threading.Lock()

    def get(self) -> openai.OpenAI:
        with self._lock:
            if self._client is None:
                import openai

                from hermes_tui.providers.openai.transport import http_client

                self._client = openai.OpenAI(
                    base_url=self._base_url, api_key=self._api_key, timeout=self._timeout, max_retries=0,
                    http_client=http_client(limits),
                )
            return self._client
