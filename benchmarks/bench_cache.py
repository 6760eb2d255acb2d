"""What compaction costs the chat model's prefix cache: total prefill per session, by policy.

    uv run python benchmarks/bench_cache.py [--sessions SESSION.json ...] [--context-limit 32768 8192]
                                            [--high 0.85] [--low 0.55] [--reply-cached] [--json]

Sessions default to ../shared/data/sessions/*.json. Each is replayed step by step
through the real engine (``Compactor.finalize_turn`` after every agent step, which asks
the engine's compaction policy what runs: ``hermes_tui.compaction.policy``; default
compression settings, the built-in **extractive summarizer: no model,
deterministic**), once per policy:

* ``batch-only``: no micro passes; batch compaction when the transcript is over the
  threshold after a step (``compression.micro_compact: false``);
* ``per-exchange``: ``compression.policy: per_exchange``, a pass after every agent step;
* ``per-turn``: ``compression.policy: per_turn``, one pass when a step ends the user's
  turn (a reply without calls: the spec's schedule); batch when over the threshold;
* ``watermark``: ``compression.policy: watermark`` (the default) with ``--high`` /
  ``--low``: no pass until the transcript crosses the high mark after a step, then the
  engine's passes back to back (one splice: no chat request between them) down to the
  low mark. Marks are shares of the compaction threshold.

The chat requests: one before each assistant message of the original transcript, the
request being ``wire_view`` of the compacted transcript up to there (what
``Session.reply`` sends). Its tokens are the project's token counter over each wire
message (``count_message``, so merged messages are counted as sent).

The cache rule (``hermes_tui.compaction.prefix``): a request reuses the tokens of its
longest run of leading wire messages equal (role, content, tool calls, tool call id) to
the previous request's at the same index, and prefills the rest; the first request is
prefilled whole. This is message-granular: a token-level prefix cache would also reuse
the common start of the first differing message, so prefill is slightly over-counted,
for every policy alike. By default the reply the model generated is not in the cache
(a hosted prompt cache keeps only prompts); ``--reply-cached`` puts it there, as a
server that keeps its slot's generated tokens does (llama.cpp, mlx_lm.server): the
next request is then compared with the previous request plus its reply.

Figures: total prefill and reused tokens over the session's requests; peak and mean
request size (context), also as % of the threshold; batch compactions; micro passes run
(whatever their outcome); cache breaks (requests that do not reuse the whole previous
request: a splice in between, or a new message merged into the last one). Ratios are
against batch-only. No timing figures: the same output on every run.

Goal (issue 15) for the policy of choice: total prefill <= 1.3x batch-only's, peak
context <= the high watermark, 0 batch compactions.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import Counter
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from hermes_tui.analysis.replay import exchange_ends
from hermes_tui.compaction.engine import PassReport
from hermes_tui.compaction.prefix import CacheTally, request_cost
from hermes_tui.config import Config
from hermes_tui.core.conversation import Conversation
from hermes_tui.core.tokens import TokenCounter, count_message
from hermes_tui.core.transcript import MICRO, Message, TranscriptError, parse_transcript, wire_view
from hermes_tui.providers.extractive.summarizer import ExtractiveSummarizer
from hermes_tui.session.wiring import make_compactor, make_counter

SESSIONS = Path(__file__).resolve().parents[2] / "shared" / "data" / "sessions"
SUMMARIZER_LABEL = "extractive summarizer (no model), not an LLM"
CONTEXT_LIMITS = [32_768]
POLICIES = ("batch-only", "per-exchange", "per-turn", "watermark")
BASELINE = "batch-only"
HIGH_WATERMARK = Config().compression.high_water
LOW_WATERMARK = Config().compression.low_water
POLICY_KEYS = {"per-exchange": "per_exchange", "per-turn": "per_turn", "watermark": "watermark"}
PREFILL_GOAL_RATIO = 1.3


class WireTokens:
    """Tokens of wire messages, memoized on their JSON (most messages recur in every request)."""

    def __init__(self, counter: TokenCounter):
        self.counter = counter
        self._memo: dict[str, int] = {}

    def __call__(self, wire: list[dict[str, Any]]) -> list[int]:
        out = []
        for item in wire:
            key = json.dumps(item, sort_keys=True)
            if key not in self._memo:
                self._memo[key] = count_message(self.counter, Message.from_openai(item))
            out.append(self._memo[key])
        return out


def replay_policy(
    messages: list[Message], policy: str, *, context_limit: int, high: float, low: float, session_id: str,
    reply_cached: bool = False,
) -> dict[str, Any]:
    """Replay one session under one policy; the cache tally and the engine's counts."""
    config = Config()  # default compression settings, whatever the local config.yaml says
    if policy == BASELINE:
        config = config.with_overrides({"compression.micro_compact": False})
    else:
        config = config.with_overrides({
            "compression.policy": POLICY_KEYS[policy], "compression.high_water": high, "compression.low_water": low,
        })
    counter = make_counter(config)
    compactor = make_compactor(
        config, counter=counter, summarizer=ExtractiveSummarizer(), context_limit=context_limit, session_id=session_id
    )
    threshold = compactor.ctx.window.threshold_tokens
    high_tokens, low_tokens = int(high * threshold), int(low * threshold)
    step_ends = dict(exchange_ends(messages, "step"))
    tokens_of = WireTokens(counter)
    conv = Conversation(counter=counter)
    tally = CacheTally()
    previous: list[dict[str, Any]] = []
    reports: list[PassReport] = []
    cache_breaks = 0

    for index, message in enumerate(messages):
        if message.role == "assistant":
            request = wire_view(conv.messages)
            cost = request_cost(previous, request, tokens_of(request))
            if previous and cost.common_messages < len(previous):
                cache_breaks += 1
            tally.add(cost)
            previous = request
        conv.append(message)
        if reply_cached and message.role == "assistant":
            previous = wire_view(conv.messages)
        end = index + 1
        if end in step_ends:  # the policy decides, as in the app and the agent loop
            reports += compactor.finalize_turn(conv, turn_ended=step_ends[end])

    micro = [r.outcome for r in reports if r.kind == MICRO]

    return {
        "policy": policy,
        "threshold_tokens": threshold,
        "high_watermark_tokens": high_tokens,
        "low_watermark_tokens": low_tokens,
        "requests": tally.requests,
        "prefill_tokens": tally.prefill_tokens,
        "reused_tokens": tally.reused_tokens,
        "request_tokens": tally.total_tokens,
        "peak_context_tokens": tally.peak_tokens,
        "mean_context_tokens": round(tally.mean_tokens, 1),
        "peak_context_pct": _share(tally.peak_tokens, threshold),
        "mean_context_pct": _share(tally.mean_tokens, threshold),
        "batch_compactions": compactor.batch_compactions,
        "micro_passes": len(micro),
        "micro_outcomes": dict(sorted(Counter(micro).items())),
        "cache_breaks": cache_breaks,
    }


