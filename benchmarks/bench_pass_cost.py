"""What a micro pass costs the model in merge mode and in append mode, on the tiny model.

    uv run python benchmarks/bench_pass_cost.py [SESSION.json] [--passes 50] [--variant q4|fp32] [--json]

Merge: the model rewrites the whole summary with the exchange folded in, so it
generates O(summary) tokens per pass. Append: it writes only the lines the exchange
adds, O(exchange), and the engine appends them, so the summary is a byte-identical
prefix of the next pass's prompt.

What this can and cannot show. The figures come in three kinds, printed apart:

* **Measured here**: prompt, prefill (prompt tokens not served from the prefix cache)
  and cached tokens, and the prefill time. These are what MLX really did with the
  prompts each mode sends; the tiny model's weights do not change them.
* **Set by the engine**: the generation budget (``max_tokens``) the engine grants a
  pass in each mode (``micro.generation_budget``): the most a model may generate
  before the pass is cut off. It bounds what a real model costs; it is not what one
  generates.
* **Inputs, not measurements**: the tiny model never stops, so it generates exactly
  the budget this benchmark gives it (what the extractive summary needed), and the
  generated tokens, their time and the pass time follow from that choice. Their
  append / merge ratio restates the benchmark's own budgets. What a real model
  generates per mode, and so a pass's real time, only a real model shows
  (``hermes-tui bench`` with one, docs/benchmarks.md).

Method, and why it is fair:

* The model is the **tiny random-weight model** (models/build_tiny.py, built into a
  temp dir), run in-process by MLX (``MlxSummarizer``, the app's own backend, with its
  prefix cache), one runtime per mode so the two caches never mix. Its output is
  noise: only token counts and times mean anything.
* It never emits an end token, so it generates exactly ``max_tokens``. Each mode is
  given the budget it would need: merge, the tokens of the whole new summary; append,
  the tokens of the new lines only. That is the structural O(summary) vs O(exchange)
  difference, and it is what a real model that stops when done would generate.
* A real summary state is needed (the tiny model's own summaries are cut off and
  rejected, so its summary would never grow). The summary trajectory comes from a
  replay of a real session with the extractive summarizer through the engine, in the
  app's default settings; pass k of both modes is then the prompt that pass would send:
  the same summary and the same exchange, rendered by ``absorb_prompt`` (merge) or
  ``append_prompt`` (append). Defrag passes are the same in both modes and not timed.
* Prefill and cached tokens are real: they are what MLX prefilled and reused. Merge is
  shown at its best here, because the replayed summary only ever grows at its end; a
  model that rewrites the summary changes it early and the cache then covers only the
  static instructions. That worst case is computed (not timed) and printed too.
* The passes of the two modes alternate, so drift in the machine's speed hits both.

Token counts are the tiny model's tokenizer's (a 1,024-token vocabulary: about twice as
many tokens per text as a real model's).
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

from hermes_tui.analysis.replay import replay
from hermes_tui.compaction.micro import generation_budget
from hermes_tui.compaction.prompts import absorb_prompt, append_prompt
from hermes_tui.compaction.summary_request import SummaryRequest
from hermes_tui.config import Config
from hermes_tui.core.conversation import Conversation
from hermes_tui.core.tokens import count_messages
from hermes_tui.core.transcript import parse_transcript
from hermes_tui.providers.extractive.summarizer import ExtractiveSummarizer
from hermes_tui.providers.mlx.runtime import MlxRuntime, common_prefix
from hermes_tui.providers.mlx.summarizer import MlxSummarizer
from hermes_tui.session.wiring import make_compactor, make_counter

REPO = Path(__file__).resolve().parents[1]
SESSIONS = Path(__file__).resolve().parents[2] / "shared" / "data" / "sessions"
DEFAULT_SESSION = SESSIONS / "msa2_deepseekchat_django-11019.json"
CONTEXT_LIMIT = 32_768


class Recording(ExtractiveSummarizer):
    """The extractive summarizer, keeping every request and what it answered."""

    def __init__(self) -> None:
        super().__init__()
        self.calls: list[tuple[SummaryRequest, str]] = []

    def summarize(self, request: SummaryRequest, *, max_tokens: int):
        completion = super().summarize(request, max_tokens=max_tokens)
        self.calls.append((request, completion.text))
        return completion


def trajectory(path: Path) -> tuple[list[tuple[str, list, str]], int, Any]:
    """(summary sent, exchange, new lines) of each append pass of a replay in the app's
    default settings, how many defrags the replay ran, and the compactor's pass context."""
    messages = parse_transcript(path.read_text(encoding="utf-8"), source=str(path))
    config = Config().with_overrides({"compression.micro_compact_mode": "append"})
    counter = make_counter(config)
    recorder = Recording()
    compactor = make_compactor(config, counter=counter, summarizer=recorder, context_limit=CONTEXT_LIMIT)
    replay(messages, Conversation(counter=counter), compactor, turns="step")
    passes = [(r.summary, r.messages, text) for r, text in recorder.calls if r.kind == "append"]
    return passes, sum(1 for r, _ in recorder.calls if r.kind == "defrag"), compactor.ctx


