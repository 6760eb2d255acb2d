"""A long agent turn through the real loop: does occupancy flatten?

    uv run python benchmarks/bench_long_turn.py [--steps 200] [--context-limit 32768]
                                                [--policies watermark per_exchange]
                                                [--summarizer-delay 0.0] [--every 10] [--json]

One user message, then ``--steps`` model calls of a scripted chat model (a pure double:
it answers in about a millisecond, so passes can only fall behind it) that reads and
greps this repository's own source tree and runs commands in it, then a final answer.
Everything else is real: ``AgentTurn`` (session/agent.py) with the built-in tools on the
real files (approval mode ``full``: nothing asks), the real store in a temporary
folder, background passes (session/passes.py) with the extractive summarizer (no model;
``--summarizer-delay`` makes each summarizer call take that long, standing in for a
small model), and the compaction policy of ``compression.policy``.

Per step, before its model call: the request's size as % of the compaction threshold
(occupancy), and the pass lag: complete exchanges between the summary (or the head)
and the tail, waiting to be absorbed. Printed every ``--every`` steps, then per policy:
occupancy over the last half of the turn (it must flatten: its max stays under the
threshold, about where it was at mid-turn), batch compactions (0), the largest lag
(bounded), micro passes and splices (cache breaks), and the longest the loop waited for
compaction before a model call.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from hermes_tui.chat.client import ChatDelta, ChatDone, Usage
from hermes_tui.compaction.markers import is_marker
from hermes_tui.compaction.window import head_end, tail_start
from hermes_tui.config import Config
from hermes_tui.providers.extractive.summarizer import ExtractiveSummarizer
from hermes_tui.session.agent import AgentListener, AgentTurn, Tools
from hermes_tui.session.wiring import open_session
from hermes_tui.store import Store
from hermes_tui.tools.approval import Mode
from hermes_tui.tools.builtin import builtin_registry
from hermes_tui.tools.workspace import Workspace

ROOT = Path(__file__).resolve().parents[1]
GREPS = ("def ", "class ", "import ", "return ", "self\\.", "log\\.", "raise ", "with ", "for ", "if not")
COMMANDS = ("git log --oneline -5", "wc -l hermes_tui/compaction/*.py", "ls hermes_tui/session",
            "python3 -c 'print(sum(range(1000)))'", "git status --short | head -5")


def source_files() -> list[str]:
    out = subprocess.run(["git", "ls-files", "hermes_tui/*.py"], cwd=ROOT, capture_output=True, text=True)
    files = sorted(line for line in out.stdout.splitlines() if line)
    return files or sorted(str(p.relative_to(ROOT)) for p in (ROOT / "hermes_tui").rglob("*.py"))


def script(steps: int) -> list[tuple[str, list[dict] | None]]:
    """Step n: a read (80 lines of a source file), a grep or a command, in turn."""
    files = source_files()
    replies: list[tuple[str, list[dict] | None]] = []
    for n in range(steps):
        if n % 3 == 0:
            name, args = "read_file", {"path": files[n % len(files)], "offset": 1, "limit": 80}
        elif n % 3 == 1:
            name, args = "grep", {"pattern": GREPS[n % len(GREPS)], "path": "hermes_tui/compaction",
                                  "max_results": 40}
        else:
            name, args = "run_shell", {"command": COMMANDS[n % len(COMMANDS)]}
        call = {"id": f"call_{n}", "type": "function", "function": {"name": name, "arguments": json.dumps(args)}}
        replies.append((f"Step {n}: looking at {args.get('path') or args.get('command') or args['pattern']}.", [call]))
    replies.append(("Done: read, searched and ran what the task needed.", None))
    return replies


class ScriptedChat:
    """The chat model's double: plays the script, about a millisecond per reply."""

    model_name = "scripted"
    max_tokens = 256
    supports_tools = True

    def __init__(self, replies):
        self.replies = list(replies)

    def stream(self, messages, *, max_tokens=None, stop=None, cancel=None, tools=None, must_call=None):
        time.sleep(0.001)
        text, calls = self.replies.pop(0) if self.replies else ("(script ran out)", None)
        yield ChatDelta(text)
        yield ChatDone(text, Usage(prompt_tokens=None, completion_tokens=None,
                                   finish_reason="tool_calls" if calls else "stop"), tool_calls=calls)


class SlowExtractive(ExtractiveSummarizer):
    def __init__(self, delay: float) -> None:
        super().__init__()
        self.delay = delay

    def summarize(self, request, *, max_tokens):
        if self.delay:
            time.sleep(self.delay)
        return super().summarize(request, max_tokens=max_tokens)


def waiting_exchanges(messages, protect_first_n: int, counter, tail_budget: int) -> int:
    """Complete exchanges between the summary (or the head) and the tail: the pass lag."""
    start = head_end(messages, protect_first_n)
    for n, message in enumerate(messages):
        if is_marker(message):
            start = max(start, n + 1)
    tail = tail_start(messages, counter, tail_budget)
    return sum(1 for m in messages[start:tail] if m.role == "assistant" and not is_marker(m))


