"""Replay real agent sessions through the engine and show how occupancy evolves.

    uv run python benchmarks/bench_replay.py [SESSION.json ...] [--modes step user]
                                             [--context-limit 32768] [--all-rows] [--json]

Sessions default to ../shared/data/sessions/*.json. Each is replayed twice through
the real engine (``hermes_tui.analysis.replay.replay``, default compression settings,
a 32,768-token window):

* ``--turns step``: a turn is finalized after every agent step (an assistant
  message and its tool results), as an agent finalizes each loop iteration;
* ``--turns user``: a turn is a user message and everything up to the next one.
  These sessions have 1-8 user messages, so there are few, very long turns.

The summarizer is the built-in **extractive summarizer (no model), not an LLM**:
deterministic notes drawn from each exchange. It measures the engine's mechanics
(what gets absorbed when, how occupancy evolves, whether batch fires), not summary
quality or the cost of a model call; the durations shown are therefore the
engine's own plus a few milliseconds of regex work.

What to look for (spec, "What it looks like when it is working"): in step mode
occupancy climbs to a plateau and stays there, with no batch compaction; in user
mode a whole session can arrive in one turn: one exchange per turn cannot reclaim
that, so the window-pressure defrag folds the backlog in one call (with the spec's
triggers alone, batch compaction would fire as the backstop; it still does when a
defrag fails).
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from hermes_tui.analysis.replay import replay
from hermes_tui.analysis.report import format_trajectory
from hermes_tui.compaction.window import tail_start
from hermes_tui.config import Config
from hermes_tui.core.conversation import Conversation
from hermes_tui.core.tokens import count_message, count_messages
from hermes_tui.core.transcript import parse_transcript
from hermes_tui.providers.extractive.summarizer import ExtractiveSummarizer
from hermes_tui.session.wiring import make_compactor, make_counter

SESSIONS = Path(__file__).resolve().parents[2] / "shared" / "data" / "sessions"
SUMMARIZER_LABEL = "extractive summarizer (no model), not an LLM"
CONTEXT_LIMIT = 32_768
SAMPLE_ROWS = 12
FIRST_ROWS = 3


def replay_session(path: Path, mode: str, context_limit: int) -> dict[str, Any]:
    """Replay one session in one mode; return the trajectory and the figures."""
    messages = parse_transcript(path.read_text(encoding="utf-8"), source=str(path))
    config = Config()  # default compression settings, whatever the local config.yaml says
    counter = make_counter(config)
    compactor = make_compactor(
        config, counter=counter, summarizer=ExtractiveSummarizer(), context_limit=context_limit, session_id=path.stem
    )
    window = compactor.ctx.window
    conv = Conversation(counter=counter)
    turns: list[dict[str, Any]] = []

    def on_turn(number: int, total: int, reports) -> None:
        before = reports[0].fields["tokens_before"] if reports else conv.total_tokens
        previous = turns[-1]["tokens_after_pass"] if turns else 0
        turns.append({
            "turn": number,
            "added_tokens": before - previous,
            "tokens_before_pass": before,
            "tokens_after_pass": conv.total_tokens,
            "messages": len(conv),
            "occupancy_before_pass": window.occupancy_pct(before),
            "occupancy_after_pass": window.occupancy_pct(conv.total_tokens),
            "outcomes": [r.outcome if r.kind == "micro" else f"batch {r.outcome}" for r in reports],
            **anatomy(conv, compactor),
        })

    result = replay(messages, conv, compactor, turns=mode, on_turn=on_turn)

    rows: list[dict[str, Any]] = []
    micro_number = 0
    for report in result.reports:
        f = report.fields
        if report.kind == "micro":
            micro_number += 1
            if report.outcome not in ("absorbed", "defrag"):
                continue
            label = str(micro_number)
        else:
            label = f"batch (after {micro_number})"
        rows.append({
            "pass": label,
            "kind": report.kind,
            "outcome": report.outcome,
            "messages_before": f["messages_before"],
            "messages_after": f["messages_after"],
            "tokens_before": f["tokens_before"],
            "tokens_after": f["tokens_after"],
            "tokens_delta": f["tokens_delta"],
            "occupancy_pct": f["occupancy_pct"],
            "duration_ms": f["duration_ms"],
        })

    micro = [r for r in result.reports if r.kind == "micro"]
    outcomes: dict[str, int] = {}
    for report in micro:
        outcomes[report.outcome] = outcomes.get(report.outcome, 0) + 1
    failures = sorted({r.fields.get("failure") for r in result.reports if r.fields.get("failure")})
    last_quarter = turns[-max(1, math.ceil(len(turns) / 4)):]
    after = [t["occupancy_after_pass"] for t in last_quarter]
    durations = [r.fields["duration_ms"] for r in micro if r.outcome in ("absorbed", "defrag")]
    return {
        "session": path.name,
        "mode": mode,
        "summarizer": SUMMARIZER_LABEL,
        "context_limit": context_limit,
        "threshold_tokens": window.threshold_tokens,
        "tail_token_budget": window.tail_token_budget,
        "input_messages": len(messages),
        "user_messages": sum(1 for m in messages if m.role == "user"),
        "turns": result.turns,
        "micro_passes": len(micro),
        "outcomes": outcomes,
        "failures": failures,
        "batch_compactions": result.count("compressed", "batch"),
        "batch_failed": result.count("failed", "batch"),
        "peak_occupancy_pct": max(
            [t["occupancy_before_pass"] for t in turns] + [t["occupancy_after_pass"] for t in turns], default=None
        ),
        "peak_occupancy_after_pass_pct": max((t["occupancy_after_pass"] for t in turns), default=None),
        "final_tokens": result.tokens_after,
        "final_messages": len(conv),
        "final_occupancy_pct": window.occupancy_pct(result.tokens_after),
        "last_quarter_turns": len(last_quarter),
        "last_quarter_occupancy_pct": {
            "min": min(after), "median": statistics.median(after), "max": max(after),
        } if after else None,
        "uncompacted_tokens": result.tokens_before,
        "uncompacted_occupancy_pct": window.occupancy_pct(result.tokens_before),
        "markers": sum(1 for m in conv.messages if m.is_marker),
        "rolling_summary_tokens": compactor.state.summary_tokens,
        "pass_ms_median": statistics.median(durations) if durations else None,
        "pass_ms_max": max(durations) if durations else None,
        "max_backlog_exchanges": max((t["backlog_exchanges"] for t in turns), default=0),
        "max_backlog_tokens": max((t["backlog_tokens"] for t in turns), default=0),
        "batch_causes": batch_causes(turns, compactor.settings.micro_compact_defrag_threshold_tokens),
        "rows": rows,
        "per_turn": turns,
    }


def anatomy(conv: Conversation, compactor) -> dict[str, int]:
    """Where the tokens are after a turn: the un-absorbed backlog between cursor and tail, the tail, the marker.

    The backlog is what micro-compaction still has to absorb, one exchange per pass;
    only a defrag (or a batch) clears it at once.
    """
    messages, counter = conv.messages, conv.counter
    tail = tail_start(messages, counter, compactor.ctx.window.tail_token_budget)
    cursor = compactor.cursor(messages)
    backlog = [m for m in messages[cursor:tail] if m.role in ("assistant", "tool") and not m.is_marker]
    return {
        "backlog_exchanges": sum(1 for m in backlog if m.role == "assistant"),
        "backlog_tokens": count_messages(counter, backlog),
        "tail_messages": len(messages) - tail,
        "tail_tokens": count_messages(counter, messages[tail:]),
        "marker_tokens": sum(count_message(counter, m) for m in messages if m.is_marker),
        "summary_tokens": compactor.state.summary_tokens,
    }


def batch_causes(turns: list[dict[str, Any]], defrag_threshold: int) -> list[str]:
    """For each batch compaction: what the transcript held at the end of the turn before it."""
    out = []
    for n, turn in enumerate(turns):
        if not any(o.startswith("batch") for o in turn["outcomes"]):
            continue
        prior = turns[n - 1] if n else None
        line = (f"batch at turn {turn['turn']}: the turn added {turn['added_tokens']:,} tokens"
                f" ({turn['tokens_before_pass']:,} = {turn['occupancy_before_pass']:.1f}% before its passes)")
        if prior is not None:
            line += (f"; after turn {prior['turn']}: backlog {prior['backlog_exchanges']} exchanges /"
                     f" {prior['backlog_tokens']:,} tokens waiting between cursor and tail, tail"
                     f" {prior['tail_messages']} messages / {prior['tail_tokens']:,} tokens, rolling summary"
                     f" {prior['summary_tokens']:,} tokens (defrag above {defrag_threshold:,})")
        out.append(line)
    return out


def sample_rows(rows: list[dict[str, Any]], target: int = SAMPLE_ROWS) -> list[dict[str, Any]]:
    """About ``target`` evenly spaced rows: the first absorbing passes, every defrag and batch, the last."""
    if len(rows) <= target:
        return rows
    step = max(1, math.ceil((len(rows) - FIRST_ROWS) / (target - FIRST_ROWS)))
    keep = set(range(min(FIRST_ROWS, len(rows))))
    keep |= set(range(FIRST_ROWS, len(rows), step))
    keep |= {i for i, r in enumerate(rows) if r["outcome"] != "absorbed"}
    keep.add(len(rows) - 1)
    return [rows[i] for i in sorted(keep)]


def _pct(value: float | None) -> str:
    return "-" if value is None else f"{value:.1f}%"


def format_run(run: dict[str, Any], all_rows: bool) -> list[str]:
    lines = [f"{run['session']} -- turns={run['mode']} ({run['turns']} turns, {run['input_messages']} messages, "
             f"{run['user_messages']} user)"]
    rows = run["rows"] if all_rows else sample_rows(run["rows"])
    if rows:
        shown = "" if all_rows or len(rows) == len(run["rows"]) else f" ({len(rows)} of {len(run['rows'])} rows)"
        lines.append(f"  trajectory{shown}:")
        lines += format_trajectory(rows, indent="    ")
    else:
        lines.append("  trajectory: no absorbed, defrag or batch passes")
    mix = ", ".join(f"{k} {v}" for k, v in sorted(run["outcomes"].items())) or "none"
    q = run["last_quarter_occupancy_pct"]
    lines += [
        f"  passes {run['micro_passes']} ({mix}); batch compactions {run['batch_compactions']}"
        + (f", batch failed {run['batch_failed']}" if run["batch_failed"] else ""),
        f"  occupancy: peak {_pct(run['peak_occupancy_pct'])} (after passes {_pct(run['peak_occupancy_after_pass_pct'])}),"
        f" final {_pct(run['final_occupancy_pct'])} ({run['final_tokens']:,} tokens, {run['final_messages']} messages,"
        f" {run['markers']} marker{'s' if run['markers'] != 1 else ''})",
        f"  last 25% of turns ({run['last_quarter_turns']}): occupancy min {_pct(q['min'])}, median {_pct(q['median'])},"
        f" max {_pct(q['max'])}" if q else "  last 25% of turns: none",
        f"  with no compaction at all: {run['uncompacted_tokens']:,} tokens = {_pct(run['uncompacted_occupancy_pct'])}"
        f" of the {run['threshold_tokens']:,}-token threshold",
    ]
    lines.append(f"  largest un-absorbed backlog after a turn: {run['max_backlog_exchanges']} exchanges,"
                 f" {run['max_backlog_tokens']:,} tokens")
    lines += [f"  {cause}" for cause in run["batch_causes"]] if run["mode"] == "step" else []
    if run["failures"]:
        lines.append(f"  failures: {', '.join(run['failures'])}")
    return lines


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("sessions", nargs="*", type=Path, help="session JSON files (default: the shared sessions)")
    parser.add_argument("--modes", nargs="+", choices=["step", "user"], default=["step", "user"])
    parser.add_argument("--context-limit", type=int, default=CONTEXT_LIMIT)
    parser.add_argument("--all-rows", action="store_true", help="print every trajectory row, not a sample")
    parser.add_argument("--json", action="store_true", help="machine-readable output (every row and turn)")
    args = parser.parse_args(argv)

    paths = args.sessions or sorted(SESSIONS.glob("*.json"))
    if not paths:
        print(f"no sessions given and none in {SESSIONS}", file=sys.stderr)
        return 2
    runs = [replay_session(path, mode, args.context_limit) for mode in args.modes for path in paths]

    if args.json:
        print(json.dumps({"summarizer": SUMMARIZER_LABEL, "context_limit": args.context_limit, "runs": runs}, indent=1))
        return 0
    first = runs[0]
    print(f"Replay benchmark -- summarizer: {SUMMARIZER_LABEL}")
    print(f"context limit {args.context_limit:,}, threshold {first['threshold_tokens']:,} tokens, tail budget "
          f"{first['tail_token_budget']:,} tokens; default compression settings; occupancy = share of the threshold")
    print("durations: the engine plus the extractive summarizer's regex work; a model call would dominate them")
    for mode in args.modes:
        print(f"\n=== turns={mode} ===")
        for run in runs:
            if run["mode"] == mode:
                print()
                print("\n".join(format_run(run, args.all_rows)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