def engine_budgets(ctx, summary: str, exchange: list) -> dict[str, int]:
    """The ``max_tokens`` the engine grants each mode's pass (by the app's token count, as
    ``micro._absorb`` computes it): merge may rewrite summary and exchange, append may
    add at most the exchange."""
    exchange_tokens = count_messages(ctx.counter, exchange)
    summary_tokens = ctx.counter.count_text(summary)
    return {
        "merge": generation_budget(ctx, exchange_tokens + summary_tokens),
        "append": generation_budget(ctx, exchange_tokens),
    }


def tiny_tokens(runtime: MlxRuntime, loaded, text: str) -> int:
    return len(loaded.tokenizer.encode(text, add_special_tokens=False)) if text else 0


def worst_case_cached(runtime: MlxRuntime, loaded, summary: str, exchange: list) -> int:
    """Cached tokens of a merge pass whose previous summary differed from its first character."""
    tokens = runtime.prompt_tokens(loaded, absorb_prompt(summary, exchange))
    other = runtime.prompt_tokens(loaded, absorb_prompt("\x00" + summary, exchange))
    return common_prefix(tokens, other)


def run(args) -> dict[str, Any]:
    sys.path.insert(0, str(REPO / "models"))
    import build_tiny

    out_dir = Path(tempfile.mkdtemp(prefix="bench_pass_cost_"))
    model = str(build_tiny.build(out_dir)[args.variant])
    passes, defrags, ctx = trajectory(args.session)
    passes = passes[: args.passes]
    modes = {
        "merge": MlxSummarizer(model, runtime=MlxRuntime(), timeout=3600),
        "append": MlxSummarizer(model, runtime=MlxRuntime(), timeout=3600),
    }
    probe_runtime = modes["merge"].runtime
    loaded = probe_runtime.load(model)
    rows: list[dict[str, Any]] = []
    started = time.perf_counter()
    for k, (summary, exchange, added) in enumerate(passes):
        merged = f"{summary}\n{added}" if summary else added
        plan = {
            "merge": (absorb_prompt(summary, exchange), max(1, tiny_tokens(probe_runtime, loaded, merged))),
            "append": (append_prompt(summary, exchange), max(1, tiny_tokens(probe_runtime, loaded, added))),
        }
        row: dict[str, Any] = {"pass": k + 1, "summary_tokens": tiny_tokens(probe_runtime, loaded, summary)}
        granted = engine_budgets(ctx, summary, exchange)
        order = ("merge", "append") if k % 2 == 0 else ("append", "merge")
        for mode in order:
            prompt, budget = plan[mode]
            c = modes[mode].complete(prompt, max_tokens=budget)
            row[mode] = {
                "prompt_tokens": c.prompt_tokens, "cached_tokens": c.cached_tokens,
                "prefill_tokens": c.prompt_tokens - c.cached_tokens, "generated_tokens": c.completion_tokens,
                "budget": budget, "engine_budget": granted[mode], "seconds": c.duration_s,
                "prefill_s_est": (c.prompt_tokens - c.cached_tokens) / c.prompt_tps if c.prompt_tps else None,
                "generation_s_est": c.completion_tokens / c.generation_tps if c.generation_tps else None,
            }
        worst = worst_case_cached(probe_runtime, loaded, summary, exchange)
        row["merge_rewrite_prefill"] = row["merge"]["prompt_tokens"] - worst
        rows.append(row)
        progress(k + 1, len(passes), started)
    if sys.stderr.isatty():
        sys.stderr.write("\n")
    return {"session": args.session.name, "variant": args.variant, "passes": len(rows), "defrags_in_replay": defrags,
            "wall_s": time.perf_counter() - started, "rows": rows}


