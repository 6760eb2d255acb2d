"""The ``model_speeds`` table: each compression model's measured prompt and generation speeds.

One row per model, named by the summarizer's ``speed_key``. The speeds belong to the model on
this machine, not to a session, so any session (or process) may write them: no lease is
checked. The newest measurement wins, so two processes using one model never put an older
figure back over a newer one.
"""

from __future__ import annotations

from dataclasses import dataclass

from hermes_tui.store.db import translate_errors
from hermes_tui.store.store import Store


@dataclass(frozen=True)
class StoredSpeed:
    model: str
    prompt_tps: float
    generation_tps: float
    measured: float  # when, Unix seconds


def save_speed(store: Store, speed: StoredSpeed) -> None:
    """Keep ``speed`` unless the row holds a newer measurement (the table refuses speeds that
    are not positive)."""
    with store._transaction():
        store.conn.execute(
            """INSERT INTO model_speeds (model, prompt_tps, generation_tps, measured) VALUES (?,?,?,?)
               ON CONFLICT (model) DO UPDATE SET
                   prompt_tps = excluded.prompt_tps, generation_tps = excluded.generation_tps,
                   measured = excluded.measured
               WHERE excluded.measured >= model_speeds.measured""",
            (speed.model, speed.prompt_tps, speed.generation_tps, speed.measured),
        )


def load_speed(store: Store, model: str) -> StoredSpeed | None:
    """The model's speeds as last kept; None when it was never measured here."""
    with translate_errors(store.path):
        row = store.conn.execute(
            "SELECT model, prompt_tps, generation_tps, measured FROM model_speeds WHERE model = ?", (model,)
        ).fetchone()
    return None if row is None else StoredSpeed(*row)


def list_speeds(store: Store) -> list[StoredSpeed]:
    """Every model measured here, the most recently measured first."""
    with translate_errors(store.path):
        rows = store.conn.execute(
            "SELECT model, prompt_tps, generation_tps, measured FROM model_speeds ORDER BY measured DESC, model"
        ).fetchall()
    return [StoredSpeed(*row) for row in rows]