def _share(tokens: float, threshold: int) -> float:
    return round(100.0 * tokens / threshold, 1)


def with_ratios(runs: dict[str, dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """Each policy's figures plus its prefill and peak as ratios of batch-only's."""
    base = runs[BASELINE]
    for run in runs.values():
        run["prefill_ratio"] = _ratio(run["prefill_tokens"], base["prefill_tokens"])
        run["peak_ratio"] = _ratio(run["peak_context_tokens"], base["peak_context_tokens"])
        run["mean_ratio"] = _ratio(run["mean_context_tokens"], base["mean_context_tokens"])
    return runs


def _ratio(value: float, base: float) -> float | None:
    return round(value / base, 3) if base else None


def totals(per_session: list[dict[str, dict[str, Any]]]) -> dict[str, dict[str, Any]]:
    """Sums over sessions; peak is the largest, mean is over all requests."""
    out: dict[str, dict[str, Any]] = {}
    threshold = per_session[0][BASELINE]["threshold_tokens"]
    for policy in POLICIES:
        runs = [session[policy] for session in per_session]
        requests = sum(r["requests"] for r in runs)
        request_tokens = sum(r["request_tokens"] for r in runs)
        mean = request_tokens / requests if requests else 0.0
        peak = max(r["peak_context_tokens"] for r in runs)
        out[policy] = {
            "policy": policy,
            "threshold_tokens": threshold,
            "high_watermark_tokens": runs[0]["high_watermark_tokens"],
            "requests": requests,
            "prefill_tokens": sum(r["prefill_tokens"] for r in runs),
            "reused_tokens": sum(r["reused_tokens"] for r in runs),
            "request_tokens": request_tokens,
            "peak_context_tokens": peak,
            "mean_context_tokens": round(mean, 1),
            "peak_context_pct": _share(peak, threshold),
            "mean_context_pct": _share(mean, threshold),
            "batch_compactions": sum(r["batch_compactions"] for r in runs),
            "micro_passes": sum(r["micro_passes"] for r in runs),
            "micro_outcomes": dict(sorted(sum((Counter(r["micro_outcomes"]) for r in runs), Counter()).items())),
            "cache_breaks": sum(r["cache_breaks"] for r in runs),
        }
    return with_ratios(out)


def goals(run: dict[str, Any]) -> dict[str, bool]:
    return {
        "prefill_within_1.3x": run["prefill_ratio"] is not None and run["prefill_ratio"] <= PREFILL_GOAL_RATIO,
        "peak_within_high_watermark": run["peak_context_tokens"] <= run["high_watermark_tokens"],
        "no_batch": run["batch_compactions"] == 0,
    }


def load_sessions(paths: list[Path]) -> list[tuple[Path, list[Message]]]:
    """Every session parsed up front, so a bad file stops the run before any figure is printed."""
    out = []
    for path in paths:
        try:
            text = path.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            raise TranscriptError(f"{path}: cannot read ({exc.__class__.__name__}: {exc})") from None
        out.append((path, parse_transcript(text, source=str(path))))
    return out


def run_limit(
    sessions_in: list[tuple[Path, list[Message]]], context_limit: int, high: float, low: float,
    reply_cached: bool = False,
) -> dict[str, Any]:
    sessions = []
    for path, messages in sessions_in:
        runs = {
            policy: replay_policy(
                messages, policy, context_limit=context_limit, high=high, low=low, session_id=path.stem,
                reply_cached=reply_cached,
            )
            for policy in POLICIES
        }
        sessions.append({"session": path.name, "messages": len(messages), "policies": with_ratios(runs)})
    total = totals([s["policies"] for s in sessions])
    return {
        "context_limit": context_limit,
        "threshold_tokens": total[BASELINE]["threshold_tokens"],
        "high_watermark": high,
        "low_watermark": low,
        "reply_cached": reply_cached,
        "sessions": sessions,
        "totals": total,
        "goals": {policy: goals(total[policy]) for policy in POLICIES if policy != BASELINE},
    }


HEADER = (f"{'policy':<13} {'prefill':>9} {'reused':>9} {'peak':>7} {'peak%':>6} {'mean':>7} {'mean%':>6}"
          f" {'batch':>5} {'passes':>6} {'breaks':>6} {'prefill x':>9} {'peak x':>6}")


def format_table(runs: dict[str, dict[str, Any]], indent: str = "  ") -> list[str]:
    lines = [indent + HEADER]
    for policy in POLICIES:
        r = runs[policy]
        lines.append(
            indent
            + f"{policy:<13} {r['prefill_tokens']:>9,} {r['reused_tokens']:>9,} {r['peak_context_tokens']:>7,}"
            f" {r['peak_context_pct']:>5.1f}% {r['mean_context_tokens']:>7,.0f} {r['mean_context_pct']:>5.1f}%"
            f" {r['batch_compactions']:>5} {r['micro_passes']:>6} {r['cache_breaks']:>6}"
            f" {_x(r['prefill_ratio']):>9} {_x(r['peak_ratio']):>6}"
        )
    return lines


def _x(ratio: float | None) -> str:
    return "-" if ratio is None else f"{ratio:.2f}x"


def format_limit(result: dict[str, Any]) -> list[str]:
    high_tokens = result["totals"][BASELINE]["high_watermark_tokens"]
    lines = [
        f"=== context limit {result['context_limit']:,}: threshold {result['threshold_tokens']:,} tokens;"
        f" watermarks high {result['high_watermark']:.0%} ({high_tokens:,}), low {result['low_watermark']:.0%} ===",
    ]
    for session in result["sessions"]:
        requests = session["policies"][BASELINE]["requests"]
        lines += ["", f"{session['session']} ({session['messages']} messages, {requests} chat requests)"]
        lines += format_table(session["policies"])
    lines += ["", f"all sessions ({len(result['sessions'])})"]
    lines += format_table(result["totals"])
    lines.append("  micro pass outcomes:")
    for policy in POLICIES:
        mix = ", ".join(f"{k} {v}" for k, v in result["totals"][policy]["micro_outcomes"].items()) or "none"
        lines.append(f"    {policy:<13} {mix}")
    lines += ["", f"goal: prefill <= {PREFILL_GOAL_RATIO}x batch-only, peak <= high watermark, 0 batch compactions"]
    for policy, met in result["goals"].items():
        marks = ", ".join(f"{name} {'yes' if ok else 'NO'}" for name, ok in met.items())
        lines.append(f"  {policy:<13} {marks}")
    return lines


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sessions", nargs="+", type=Path, help="session JSON files (default: the shared sessions)")
    parser.add_argument("--context-limit", nargs="+", type=int, default=CONTEXT_LIMITS,
                        help="chat model windows to replay at (default 32768)")
    parser.add_argument("--high", type=float, default=HIGH_WATERMARK,
                        help="watermark policy: the high mark, a share of the threshold")
    parser.add_argument("--low", type=float, default=LOW_WATERMARK,
                        help="watermark policy: the low mark, a share of the threshold")
    parser.add_argument("--reply-cached", action="store_true",
                        help="the cache also holds each reply the model generated (llama.cpp, mlx_lm.server)")
    parser.add_argument("--json", action="store_true", help="machine-readable output")
    args = parser.parse_args(argv)
    if any(limit <= 0 for limit in args.context_limit):
        parser.error(f"--context-limit must be positive, got {args.context_limit}")
    if not 0 < args.low < args.high <= 1:
        parser.error(f"need 0 < --low < --high <= 1, got low {args.low}, high {args.high}")

    paths = args.sessions or sorted(SESSIONS.glob("*.json"))
    if not paths:
        print(f"no sessions given and none in {SESSIONS}", file=sys.stderr)
        return 2
    try:
        loaded = load_sessions(paths)
    except TranscriptError as exc:
        print(f"bench_cache: {exc}", file=sys.stderr)
        return 2
    results = [run_limit(loaded, limit, args.high, args.low, args.reply_cached) for limit in args.context_limit]

    if args.json:
        print(json.dumps({"summarizer": SUMMARIZER_LABEL, "policies": list(POLICIES), "results": results}, indent=1))
        return 0
    print(f"Prefix-cache benchmark -- summarizer: {SUMMARIZER_LABEL}; default compression settings")
    print("prefill/reused: tokens over all chat requests (message-granular prefix rule; the cache holds the"
          f" previous request{' and its reply' if args.reply_cached else ''}); peak/mean: request size,"
          " % of the threshold; breaks: requests after a splice; x: ratio to batch-only")
    for result in results:
        print()
        print("\n".join(format_limit(result)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
