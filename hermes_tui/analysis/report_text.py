"""The report as text: aligned figures, the cost lines, trajectory tables, occupancy charts."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from hermes_tui.analysis.occupancy_chart import bar_chart


def _int(value: float | None) -> str:
    if value is None:
        return "-"
    return f"{round(value):,}"


def _signed(value: float | None) -> str:
    if value is None:
        return "-"
    return f"{round(value):+,}"


def _pct(value: float | None) -> str:
    return "-" if value is None else f"{value:.1f}%"


def _duration(ms: float | None) -> str:
    if ms is None:
        return "-"
    return f"{ms:.0f}ms" if ms < 1000 else f"{ms / 1000:.1f}s"


def _span(before: Any, after: Any, fmt: Callable[[Any], str] = _int) -> str:
    return f"{fmt(before)} -> {fmt(after)}"


def format_figures(figures: dict[str, Any], indent: str = "  ") -> list[str]:
    """The figures of ``summarize`` as aligned text lines."""
    lines = []

    def row(label: str, text: str) -> None:
        lines.append(f"{indent}{label:<24}{text}")

    row("passes", _int(figures["passes"]))
    if figures["outcomes"]:
        width = max(len(o) for o in figures["outcomes"])
        for i, (outcome, mix) in enumerate(figures["outcomes"].items()):
            row("outcomes" if i == 0 else "", f"{outcome:<{width}}  {mix['count']:>5,}  {mix['pct']:5.1f}%")
    row("net tokens saved", _signed(figures["net_tokens_saved"]) if figures["net_tokens_saved"] else "0")
    mean = figures["mean_absorbed_exchange_tokens"]
    row("mean absorbed exchange", "-" if mean is None else f"{_int(mean)} tokens")
    d = figures["duration_ms"]
    if d["count"]:
        row(
            "pass duration",
            f"median {_duration(d['median'])}, p90 {_duration(d['p90'])}, max {_duration(d['max'])}"
            f"  ({d['count']:,} passes that called the model)",
        )
    else:
        row("pass duration", "- (no pass called the model)")
    o = figures["occupancy_pct"]
    if o["count"]:
        row("occupancy", f"min {_pct(o['min'])}, median {_pct(o['median'])}, max {_pct(o['max'])}  (of threshold)")
    else:
        row("occupancy", "- (no pass logged it)")
    row("batch compactions", batch_text(figures["batch_compactions"]))
    if figures.get("cost"):
        lines += format_cost(figures["cost"], indent)
    if figures.get("chat"):
        lines += format_chat(figures["chat"], indent)
    return lines


def batch_text(b: dict[str, Any]) -> str:
    text = f"{b['fired']:,} fired, {b['failed']:,} failed"
    nothing = b.get("nothing_to_absorb") or 0
    return text + (f" ({nothing:,} found nothing to absorb)" if nothing else "")


def format_chat(chat: dict[str, Any], indent: str = "  ") -> list[str]:
    """The chat model's lines: prefill per turn and what its prefix cache served."""
    lines = ["", f"{indent}chat model  ({chat['requests']:,} requests, {chat['reported']:,} with the provider's usage)"]

    def row(label: str, text: str) -> None:
        lines.append(f"{indent}  {label:<22}{text}")

    if not chat["reported"]:
        row("prefill", "- (the provider reported no usage)")
    else:
        row("prompt tokens", f"total {_int(chat['prompt_tokens'])}")
        reuse = chat["cache_reuse_pct"]
        row("cached tokens", f"total {_int(chat['cached_tokens'])}" + ("" if reuse is None else f"  ({reuse:.1f}% of prompt tokens reused)"))
        row("prefill tokens", f"total {_int(chat['prefill_tokens'])}")
        t = chat["per_turn"]
        if t["count"]:
            row("prefill per turn", f"median {_int(t['median'])}, max {_int(t['max'])}  ({t['count']:,} turn{'s' if t['count'] != 1 else ''})")
    c = chat["context_tokens"]
    if c["count"]:
        row("request size", f"median {_int(c['median'])}, max {_int(c['max'])} tokens  (our count)")
    return lines


def format_occupancy(series: dict[str, Any] | None, indent: str = "  ") -> list[str]:
    """One session's occupancy over time as a chart, the threshold as the high mark."""
    if not series:
        return []
    points = series["points"]
    lines = ["", f"{indent}occupancy over the session (% of the threshold, per {series['of'][:-1]}; "
                 f"peak {max(points):.1f}%, last {points[-1]:.1f}%)"]
    lines += [indent + line for line in bar_chart(points, high_mark=100.0, what=series["of"])]
    return lines


