"""The status bar: model, tokens / window, occupancy gauge, passes, what is running now, and
the agent's approval mode (with the step during a turn) and the MCP servers
(``MCP 2/3 ready, 1 failed``; nothing without servers).

It only shows what it is given (``StatusInfo``); the chat screen decides what that is.
Colours come from the theme through component classes (``status-bar--ok`` …).

One widget draws the whole line, so a change (the spinner ten times a second, a text
of another width) is a repaint of this one row and never a layout pass: a layout pass
re-arranges every widget on the screen, the whole message list included.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rich.cells import cell_len
from rich.style import Style
from rich.text import Text
from textual.widget import Widget

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
    mode: str = ""                   # the approval mode ("" when the chat has no tools)
    step: int | None = None          # the agent turn's model call, while one runs
    max_steps: int | None = None


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


PARTS = ("model", "tokens", "gauge", "passes", "activity", "agent", "mcp")
FULL_AUTO = "⚠ FULL AUTO"  # full mode runs edits and commands unasked: never out of sight
MODEL_MIN = 8  # cells the model's name keeps (padding included) when the bar is short of room


class StatusBar(Widget):
    """One row: the model's name (the room left, cut with "…"), then the other parts, each
    padded by a space either side. ``text(part)`` and ``state(part)`` say what a part
    shows and its state class (``-ok``, ``-running`` …; "" for none)."""

    COMPONENT_CLASSES = {
        "status-bar--model", "status-bar--ok", "status-bar--warn", "status-bar--high", "status-bar--unknown",
        "status-bar--running", "status-bar--failed", "status-bar--danger",
    }

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.info = StatusInfo()
        self.frame = 0
        self._texts: dict[str, str] = dict.fromkeys(PARTS, "")
        self._states: dict[str, str] = dict.fromkeys(PARTS, "")

    def on_mount(self) -> None:
        self.show(self.info)

    def text(self, part: str) -> str:
        """What ``part`` (one of ``PARTS``) shows."""
        return self._texts[part]

    def state(self, part: str) -> str:
        """The state class of ``part``: ``-ok``/``-warn``/``-high``/``-unknown`` (gauge),
        ``-running``/``-failed`` (activity, mcp), ``-danger`` (agent, in full mode), "" for none."""
        return self._states[part]

    def tick(self) -> None:
        """Advance the spinner (called on a timer while something runs)."""
        self.frame = (self.frame + 1) % len(SPINNER)
        self._show_activity()

    def show(self, info: StatusInfo) -> None:
        self.info = info
        self._set("model", model_label(info.model))
        window = f"{short_tokens(info.window)}" if info.window else "window …"
        self._set("tokens", f"{short_tokens(info.tokens)} / {window}")
        if info.occupancy_pct is None:
            self._set("gauge", f"{'▱' * GAUGE_CELLS}  –", level(None))
        else:
            self._set("gauge", f"{gauge(info.occupancy_pct)} {info.occupancy_pct:.0f}%", level(info.occupancy_pct))
        saved = f" · {short_tokens(info.tokens_saved)} saved" if info.tokens_saved else ""
        self._set("passes", f"{info.passes} {'pass' if info.passes == 1 else 'passes'}{saved}")
        self._show_activity()
        self._show_agent()

    def show_mcp(self, summary: str, state: str = "") -> None:
        """The MCP servers' one line (the manager's ``summary()``; "" hides the part) and its
        state class: ``-failed`` when one failed, ``-running`` while one starts."""
        self._set("mcp", summary, state if summary else "")

    def _set(self, part: str, text: str, state: str = "") -> None:
        """Show ``text`` in ``part``: a repaint of this row, whatever its width (see the module)."""
        if self._texts[part] != text or self._states[part] != state:
            self._texts[part] = text
            self._states[part] = state
            self.refresh()

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
        state = "-running" if info.activity or info.replying else (
            "-failed" if info.last_outcome in FAILED_OUTCOMES else "")
        self._set("activity", text, state)

    def _show_agent(self) -> None:
        """The approval mode, and the step while a turn runs; full mode as a warning."""
        info = self.info
        text = FULL_AUTO if info.mode == "full" else info.mode
        if text and info.step is not None:
            text += f" · step {info.step}" + (f"/{info.max_steps}" if info.max_steps else "")
        self._set("agent", text, "-danger" if info.mode == "full" else "")

    def render(self) -> Text:
        """The parts in a row, as a row of labels would show them: the model's name takes
        the room the others leave (at least ``MODEL_MIN`` cells); what does not fit is cut
        at the right edge."""
        width = self.size.width
        others = [(f" {self._texts[part]} ", self._part_style(part)) for part in PARTS[1:] if self._texts[part]]
        room = max(MODEL_MIN, width - sum(cell_len(text) for text, _ in others)) - 2
        model = Text(self._texts["model"], no_wrap=True)
        model.truncate(room, overflow="ellipsis", pad=True)
        line = Text(no_wrap=True, end="")
        line.append(" ")
        line.append_text(model)
        line.append(" ")
        line.stylize(self._part_style("model"))
        for text, style in others:
            line.append(text, style)
        line.truncate(width)
        return line

    def _part_style(self, part: str) -> Style | str:
        if part == "model":
            return self.get_component_rich_style("status-bar--model")
        state = self._states[part]
        if not state:
            return ""
        return self.get_component_rich_style(f"status-bar-{state}")
