"""A session's compaction counters (passes, tokens saved), kept in its ``settings`` document.

The newest marker carries them too, but a pass that failed on an exchange writes no marker:
without this a resume (or a settings save, which reopens the session) would fall back to
the marker's older figures. One small update per pass, never a row per message.
"""

from __future__ import annotations

import json
from typing import Any

from hermes_tui.store.db import translate_errors
from hermes_tui.store.store import Store


def save_counters(store: Store, session_id: str, passes_total: int, tokens_saved_total: int) -> None:
    counters = json.dumps({"passes_total": passes_total, "tokens_saved_total": tokens_saved_total})
    with store._transaction():
        store._check_writer(session_id)
        store.conn.execute(
            "UPDATE sessions SET settings = json_set(settings, '$.counters', json(?)) WHERE id = ?",
            (counters, session_id),
        )


def load_counters(store: Store, session_id: str) -> tuple[int, int] | None:
    """``(passes_total, tokens_saved_total)`` as last saved; None when never saved or unreadable."""
    with translate_errors(store.path):
        row = store.conn.execute(
            "SELECT json_extract(settings, '$.counters') FROM sessions WHERE id = ?", (session_id,)
        ).fetchone()
    try:
        counters = json.loads(row[0]) if row and row[0] else None
    except (TypeError, ValueError):
        return None
    if not isinstance(counters, dict):
        return None
    passes, saved = _integer(counters.get("passes_total")), _integer(counters.get("tokens_saved_total"))
    if passes is None or saved is None or passes < 0:
        return None
    return passes, saved


def _integer(value: Any) -> int | None:
    """``value`` if it is a JSON integer (not a boolean), else None."""
    return value if isinstance(value, int) and not isinstance(value, bool) else None
