"""The connections of ``call_limits``' clients: each connect, read and write obeys the
calling thread's ``CallLimits`` (see that module), found by the ``limits`` function
given. Imported with the SDK, by the first call."""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:  # checked against httpx2, the library of the openai SDK installed
    import ssl

    import httpcore2 as _core
    import httpx2 as _httpx
else:
    try:  # the HTTP library under the openai SDK: httpx2 (httpcore2) from openai 3 on
        import httpcore2 as _core
        import httpx2 as _httpx
    except ImportError:  # pragma: no cover - an older openai
        import httpcore as _core
        import httpx as _httpx


class StepLimits(Protocol):
    """What a connection asks of ``call_limits.CallLimits`` (which imports this module)."""

    def next_wait(self, idle_end: float | None) -> float | None: ...
    def clamp(self, timeout: float | None) -> float | None: ...
    def note_timeout(self) -> None: ...


Limits = Callable[[], StepLimits | None]  # the calling thread's CallLimits, or None
log = logging.getLogger("hermes_tui.providers.openai.call_limits")


class _LimitedStream(_core.NetworkStream):
    """A connection whose reads and writes obey the calling thread's ``CallLimits``."""

    def __init__(self, inner: _core.NetworkStream, limits: Limits) -> None:
        self._inner = inner
        self._limits = limits

    def read(self, max_bytes: int, timeout: float | None = None) -> bytes:
        limits = self._limits()
        if limits is None:
            return self._inner.read(max_bytes, timeout)
        idle_end = None if timeout is None else time.monotonic() + timeout
        while True:
            wait = limits.next_wait(idle_end)  # raises when the read must end
            # A socket read that times out consumed nothing (TLS too): reading again is safe.
            with contextlib.suppress(_core.ReadTimeout):
                return self._inner.read(max_bytes, wait)

    def write(self, buffer: bytes, timeout: float | None = None) -> None:
        limits = self._limits()
        if limits is None:
            return self._inner.write(buffer, timeout)
        try:
            self._inner.write(buffer, limits.clamp(timeout))
        except _core.WriteTimeout:
            limits.note_timeout()
            raise

    def close(self) -> None:
        self._inner.close()

    def start_tls(
        self, ssl_context: ssl.SSLContext, server_hostname: str | None = None, timeout: float | None = None,
    ) -> _LimitedStream:
        limits = self._limits()
        if limits is not None:
            timeout = limits.clamp(timeout)
        try:
            return _LimitedStream(self._inner.start_tls(ssl_context, server_hostname, timeout), self._limits)
        except _core.ConnectTimeout:
            if limits is not None:
                limits.note_timeout()
            raise

    def get_extra_info(self, info: str) -> Any:
        return self._inner.get_extra_info(info)


class _LimitedBackend(_core.NetworkBackend):
    """Opens connections as the wrapped backend does, each one a ``_LimitedStream``."""

    def __init__(self, inner: _core.NetworkBackend, limits: Limits) -> None:
        self._inner = inner
        self._limits = limits

    def connect_tcp(self, host: str, port: int, timeout: float | None = None, local_address: str | None = None,
                    socket_options: Iterable[_core.SOCKET_OPTION] | None = None) -> _LimitedStream:
        return self._connect(lambda t: self._inner.connect_tcp(host, port, t, local_address, socket_options), timeout)

    def connect_unix_socket(
        self, path: str, timeout: float | None = None, socket_options: Iterable[_core.SOCKET_OPTION] | None = None,
    ) -> _LimitedStream:
        return self._connect(lambda t: self._inner.connect_unix_socket(path, t, socket_options), timeout)

    def _connect(self, connect: Callable[[float | None], _core.NetworkStream], timeout: float | None) -> _LimitedStream:
        limits = self._limits()
        if limits is not None:
            timeout = limits.clamp(timeout)
        try:
            return _LimitedStream(connect(timeout), self._limits)
        except _core.ConnectTimeout:
            if limits is not None:
                limits.note_timeout()
            raise

    def sleep(self, seconds: float) -> None:
        self._inner.sleep(seconds)


_ssl_context: ssl.SSLContext | None = None
_ssl_lock = threading.Lock()


def shared_ssl_context() -> ssl.SSLContext:
    """The one TLS context of this process's clients: httpx's default (the system's or
    SSL_CERT_FILE's certificates), made once. Loading the certificates holds the interpreter
    lock for 20-40 ms; made per client, that landed on the first request of each (the chat's,
    the compression model's) while the user typed. ``warm_sdk`` makes it after the first frame."""
    global _ssl_context
    with _ssl_lock:
        if _ssl_context is None:
            _ssl_context = _httpx.create_ssl_context()
        return _ssl_context


def http_client(limits: Limits) -> _httpx.Client:
    """The SDK's default HTTP client (its limits, redirects, proxies from the environment),
    its connections opened through ``_LimitedBackend``."""
    import openai

    client = openai.DefaultHttpxClient(verify=shared_ssl_context())
    # httpx takes no network backend: it is set on each connection pool, the direct one
    # and the proxies' (private attributes, stable across httpx and httpx2 releases).
    for transport in [client._transport, *client._mounts.values()]:
        pool = getattr(transport, "_pool", None)
        backend = getattr(pool, "_network_backend", None)
        if pool is None or backend is None:
            if transport is not None:
                log.warning("%s has no network backend to wrap: timeouts bound each read, not the call",
                            type(transport).__name__)
            continue
        if not isinstance(backend, _LimitedBackend):
            pool._network_backend = _LimitedBackend(backend, limits)
    return client
