"""Crash points for fault-injection tests.

With ``HERMES_TUI_CRASH_AT=NAME:N`` in the environment, the process kills itself
with SIGKILL the N-th time it reaches ``crash_point(NAME)``: a kill -9 at an exact
moment (inside a transaction, between turns) that a test can then recover from.
Without the variable, ``crash_point`` is a dictionary lookup and a return.
"""

from __future__ import annotations

import os
import signal

_spec = os.environ.get("HERMES_TUI_CRASH_AT", "")
_name, _, _count = _spec.partition(":")
_remaining = int(_count) if _count.isdigit() else 1


def crash_point(name: str) -> None:
    global _remaining
    if not _spec or name != _name:
        return
    _remaining -= 1
    if _remaining <= 0:
        os.kill(os.getpid(), signal.SIGKILL)