class Watch(AgentListener):
    def __init__(self, turn_ref: dict, session) -> None:
        self.turn_ref, self.session = turn_ref, session
        self.rows: list[dict[str, Any]] = []
        self.splices = 0
        self._step_started = 0.0

    def step_started(self, step: int) -> None:
        session = self.session
        compactor = session.compactor
        window = compactor.ctx.window
        with session.lock:
            messages = list(session.conv.messages)
            tokens = session.conv.total_tokens
        lag = waiting_exchanges(messages, compactor.settings.protect_first_n, compactor.ctx.counter,
                                window.tail_token_budget)
        turn = self.turn_ref.get("turn")
        self.rows.append({"step": step, "tokens": tokens, "occupancy_pct": window.occupancy_pct(tokens),
                          "lag": lag, "queued": turn.passes.queued if turn else 0})

    def pass_published(self, report) -> None:
        self.splices += 1  # one per publication: the passes of one decision land together


def run(policy: str, steps: int, context_limit: int, delay: float) -> dict[str, Any]:
    config = Config().with_overrides({
        "model.context_length": context_limit, "auxiliary.compression.provider": "extractive",
        "compression.policy": policy,
    })
    with tempfile.TemporaryDirectory() as tmp:
        store = Store(Path(tmp) / "state.db")
        session = open_session(config, store, title="long turn", chat=ScriptedChat(script(steps)),
                               summarizer=SlowExtractive(delay))
        session.resolve_context_window()
        session.add_user_message("Survey the compaction package: read its files, grep it, run a few commands.")
        tools = Tools(registry=builtin_registry(), workspace=Workspace(ROOT), mode=Mode.FULL)
        ref: dict = {}
        watch = Watch(ref, session)
        turn = AgentTurn(session, tools, listener=watch, max_steps=steps + 1)
        ref["turn"] = turn
        started = time.perf_counter()
        try:
            result = turn.run()
            waited = turn.passes.waited_s
            turn.passes.settle()
        finally:
            session.close()
            store.close()
        seconds = time.perf_counter() - started
    reports = turn.passes.published
    batch = [r for r in reports if r.kind != "micro" and r.outcome == "compressed"]
    rows = watch.rows
    half = rows[len(rows) // 2:]
    occupancy = [r["occupancy_pct"] for r in rows]
    return {
        "policy": policy, "steps": result.steps, "outcome": result.outcome, "seconds": round(seconds, 1),
        "rows": rows,
        "occupancy_mid_pct": occupancy[len(occupancy) // 2],
        "occupancy_end_pct": occupancy[-1],
        "occupancy_second_half_min_pct": min(r["occupancy_pct"] for r in half),
        "occupancy_second_half_max_pct": max(r["occupancy_pct"] for r in half),
        "occupancy_peak_pct": max(occupancy),
        "batch_compactions": len(batch),
        "micro_passes": session.compactor.state.passes_total,
        "splices": watch.splices,
        "waited_s": round(waited, 2),
        "max_lag": max(r["lag"] for r in rows),
        "max_queued": max(r["queued"] for r in rows),
        "high_water_pct": round(100 * config.compression.high_water, 1),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--steps", type=int, default=200)
    parser.add_argument("--context-limit", type=int, default=32_768)
    parser.add_argument("--policies", nargs="+", default=["watermark", "per_exchange"],
                        choices=["watermark", "per_exchange", "per_turn"])
    parser.add_argument("--summarizer-delay", type=float, default=0.0, metavar="S",
                        help="seconds each summarizer call takes (a stand-in for a model)")
    parser.add_argument("--every", type=int, default=10, help="print every N-th step")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    results = [run(policy, args.steps, args.context_limit, args.summarizer_delay) for policy in args.policies]
    if args.json:
        print(json.dumps(results, indent=1))
        return 0
    print(f"Long agent turn: {args.steps} steps of a scripted model over this repository, "
          f"{args.context_limit:,}-token window, extractive summarizer"
          f" (+{args.summarizer_delay:g} s per call)")
    print("occupancy: request size before each model call, % of the compaction threshold;"
          " lag: complete exchanges waiting to be absorbed")
    print()
    print(f"{'step':>5} " + " ".join(f"{r['policy'] + ' occ%':>18} {'lag':>4}" for r in results))
    for index in range(0, len(results[0]["rows"]), args.every):
        cells = []
        for r in results:
            row = r["rows"][index] if index < len(r["rows"]) else None
            cells.append(f"{row['occupancy_pct']:>18.1f} {row['lag']:>4}" if row else f"{'':>18} {'':>4}")
        print(f"{index + 1:>5} " + " ".join(cells))
    print()
    for r in results:
        print(f"{r['policy']}: {r['outcome']} after {r['steps']} steps in {r['seconds']} s;"
              f" occupancy mid {r['occupancy_mid_pct']}%, end {r['occupancy_end_pct']}%,"
              f" second half {r['occupancy_second_half_min_pct']}-{r['occupancy_second_half_max_pct']}%,"
              f" peak {r['occupancy_peak_pct']}%; batch {r['batch_compactions']};"
              f" micro passes {r['micro_passes']} in {r['splices']} splices; max lag {r['max_lag']} exchanges"
              f" (max queued requests {r['max_queued']}); the loop waited {r['waited_s']} s for compaction")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
