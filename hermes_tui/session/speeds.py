"""A compression model's measured speeds, kept in the store from one session to the next.

Defrag and batch size their pieces from the model's speeds (``compaction.sizing``). Learnt
in memory only, every session would start from the slow default and size its first defrag
or batch wrongly, for a fast machine or a slow one. So a session gives the model's stored
speeds to its summarizer's ``ModelSpeed`` when it opens, and keeps them again once a
published pass measured something new: one small write per pass at most, never per call.
"""

from __future__ import annotations

from hermes_tui.compaction.sizing import ModelSpeed
from hermes_tui.compaction.summarizer import Summarizer
from hermes_tui.store import Store
from hermes_tui.store.speeds import StoredSpeed, load_speed, save_speed


class KeptSpeed:
    """One model's ``ModelSpeed`` and its row in the store (``model_speeds``)."""

    def __init__(self, store: Store, key: str, speed: ModelSpeed, saved_at: float | None = None) -> None:
        self.store = store
        self.key = key
        self.speed = speed
        self._saved_at = saved_at  # the measurement the store holds, as far as this object knows

    @classmethod
    def open(cls, store: Store, summarizer: Summarizer, speed: ModelSpeed) -> KeptSpeed | None:
        """The stored speeds given to ``speed`` (unless it holds newer ones); None for a
        summarizer with nothing to keep: no model (fixed speeds) or no ``speed_key``."""
        key = getattr(summarizer, "speed_key", None)
        if not key or speed.fixed:
            return None
        stored = load_speed(store, key)
        if stored is not None:
            speed.restore(stored.prompt_tps, stored.generation_tps, stored.measured)
        return cls(store, key, speed, saved_at=None if stored is None else stored.measured)

    def save_if_new(self) -> bool:
        """Store the speeds when they were measured since the last save; whether it wrote.
        Raises StoreError."""
        measured_at = self.speed.measured_at
        if measured_at is None or measured_at == self._saved_at:
            return False
        save_speed(self.store, StoredSpeed(self.key, self.speed.prompt_tps, self.speed.generation_tps, measured_at))
        self._saved_at = measured_at
        return True
