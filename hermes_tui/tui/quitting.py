"""Quitting while a turn or a pass runs: stop them, and let them store what they keep first.

The caller closes the store as soon as ``run`` returns. On unmount every turn is told to
stop (as Escape does: the part of a reply that arrived is kept marked stopped, a running
command is killed and its call answered "stopped"), passes are abandoned (a plan writes
nothing), and the app waits a bounded time for their sessions' work to land, so it lands
while the store is open rather than racing its close. A write still under way when the
store closes finishes first (the store's connection guard); one that comes later is
refused with a ``StoreError``, and a call it left without a result is answered
"interrupted" on resume.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterable
from typing import Any

from textual.app import App

from hermes_tui.session.session import Session
from hermes_tui.tui.screens.chat import ChatScreen
from hermes_tui.util.logs import get_logger

log = get_logger("tui")

QUIT_WAIT_S = 10.0  # a stopped reply lands in well under a second; a killed command within its grace


async def stop_work(app: App[Any], sessions: Iterable[Session], timeout: float = QUIT_WAIT_S) -> None:
    for screen in app.screen_stack:
        if isinstance(screen, ChatScreen):
            screen.action_cancel_reply()
    app.workers.cancel_group(app, "compaction")
    deadline = time.monotonic() + timeout  # one bound for them all
    for session in sessions:
        if not await asyncio.to_thread(session.wait_idle, max(0.0, deadline - time.monotonic())):
            log.warning("session %s: a turn or pass still runs after %g s; quitting without it",
                        session.info.id, timeout)