def format_cost(cost: dict[str, Any], indent: str = "  ") -> list[str]:
    """The "where the time goes" lines: tokens and time per pass, and the model-time split."""
    lines = [""]
    modes = ", ".join(f"{mode} {count:,}" for mode, count in sorted(cost["modes"].items()))
    lines.append(f"{indent}where the time goes" + (f"  (passes by mode: {modes})" if modes else ""))

    def row(label: str, text: str) -> None:
        lines.append(f"{indent}  {label:<22}{text}")

    def tokens(name: str) -> str:
        f = cost[name]
        if not f["count"]:
            return "- (not logged)"
        return f"total {_int(f['total'])}, median {_int(f['median'])} per pass  ({f['count']:,} passes)"

    def millis(name: str) -> str:
        f = cost[name]
        if not f["count"]:
            return "- (not logged)"
        return f"total {_duration(f['total'])}, median {_duration(f['median'])} per pass  ({f['count']:,} passes)"

    row("prefill tokens", tokens("prefill_tokens"))
    row("cached tokens", tokens("cached_tokens"))
    row("generated tokens", tokens("generated_tokens"))
    row("model time", millis("summarizer_ms"))
    row("engine overhead", millis("overhead_ms"))
    model, overhead = cost["summarizer_ms"]["total"], cost["overhead_ms"]["total"]
    if model is not None and overhead is not None and model + overhead > 0:
        row("", f"the model takes {100 * model / (model + overhead):.0f}% of pass time")
    split = cost["split"]
    if split:
        estimated = split["prefill_ms"] + split["generation_ms"]
        if estimated > 0:
            prefill_pct = 100 * split["prefill_ms"] / estimated
            row(
                "model time split",
                f"~{prefill_pct:.0f}% prefill, ~{100 - prefill_pct:.0f}% generation  (estimated from the "
                f"backend's tokens/s over {split['passes']:,} passes: {_duration(split['prefill_ms'])} + "
                f"{_duration(split['generation_ms'])} of {_duration(split['summarizer_ms'])})",
            )
    return lines


TRAJECTORY_HEADER = ("pass", "messages", "tokens", "delta", "occupancy", "duration")


def format_trajectory(rows: list[dict[str, Any]], indent: str = "  ") -> list[str]:
    """The trajectory as a table in the spec's shape: pass | messages | tokens | delta | occupancy | duration."""
    cells = [TRAJECTORY_HEADER] + [
        (
            str(r["pass"]) + (" (defrag)" if r["outcome"] == "defrag" else ""),
            _span(r["messages_before"], r["messages_after"]),
            _span(r["tokens_before"], r["tokens_after"]),
            _signed(r["tokens_delta"]),
            _pct(r["occupancy_pct"]),
            _duration(r["duration_ms"]),
        )
        for r in rows
    ]
    widths = [max(len(line[i]) for line in cells) for i in range(len(TRAJECTORY_HEADER))]

    def render(line: Sequence[str]) -> str:
        parts = [line[0].ljust(widths[0])] + [cell.rjust(width) for cell, width in zip(line[1:], widths[1:])]
        return indent + " | ".join(parts)

    out = [render(cells[0]), indent + "-+-".join("-" * w for w in widths)]
    out += [render(line) for line in cells[1:]]
    return out


def skipped_line(malformed: int) -> str:
    return f"({malformed:,} malformed telemetry line{'s' if malformed != 1 else ''} skipped)"


def format_report(
    overall: dict[str, Any],
    sessions: dict[str, dict[str, Any]] | None,
    *,
    sources: Sequence[str],
    malformed: int,
) -> str:
    lines = [f"Micro-compaction report: {', '.join(sources)}"]
    if malformed:
        lines.append(skipped_line(malformed))
    lines += ["", f"Overall ({overall['sessions']:,} session{'s' if overall['sessions'] != 1 else ''})"]
    lines += format_figures(overall)
    for session, figures in (sessions or {}).items():
        lines += ["", f"Session {session}"]
        lines += format_figures(figures)
        last = figures["last_tokens_saved_total"]
        if last is not None and last != figures["net_tokens_saved"]:
            lines.append(
                f"  (the engine's running total says {_signed(last)} saved: the log does not hold every pass)"
            )
        lines += format_occupancy(figures.get("occupancy_series"))
        if figures["trajectory"]:
            lines += ["", "  trajectory (absorbed and defrag passes)"]
            lines += format_trajectory(figures["trajectory"])
        elif figures["passes"]:
            lines += ["", "  trajectory: no absorbed or defrag passes"]
    return "\n".join(lines)


