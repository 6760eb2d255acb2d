"""The status bar: model, tokens / window, occupancy gauge, passes, and what is running now.

It only shows what it is given (``StatusInfo``); the chat screen decides what that is.
Colours come from the theme through CSS classes (``-ok``/``-warn``/``-high``).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from rich.cells import cell_len
from textual.app import ComposeResult
from textual.containers import Horizontal
from textual.widgets import Label

SPINNER = "⠋⠙⠹⠸⠼⠴⠦⠧⠇⠏"
GAUGE_CELLS = 8
WARN_AT, HIGH_AT = 60.0, 85.0  # % of the compaction threshold

# Outcomes shown as trouble in the activity slot.
FAILED_OUTCOMES = {"summarize_failed", "defrag_failed", "store_failed", "error", "failed", "exchange_skipped"}


@dataclass
class StatusInfo:
    model: str = ""
    tokens: int = 0
    window: int | None = None        # None while the window is being resolved
    occupancy_pct: float | None = None
    passes: int = 0
    tokens_saved: int = 0
    activity: str = ""               # "pass" | "batch" | "" (idle)
    waiting: bool = False            # the reply is queued behind a pass on the same device
    replying: bool = False
    last_outcome: str | None = None


def short_tokens(n: int) -> str:
    if n >= 100_000:
        return f"{n / 1000:.0f}k"
    if n >= 10_000:
        return f"{n / 1000:.1f}k"
    return f"{n:,}"


def model_label(name: str) -> str:
    """A model path shows as its folder name; a repo id as its last part."""
    if not name:
        return "no model"
    return Path(name).name or name


def gauge(pct: float) -> str:
    filled = max(0, min(GAUGE_CELLS, round(pct / 100 * GAUGE_CELLS)))
    return "▰" * filled + "▱" * (GAUGE_CELLS - filled)


def level(pct: float | None) -> str:
    if pct is None:
        return "-unknown"
    return "-high" if pct >= HIGH_AT else "-warn" if pct >= WARN_AT else "-ok"


class StatusBar(Horizontal):
    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self.info = StatusInfo()
        self.frame = 0
        self._texts: dict[str, str] = {}  # what each label shows

    def compose(self) -> ComposeResult:
        yield Label(id="sb-model", markup=False)
        yield Label(id="sb-tokens", markup=False)
        yield Label(id="sb-gauge", markup=False)
        yield Label(id="sb-passes", markup=False)
        yield Label(id="sb-activity", markup=False)

    def on_mount(self) -> None:
        self.show(self.info)

    def tick(self) -> None:
        """Advance the spinner (called on a timer while something runs)."""
        self.frame = (self.frame + 1) % len(SPINNER)
        self._show_activity()

    def show(self, info: StatusInfo) -> None:
        self.info = info
        self._set("#sb-model", model_label(info.model))
        window = f"{short_tokens(info.window)}" if info.window else "window …"
        self._set("#sb-tokens", f"{short_tokens(info.tokens)} / {window}")
        if info.occupancy_pct is None:
            gauge_label = self._set("#sb-gauge", f"{'▱' * GAUGE_CELLS}  –")
        else:
            gauge_label = self._set("#sb-gauge", f"{gauge(info.occupancy_pct)} {info.occupancy_pct:.0f}%")
        for name in ("-ok", "-warn", "-high", "-unknown"):
            gauge_label.set_class(name == level(info.occupancy_pct), name)
        saved = f" · {short_tokens(info.tokens_saved)} saved" if info.tokens_saved else ""
        self._set("#sb-passes", f"{info.passes} {'pass' if info.passes == 1 else 'passes'}{saved}")
        self._show_activity()

    def _set(self, selector: str, text: str) -> Label:
        """Show ``text`` in a label. A label whose width stays the same is only repainted: a
        layout pass re-arranges the whole screen, message list included, and the spinner
        changes ten times a second while anything runs (a long session made each one tens
        of milliseconds of a blocked event loop, and typing lagged)."""
        label = self.query_one(selector, Label)
        old = self._texts.get(selector)
        if old != text:
            self._texts[selector] = text
            label.update(text, layout=old is None or cell_len(old) != cell_len(text))
        return label

    def _show_activity(self) -> None:
        info = self.info
        spin = SPINNER[self.frame]
        if info.activity:
            text = f"{spin} {'pass' if info.activity == 'pass' else 'compacting'}…"
            if info.waiting:
                text += " reply waits for it"
        elif info.replying:
            text = f"{spin} replying…"
        elif info.last_outcome:
            text = f"last: {info.last_outcome}"
        else:
            text = "idle"
        activity = self._set("#sb-activity", text)
        activity.set_class(bool(info.activity or info.replying), "-running")
        activity.set_class(not info.activity and info.last_outcome in FAILED_OUTCOMES, "-failed")
