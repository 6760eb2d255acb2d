"""The ``bench_runs`` table: one row per benchmark run, its details as JSON.

The benchmark (``analysis.bench``) owns what a run is; this module only writes and reads
the rows, as plain dicts with the JSON columns decoded.
"""

from __future__ import annotations

import json
from typing import Any

from hermes_tui.store.db import translate_errors
from hermes_tui.store.store import Store

COLUMNS = ("id", "model", "provider", "started", "duration_s", "load_s", "cancelled", "machine", "settings",
           "passes", "medians")
JSON_COLUMNS = ("machine", "settings", "passes", "medians")
_SELECT = f"SELECT {', '.join(COLUMNS)} FROM bench_runs"


def insert_run(store: Store, row: dict[str, Any]) -> int:
    """Insert one run (every column but ``id``); returns its id."""
    names = COLUMNS[1:]
    values = [json.dumps(row[name]) if name in JSON_COLUMNS else row[name] for name in names]
    with translate_errors(store.path):
        cursor = store.conn.execute(
            f"INSERT INTO bench_runs ({', '.join(names)}) VALUES ({','.join('?' * len(names))})", values,
        )
    run_id = cursor.lastrowid
    assert run_id is not None  # set by every INSERT into a rowid table
    return run_id


def select_runs(store: Store, *, model: str | None = None, limit: int | None = None) -> list[dict[str, Any]]:
    """Saved runs, newest first (of one model when given)."""
    sql = _SELECT
    params: list[Any] = []
    if model is not None:
        sql += " WHERE model = ?"
        params.append(model)
    sql += " ORDER BY started DESC, id DESC"
    if limit is not None:
        sql += " LIMIT ?"
        params.append(limit)
    with translate_errors(store.path):
        rows = store.conn.execute(sql, params).fetchall()
    return [_decoded(row) for row in rows]


def select_run(store: Store, run_id: int) -> dict[str, Any] | None:
    with translate_errors(store.path):
        row = store.conn.execute(f"{_SELECT} WHERE id = ?", (run_id,)).fetchone()
    return None if row is None else _decoded(row)


def delete_run(store: Store, run_id: int) -> None:
    with translate_errors(store.path):
        store.conn.execute("DELETE FROM bench_runs WHERE id = ?", (run_id,))


def _decoded(row: tuple[Any, ...]) -> dict[str, Any]:
    return {name: json.loads(value) if name in JSON_COLUMNS else value for name, value in zip(COLUMNS, row)}
