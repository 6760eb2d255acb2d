"""Occupancy over a session as a text chart: block-character bars and the high mark.

The spec judges a session by its occupancy over time (does it level off below the
threshold, or climb?), which a table of passes hides. ``bar_chart`` draws one bar per
request (or per bucket of requests, keeping each bucket's peak, so a spike is never
averaged away) with the high mark drawn across; ``sparkline`` is the same in one line.
Plain strings only: ``/usage`` in the app and ``hermes-tui report --per-session`` both
print them.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

BLOCKS = " ▁▂▃▄▅▆▇█"  # 0/8 .. 8/8 of a cell
HIGH_MARK = "─"
DEFAULT_WIDTH = 60
DEFAULT_HEIGHT = 8


def buckets(values: Sequence[float], width: int) -> list[float]:
    """``values`` in at most ``width`` columns, each the peak of the values it covers."""
    if len(values) <= width:
        return list(values)
    out = []
    for column in range(width):
        start = column * len(values) // width
        end = (column + 1) * len(values) // width
        out.append(max(values[start:max(end, start + 1)]))
    return out


def sparkline(values: Sequence[float], *, top: float | None = None, width: int = DEFAULT_WIDTH) -> str:
    """One line of eighth blocks, scaled to ``top`` (default: the peak)."""
    columns = buckets(values, width)
    if not columns:
        return ""
    top = top or max(columns) or 1.0
    return "".join(BLOCKS[max(0, min(8, round(8 * value / top)))] for value in columns)


def bar_chart(
    values: Sequence[float],
    *,
    high_mark: float | None,
    unit: str = "%",
    width: int = DEFAULT_WIDTH,
    height: int = DEFAULT_HEIGHT,
    what: str = "requests",
) -> list[str]:
    """The chart's lines, top row first: a y axis labelled at the top, the high mark and
    0, one column per value (or bucket), and the x axis numbered 1..len(values)."""
    if not values:
        return []
    columns = buckets(values, width)
    peak = max(columns)
    top = max(peak, high_mark or 0.0) or 1.0
    top = _nice(top)
    step = top / height
    mark_row = None if not high_mark else min(height - 1, max(0, math.ceil(high_mark / step) - 1))
    labels = {height - 1: _label(top, unit), 0: ""}
    if mark_row is not None and high_mark:  # the one implies the other
        labels[mark_row] = _label(high_mark, unit)
    pad = max(len(text) for text in labels.values())
    lines = []
    for row in range(height - 1, -1, -1):
        bottom = row * step
        cells = []
        for value in columns:
            filled = (value - bottom) / step
            if filled >= 1:
                cells.append(BLOCKS[8])
            elif filled > 0:
                cells.append(BLOCKS[max(1, round(8 * filled))])
            else:
                cells.append(HIGH_MARK if row == mark_row else " ")
        axis = "┼" if row == mark_row else "┤" if row in labels and labels[row] else "│"
        lines.append(f"{labels.get(row, ''):>{pad}} {axis}{''.join(cells)}")
    lines.append(f"{_label(0, unit):>{pad}} └{'─' * len(columns)}")
    if len(values) == 1:
        lines.append(f"{'':>{pad}}  1 {what.removesuffix('s')}")
    else:
        # At least one space after the "1", so two requests never read as "12".
        last = max(len(str(len(values))) + 1, len(columns) - 1)
        lines.append(f"{'':>{pad}}  1{len(values):>{last}} {what}")
    return lines


def _nice(value: float) -> float:
    """``value`` rounded up to a round number for the top of the axis."""
    magnitude = 10 ** math.floor(math.log10(value)) if value > 0 else 1
    for factor in (1, 1.25, 1.5, 2, 2.5, 3, 4, 5, 6, 8, 10):
        if value <= factor * magnitude:
            return factor * magnitude
    return value


def _label(value: float, unit: str) -> str:
    if unit == "%":
        return f"{value:.0f}%"
    return f"{value:,.0f}{unit}"


def usage_chart(request_tokens: Sequence[int], threshold_tokens: int | None, *, width: int = DEFAULT_WIDTH) -> str:
    """``/usage``'s chart: each chat request's size as a share of the threshold (the high
    mark); in tokens while the window is unresolved. "" before the first request."""
    if not request_tokens:
        return ""
    if threshold_tokens:
        points = [100.0 * tokens / threshold_tokens for tokens in request_tokens]
        title = f"occupancy per request (% of the threshold; peak {max(points):.1f}%)"
        lines = bar_chart(points, high_mark=100.0, width=width)
    else:
        title = f"request size in tokens (window not resolved yet; peak {max(request_tokens):,})"
        lines = bar_chart(list(request_tokens), high_mark=None, unit="", width=width)
    return "\n".join([title, *lines])
