"""The chat turn after a compaction splice, with and without re-warming the chat's cache.

    uv run python benchmarks/bench_rewarm.py [--turns 8] [--repeats 3] [--variant fp32|q4] [--json]

On the **tiny random-weight model** (models/build_tiny.py), in-process MLX (the CPU
backend here): a plain chat of ``--turns`` exchanges is read once (a chat request:
the chat's prefix cache now holds it), then a splice replaces everything between
the head (the first three messages) and the last exchange with one summary marker,
as a compaction pass does. The next chat turn (the spliced context plus a new user
message, 4 generated tokens) is measured:

* ``cold``: right after the splice, as without re-warming: the cache reuses only
  the head, and the turn prefills the rest;
* ``re-warmed``: after ``MlxChatClient.warm`` on the spliced context (what
  ``Session.publish_pass`` calls after a splice, ``compression.rewarm``) has run
  in the background; the turn then prefills only the new user message.

Printed per case (median of ``--repeats``): prompt tokens, cached tokens, prefilled
tokens, and the turn's time; then the ratios re-warmed / cold. The warm's own time
is printed too: it is spent while the chat is idle (the user reading or typing), not
in the turn. What it cannot show: a real model's speed (the tiny model is small and
random), and whether the user's next message comes after the warm has finished.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from hermes_tui.core.transcript import MICRO, Message, make_marker, wire_view
from hermes_tui.providers.mlx.chat import CACHE_KEY, MlxChatClient
from hermes_tui.providers.mlx.runtime import MlxRuntime

REPO = Path(__file__).resolve().parents[1]
WORDS = ("parser", "token", "branch", "schema", "cursor", "window", "fixture", "buffer", "socket", "report")
HEAD = 3


def chat(turns: int) -> list[Message]:
    messages = []
    for n in range(turns):
        messages.append(Message("user", f"Question {n}: what about the {WORDS[n % 10]}?"))
        body = " ".join(f"{WORDS[(n + k) % 10]} {k}" for k in range(40))
        messages.append(Message("assistant", f"Answer {n}: {body}."))
    return messages


def spliced(messages: list[Message]) -> list[Message]:
    """Head, one summary marker for the middle, the last exchange: a splice's shape."""
    middle = messages[HEAD:-2]
    summary = "\n".join(f"- {m.content[:60]}" for m in middle if m.role == "assistant")
    marker = make_marker(MICRO, summary, covers=[m.id for m in middle])
    return messages[:HEAD] + [marker] + messages[-2:]


def one(model: str, turns: int, rewarm: bool) -> dict[str, Any]:
    runtime = MlxRuntime()
    client = MlxChatClient(model, runtime=runtime, timeout=3600)
    loaded = runtime.load(model)
    try:
        before = chat(turns)
        runtime.generate(loaded, wire_view(before), max_tokens=4, cache_key=CACHE_KEY)  # the cache holds it
        after = spliced(before)
        warm_s = None
        if rewarm:
            started = time.perf_counter()
            client.warm(wire_view(after))
            client.last_warm.result()  # the chat is idle meanwhile
            warm_s = time.perf_counter() - started
        request = wire_view(after + [Message("user", "And what next?")])
        stats = runtime.generate(loaded, request, max_tokens=4, cache_key=CACHE_KEY)
        return {
            "prompt_tokens": stats.prompt_tokens,
            "cached_tokens": stats.cached_tokens,
            "prefill_tokens": stats.prompt_tokens - stats.cached_tokens,
            "turn_s": stats.duration_s,
            "warm_s": warm_s,
            "tokens_before_splice": len(runtime.prompt_tokens(loaded, wire_view(before))),
        }
    finally:
        runtime.release()


def median_of(rows: list[dict[str, Any]]) -> dict[str, Any]:
    out = {}
    for key in rows[0]:
        values = [r[key] for r in rows if r[key] is not None]
        out[key] = statistics.median(values) if values else None
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--turns", type=int, default=8)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--variant", choices=["fp32", "q4"], default="fp32")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    sys.path.insert(0, str(REPO / "models"))
    import build_tiny

    model = str(build_tiny.build(Path(tempfile.mkdtemp(prefix="bench_rewarm_")))[args.variant])
    one(model, 2, False)  # the first load and MLX's own warm-up stay out of the figures
    cases = {
        "cold": median_of([one(model, args.turns, False) for _ in range(args.repeats)]),
        "re-warmed": median_of([one(model, args.turns, True) for _ in range(args.repeats)]),
    }
    cold, warm = cases["cold"], cases["re-warmed"]
    ratios = {
        "prefill_tokens": round(warm["prefill_tokens"] / cold["prefill_tokens"], 3),
        "turn_s": round(warm["turn_s"] / cold["turn_s"], 3),
    }
    if args.json:
        print(json.dumps({"variant": args.variant, "turns": args.turns, "cases": cases, "ratios": ratios}, indent=1))
        return 0
    print(f"Next chat turn after a splice: tiny model ({args.variant}, MLX in-process), {args.turns}-exchange chat"
          f" ({cold['tokens_before_splice']:.0f} tokens before the splice), median of {args.repeats}")
    print(f"{'':<10} {'prompt':>7} {'cached':>7} {'prefill':>8} {'turn s':>8} {'warm s (idle)':>14}")
    for name, row in cases.items():
        warm_s = "-" if row["warm_s"] is None else f"{row['warm_s']:.3f}"
        print(f"{name:<10} {row['prompt_tokens']:>7.0f} {row['cached_tokens']:>7.0f} {row['prefill_tokens']:>8.0f}"
              f" {row['turn_s']:>8.3f} {warm_s:>14}")
    print(f"re-warmed / cold: prefill tokens {ratios['prefill_tokens']:.3f}x, turn time {ratios['turn_s']:.3f}x")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