def progress(done: int, total: int, started: float) -> None:
    """On stderr, so --json output stays clean: in place on a terminal, every 5th pass in a log."""
    line = f"  pass {done}/{total}  ({time.perf_counter() - started:.0f} s)"
    if sys.stderr.isatty():
        sys.stderr.write("\r" + line)
    elif done % 5 == 0 or done == total:
        sys.stderr.write(line + "\n")
    sys.stderr.flush()


def medians(rows: list[dict[str, Any]], mode: str) -> dict[str, float]:
    keys = ("generated_tokens", "prefill_tokens", "cached_tokens", "prompt_tokens", "seconds",
            "prefill_s_est", "generation_s_est", "engine_budget")
    out = {}
    for key in keys:
        values = [r[mode][key] for r in rows if r[mode][key] is not None]
        out[key] = statistics.median(values) if values else None
    return out


def report(result: dict[str, Any]) -> str:
    rows = result["rows"]
    m, a = medians(rows, "merge"), medians(rows, "append")
    rewrite = statistics.median(r["merge_rewrite_prefill"] for r in rows)
    summary = statistics.median(r["summary_tokens"] for r in rows)

    def ratio(key: str) -> str:
        return f"{a[key] / m[key]:.2f}" if m[key] else "-"

    lines = [
        f"Pass cost, merge vs append: tiny model ({result['variant']}, MLX in-process, CPU), "
        f"{result['passes']} passes of {result['session']}",
        f"  median summary sent: {summary:,.0f} tokens; defrags in the replay: {result['defrags_in_replay']} "
        "(the same in both modes, not timed). Tiny-tokenizer tokens unless said.",
        "",
        f"  {'median per pass':<34}{'merge':>10}{'append':>10}{'append/merge':>15}",
    ]

    def rows_of(title: str, spec) -> None:
        lines.append(f"  {title}")
        for label, key, fmt in spec:
            lines.append(f"    {label:<32}{fmt.format(m[key]):>10}{fmt.format(a[key]):>10}{ratio(key):>15}")

    rows_of("measured here (what MLX did with each mode's prompt):", (
        ("prompt tokens", "prompt_tokens", "{:,.0f}"),
        ("prefill tokens", "prefill_tokens", "{:,.0f}"),
        ("cached tokens", "cached_tokens", "{:,.0f}"),
        ("prefill time (est.), s", "prefill_s_est", "{:.2f}"),
    ))
    lines += [
        f"    {'share of the prompt cached':<32}{100 * m['cached_tokens'] / m['prompt_tokens']:>9.0f}%"
        f"{100 * a['cached_tokens'] / a['prompt_tokens']:>9.0f}%",
        f"    {'prefill if a rewrite moves line 1':<32}{rewrite:>10,.0f}{a['prefill_tokens']:>10,.0f}"
        "   (merge: computed, not timed)",
    ]
    rows_of("set by the engine (app token count): the most a pass may generate", (
        ("max_tokens granted", "engine_budget", "{:,.0f}"),
    ))
    rows_of("inputs, not measurements (the tiny model generates the budget this benchmark sets):", (
        ("generated tokens (= budget)", "generated_tokens", "{:,.0f}"),
        ("generation time (est.), s", "generation_s_est", "{:.2f}"),
        ("pass time (model call), s", "seconds", "{:.2f}"),
    ))
    totals = {mode: sum(r[mode]["seconds"] for r in rows) for mode in ("merge", "append")}
    lines += [
        f"    {'total model time, s':<32}{totals['merge']:>10.1f}{totals['append']:>10.1f}"
        f"{totals['append'] / totals['merge']:>15.2f}",
        "",
        "  What a real model generates within its grant, and so a pass's real time, only a real model shows.",
        f"  (wall time {result['wall_s']:.0f} s)",
    ]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("session", nargs="?", type=Path, default=DEFAULT_SESSION)
    parser.add_argument("--passes", type=int, default=50)
    parser.add_argument("--variant", choices=["q4", "fp32"], default="q4")
    parser.add_argument("--json", action="store_true", help="print the figures as JSON instead")
    parser.add_argument("--json-out", type=Path, help="also write the figures, every pass included, as JSON here")
    args = parser.parse_args(argv)
    result = run(args)
    document = {**result, "medians": {mode: medians(result["rows"], mode) for mode in ("merge", "append")}}
    if args.json_out:
        args.json_out.write_text(json.dumps(document, indent=1))
    print(json.dumps(document, indent=1) if args.json else report(result))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
