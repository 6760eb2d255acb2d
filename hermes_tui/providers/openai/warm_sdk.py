"""Importing the openai SDK ahead of the first model call, off the UI thread.

The SDK (with pydantic and httpx under it) takes 1-2.5 s to import on a slow machine.
Imported lazily by the first reply's worker thread, that import holds the interpreter
lock in long stretches while the user types, so the first keys after sending lag. Started
right after the first frame instead, it is over (or well under way, and the worker simply
waits on the import lock) by the time the first message is sent. So is the loading of the
TLS certificates, which every client's first request would otherwise do.
"""

from __future__ import annotations

import threading

from hermes_tui.util.logs import get_logger

log = get_logger("providers")


def warm_openai_sdk() -> threading.Thread:
    """Import the SDK (and load the certificates) on a background thread; the thread."""
    thread = threading.Thread(target=_import_sdk, name="warm-openai", daemon=True)
    thread.start()
    return thread


def _import_sdk() -> None:
    try:
        import openai  # noqa: F401 - the import is the point

        from hermes_tui.providers.openai import call_limits  # noqa: F401 - and its HTTP backend
        from hermes_tui.providers.openai.transport import shared_ssl_context

        shared_ssl_context()  # and the certificates every client's first request would load
    except Exception:  # the first call reports a missing or broken SDK in its own words
        log.warning("importing the openai SDK ahead of the first call failed", exc_info=True)
