"""What a micro pass costs the engine itself, excluding the summarizer call, as transcripts grow.

    uv run python benchmarks/bench_pass_overhead.py [--sizes 250 1000 4000] [--passes 200]
                                                    [--profile] [--json]
    uv run python benchmarks/bench_pass_overhead.py --long 1600 --limit 32768 [--profile]

The goal (spec: "the per-turn cost stays bounded no matter how long the
conversation gets"): a pass costs O(exchange), not O(transcript). So the same pass
is timed on transcripts of 250, 1,000 and 4,000 messages, and the benchmark fails
(exit 1) when median(largest) / median(smallest) is above 1.5.

How it is measured, and why that is a fair steady state:

* Transcripts are built from real exchanges: every assistant message with its tool
  results, taken in order from the agent sessions in ../shared/data/sessions (or
  the bundled demo session), with fresh ids, and a real user message every
  20 exchanges. Sizes and contents are therefore those of real agent work.
* The summarizer is a **stub, not a model**: it returns instantly, appending one
  prebuilt note line to the running summary until it is ~1,000 tokens and then
  returning it unchanged, so every timed pass is a real ``absorbed`` pass with a
  realistic summary size (and never a defrag: defrag re-summarizes the whole
  middle by design, O(middle), and is not what this measures). Its own time is
  measured inside it and subtracted from each pass.
* One timed pass = ``Compactor.micro_pass`` (plan + publish: head/tail walks,
  cursor, redaction of the exchange and the summary, checks, store hook, splice,
  telemetry line to a log file, as in the app). Between passes, outside the
  timing, fresh exchanges are appended (their token counts cached on append, as
  ``Conversation.append`` does in the app) until the transcript is back at its
  target size, so every pass sees a transcript of that size.
* The context window is the same for every size (128K by default), so the tail
  budget, and with it the protected tail, is the same: a larger window makes the
  tail walk longer, which is O(tail), bounded by the window, not by the transcript.
* Sizes are run round-robin in blocks, so drift in the machine's speed hits all
  sizes alike. Warm-up passes (untimed) fill the summary first.

For context the same is printed for a batch ``compress`` (with the same stub),
which is expected to grow with the middle it condenses.
"""

from __future__ import annotations

import argparse
import cProfile
import io
import json
import pstats
import statistics
import sys
import tempfile
import time
from itertools import count
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from hermes_tui.compaction import user_floor
from hermes_tui.compaction.engine import Compactor
from hermes_tui.compaction.summarizer import Completion
from hermes_tui.compaction.summary_request import SummaryRequest
from hermes_tui.compaction.window import ContextWindow
from hermes_tui.config import CompressionConfig
from hermes_tui.core.conversation import Conversation
from hermes_tui.core.tokens import EstimateCounter
from hermes_tui.core.transcript import Message, parse_transcript
from hermes_tui.session.wiring import build_compactor
from hermes_tui.util.logs import setup_logging

REPO = Path(__file__).resolve().parents[1]
SESSIONS = Path(__file__).resolve().parents[2] / "shared" / "data" / "sessions"
DEMO_SESSION = REPO / "hermes_tui" / "assets" / "demo_session.json"

MAX_RATIO = 1.5
USER_EVERY = 20          # a user message every this many exchanges
SUMMARY_TARGET_CHARS = 4_000  # ~1,000 tokens: a typical rolling summary, below the 2,000-token defrag line
# Merge mode: the stub's summary replaces the last one, so it stays at that size and every
# pass is an ordinary absorb (appended, it would grow into a defrag every few passes).
MEASURED = CompressionConfig(micro_compact_mode="merge", fact_guard=False)


# --- the stub summarizer ------------------------------------------------------------


class InstantStubSummarizer:
    """NOT A MODEL. Returns instantly so that only the engine's own work is timed.

    Absorb: the running summary plus one prebuilt note line, until the summary is
    ~1,000 tokens; then the summary unchanged (a constant-size rolling summary).
    Batch: one fixed line. ``last_s`` is the time spent inside the last call.
    """

    model_name = "instant-stub (benchmark, not a model)"

    NOTES = [
        f"- bash: ran `python -m pytest tests/test_module_{n}.py -q` in /testbed -> {n} passed, 1 failed "
        f"(AssertionError in test_merge_order_{n}); edited django/forms/widgets.py around line {40 + n}."
        for n in range(64)
    ]

    def __init__(self) -> None:
        self.calls = 0
        self.last_s = 0.0

    def summarize(self, request: SummaryRequest, *, max_tokens: int) -> Completion:
        started = time.perf_counter()
        if request.kind == "batch":
            text = "- condensed earlier work (benchmark stub)."
        elif request.kind == "defrag":  # consolidates to two notes: always shrinks (--long only)
            text = "\n".join(self.NOTES[:2])
        elif len(request.summary) < SUMMARY_TARGET_CHARS:
            note = self.NOTES[self.calls % len(self.NOTES)]
            text = f"{request.summary}\n{note}" if request.summary else note
        else:
            text = request.summary
        self.calls += 1
        elapsed = time.perf_counter() - started
        self.last_s = elapsed
        return Completion(text, "stop", None, None, elapsed)

    def complete(self, messages, *, max_tokens):  # pragma: no cover - summarize() is used
        raise NotImplementedError


# --- transcripts from real exchanges ------------------------------------------------


def load_pool(paths: list[Path]) -> tuple[Message | None, list[list[Message]], list[Message]]:
    """(a system prompt, the exchanges, the user messages) of the given sessions, in order."""
    system = None
    exchanges: list[list[Message]] = []
    users: list[Message] = []
    for path in paths:
        messages = parse_transcript(path.read_text(encoding="utf-8"), source=str(path))
        n = 0
        while n < len(messages):
            msg = messages[n]
            end = n + 1
            if msg.role == "assistant":
                while end < len(messages) and messages[end].role == "tool":
                    end += 1
                exchanges.append(messages[n:end])
            elif msg.role == "user":
                users.append(msg)
            elif msg.role == "system" and system is None:
                system = msg
            n = end
    return system, exchanges, users


class TranscriptSource:
    """An endless stream of fresh copies of real exchanges (new ids), a user message now and then."""

    def __init__(self, pool: tuple[Message | None, list[list[Message]], list[Message]], user_every: int = USER_EVERY,
                 short_users: bool = False):
        self.system, self.exchanges, self.users = pool
        self.user_every = user_every
        self.short_users = short_users  # after the task, what a user says in a chatty session
        self.next_exchange = 0
        self.next_user = 0
        self.ids = count()

    def opening(self) -> list[Message]:
        out = [_copy(self.system)] if self.system is not None else []
        return out + [self._user()]

    def _user(self) -> Message:
        msg = self.users[self.next_user % len(self.users)]
        self.next_user += 1
        if self.short_users and self.next_user > 1:
            return Message(role="user", content=SHORT_USERS[self.next_user % len(SHORT_USERS)].format(n=self.next_user))
        return _copy(msg)

    def chunk(self) -> list[Message]:
        """The next exchange, preceded every USER_EVERY exchanges by a user message."""
        out = []
        if self.next_exchange and self.next_exchange % self.user_every == 0:
            out.append(self._user())
        template = self.exchanges[self.next_exchange % len(self.exchanges)]
        self.next_exchange += 1
        renamed = {}
        for msg in template:
            if msg.role == "assistant":
                calls = []
                for call in msg.tool_calls or []:
                    renamed[call["id"]] = f"call_bench_{next(self.ids)}"
                    calls.append({**call, "id": renamed[call["id"]]})
                out.append(Message(role="assistant", content=msg.content, tool_calls=calls or None))
            else:
                out.append(Message(role="tool", content=msg.content, tool_call_id=renamed.get(msg.tool_call_id),
                                   name=msg.name))
        return out


def _copy(msg: Message) -> Message:
    return Message(role=msg.role, content=msg.content, name=msg.name)


# --- the engine -----------------------------------------------------------------------


def make_engine(limit: int) -> tuple[Compactor, InstantStubSummarizer, EstimateCounter]:
    counter = EstimateCounter()
    stub = InstantStubSummarizer()
    compactor = build_compactor(
        MEASURED, summarizer=stub, counter=counter, context_limit=limit,
        # These transcripts are far over the threshold (a 4,000-message transcript
        # holds ~1.7M tokens), so the window-pressure trigger would turn every pass
        # into a defrag, which folds the whole middle and is O(middle) by design.
        # What is measured here is the ordinary pass: one exchange absorbed.
        pressure_share=None, session_id="bench",
    )
    return compactor, stub, counter


class Lane:
    """One transcript size: its conversation, compactor, and the samples taken so far."""

    def __init__(self, size: int, pool, limit: int):
        self.size = size
        self.source = TranscriptSource(pool)
        self.compactor, self.stub, counter = make_engine(limit)
        self.conv = Conversation(self.source.opening(), counter=counter)
        self.top_up()
        self.samples_us: list[float] = []
        self.stub_us: list[float] = []
        self.outcomes: dict[str, int] = {}
        self.sizes_seen: list[int] = []

    def top_up(self) -> None:
        """Append fresh exchanges until the transcript is back at its size (untimed, as a turn would)."""
        while len(self.conv) < self.size:
            self.conv.extend(self.source.chunk())

    def run(self, passes: int, *, record: bool, profiler: cProfile.Profile | None = None) -> None:
        for _ in range(passes):
            self.top_up()
            self.sizes_seen.append(len(self.conv))
            self.stub.last_s = 0.0
            if profiler is not None:
                profiler.enable()
            started = time.perf_counter()
            report = self.compactor.micro_pass(self.conv)
            elapsed = time.perf_counter() - started
            if profiler is not None:
                profiler.disable()
            if record:
                self.outcomes[report.outcome] = self.outcomes.get(report.outcome, 0) + 1
                self.samples_us.append((elapsed - self.stub.last_s) * 1e6)
                self.stub_us.append(self.stub.last_s * 1e6)


def percentile(values: list[float], pct: float) -> float:
    ordered = sorted(values)
    rank = (len(ordered) - 1) * pct / 100
    low = int(rank)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (rank - low)


# --- batch, for context ---------------------------------------------------------------


def time_batch(size: int, pool, limit: int, reps: int) -> dict:
    """Batch ``compress`` on a fresh transcript of ``size`` messages, ``reps`` times."""
    source = TranscriptSource(pool)
    messages = source.opening()
    while len(messages) < size:
        messages.extend(source.chunk())
    samples, stub_samples, middles = [], [], []
    for _ in range(reps):
        compactor, stub, counter = make_engine(limit)
        conv = Conversation(messages, counter=counter)  # counts cached on the messages after the first rep
        stub_total = 0.0
        original = stub.summarize

        def timed(request, *, max_tokens, _original=original, _stub=stub):
            nonlocal stub_total
            completion = _original(request, max_tokens=max_tokens)
            stub_total += _stub.last_s
            return completion

        stub.summarize = timed  # type: ignore[method-assign]
        started = time.perf_counter()
        report = compactor.compress(conv)
        elapsed = time.perf_counter() - started
        assert report.outcome == "compressed", report.outcome
        samples.append((elapsed - stub_total) * 1e6)
        stub_samples.append(stub_total * 1e6)
        middles.append(report.fields.get("absorbed_tokens") or 0)
    return {
        "messages": len(messages),
        "median_us": statistics.median(samples),
        "p90_us": percentile(samples, 90),
        "stub_us_median": statistics.median(stub_samples),
        "absorbed_tokens": middles[0],
        "reps": reps,
    }


# --- a long session: what the quoted user messages cost a pass ---------------------------

SHORT_USERS = [
    "ok, go on ({n})", "yes, do that ({n})", "now run the tests again ({n})", "looks good, continue ({n})",
    "why did that fail? ({n})", "keep the helper as it is ({n})", "try the other file ({n})", "stop, revert that ({n})",
]
LONG = CompressionConfig(micro_compact_mode="merge", fact_guard=False, policy="per_turn")
EARLY, LATE = (200, 400), (800, 1_600)  # turns compared, as a fraction of 1,600 turns


def long_session(turns: int, pool, limit: int, *, profile: bool) -> dict:
    """One session of ``turns`` turns (a user message and an exchange each), passes as the
    app runs them (``per_turn``; window pressure on, so defrags fold old user messages and
    quote them). Per turn: the engine's time in its micro passes, the stub's subtracted.
    Batch, when the window still overflows, runs untimed (it is O(middle) by design)."""
    counter = EstimateCounter()
    stub = InstantStubSummarizer()
    compactor = build_compactor(LONG, summarizer=stub, counter=counter, context_limit=limit, session_id="bench")
    source = TranscriptSource(pool, user_every=1, short_users=True)
    conv = Conversation(source.opening(), counter=counter)
    profiler = cProfile.Profile() if profile else None
    late_from = turns * LATE[0] // LATE[1]
    per_turn_us: list[float] = []
    quotes: list[int] = []
    outcomes: dict[str, int] = {}
    batches = 0
    for turn in range(turns):
        conv.extend(source.chunk())
        stub_s = 0.0
        original = stub.summarize

        def timed(request, *, max_tokens, _original=original):
            nonlocal stub_s
            completion = _original(request, max_tokens=max_tokens)
            stub_s += stub.last_s
            return completion

        stub.summarize = timed  # type: ignore[method-assign]
        profiling = profiler is not None and turn >= late_from
        if profiling:
            profiler.enable()
        started = time.perf_counter()
        decision = compactor.decide(conv)
        reports = compactor.micro_passes(conv, decision) if decision.kind == "micro" else []
        elapsed = time.perf_counter() - started
        if profiling:
            profiler.disable()
        stub.summarize = original  # type: ignore[method-assign]
        per_turn_us.append((elapsed - stub_s) * 1e6)
        for report in reports:
            outcomes[report.outcome] = outcomes.get(report.outcome, 0) + 1
        if conv.total_tokens > compactor.ctx.window.threshold_tokens:
            batches += compactor.compress(conv).outcome == "compressed"
        quotes.append(len(compactor.state.quotes))

    def span(lo: int, hi: int) -> tuple[int, int]:
        return turns * lo // LATE[1], turns * hi // LATE[1]

    early, late = span(*EARLY), span(*LATE)
    early_us = statistics.mean(per_turn_us[early[0]:early[1]])
    late_us = statistics.mean(per_turn_us[late[0]:late[1]])
    profile_text = None
    if profiler is not None:
        out = io.StringIO()
        pstats.Stats(profiler, stream=out).sort_stats("cumulative").print_stats(25)
        profile_text = out.getvalue()
    return {
        "turns": turns, "context_limit": limit,
        "early_turns": list(early), "late_turns": list(late),
        "early_ms_per_turn": early_us / 1000, "late_ms_per_turn": late_us / 1000,
        "ratio": late_us / early_us, "max_ratio": MAX_RATIO,
        "quotes_early": max(quotes[early[0]:early[1]]), "quotes_late": max(quotes[late[0]:late[1]]),
        "quote_tokens_end": user_floor.section_tokens(counter, compactor.state.quotes),
        "quote_budget_tokens": compactor.ctx.quote_budget_tokens,
        "outcomes": outcomes, "batch_compactions": batches,
        "profile": profile_text,
    }


def print_long(result: dict) -> None:
    r = result
    print(f"Long session: {r['turns']} turns (a user message and an exchange each), per_turn passes, "
          f"context window {r['context_limit']:,}")
    print(f"  summarizer: {InstantStubSummarizer.model_name} -- returns instantly; its own time is subtracted")
    print(f"  quotes at the end: {r['quotes_late']} ({r['quote_tokens_end']:,} of {r['quote_budget_tokens']:,} "
          f"tokens); outcomes {r['outcomes']}; batch compactions {r['batch_compactions']} (untimed)")
    print(f"  turns {r['early_turns'][0]}-{r['early_turns'][1]}: {r['early_ms_per_turn']:.2f} ms per turn "
          f"(quotes up to {r['quotes_early']})")
    print(f"  turns {r['late_turns'][0]}-{r['late_turns'][1]}: {r['late_ms_per_turn']:.2f} ms per turn "
          f"(quotes up to {r['quotes_late']})")
    verdict = "OK" if r["ratio"] <= MAX_RATIO else "FAIL"
    print(f"  late / early = {r['ratio']:.2f}  (limit {MAX_RATIO}) -> {verdict}")
    if r["profile"]:
        print("\ncProfile of the late turns' micro passes (cumulative):")
        print(r["profile"])


# --- main -------------------------------------------------------------------------------


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("sessions", nargs="*", type=Path, help="session JSON files to take exchanges from")
    parser.add_argument("--sizes", type=int, nargs="+", default=[250, 1000, 4000])
    parser.add_argument("--passes", type=int, default=200, help="timed passes per size")
    parser.add_argument("--warmup", type=int, default=40, help="untimed passes per size first")
    parser.add_argument("--block", type=int, default=20, help="passes per size per round-robin block")
    parser.add_argument("--limit", type=int, default=131_072, help="context window, the same for every size")
    parser.add_argument("--batch-reps", type=int, default=10)
    parser.add_argument("--profile", action="store_true", help="profile the passes at the largest size")
    parser.add_argument("--json", action="store_true", help="machine-readable output")
    parser.add_argument("--long", type=int, metavar="TURNS", help="instead: one session of TURNS turns, "
                        "comparing the engine's time per turn late (the last half) with early (turns 1/8-1/4)")
    args = parser.parse_args(argv)

    paths = args.sessions or sorted(SESSIONS.glob("*.json")) or [DEMO_SESSION]
    pool = load_pool(paths)
    # Telemetry goes to a log file, as in the app (a line per pass is part of the pass).
    log_dir = tempfile.TemporaryDirectory(prefix="bench_pass_overhead_")
    setup_logging(Path(log_dir.name) / "agent.log")

    if args.long:
        result = long_session(args.long, pool, args.limit, profile=args.profile)
        if args.json:
            print(json.dumps({k: v for k, v in result.items() if k != "profile"}, indent=1))
        else:
            print_long(result)
        log_dir.cleanup()
        return 0 if result["ratio"] <= MAX_RATIO else 1

    sizes = sorted(args.sizes)
    lanes = [Lane(size, pool, args.limit) for size in sizes]
    for lane in lanes:
        lane.run(args.warmup, record=False)
    done = 0
    while done < args.passes:
        block = min(args.block, args.passes - done)
        for lane in lanes:
            lane.run(block, record=True)
        done += block

    micro = []
    for lane in lanes:
        micro.append({
            "size": lane.size,
            "messages_min": min(lane.sizes_seen),
            "messages_max": max(lane.sizes_seen),
            "tokens": lane.conv.total_tokens,
            "passes": len(lane.samples_us),
            "outcomes": lane.outcomes,
            "median_us": statistics.median(lane.samples_us),
            "p90_us": percentile(lane.samples_us, 90),
            "stub_us_median": statistics.median(lane.stub_us),
            "summary_tokens": lane.compactor.state.summary_tokens,
        })
    ratio = micro[-1]["median_us"] / micro[0]["median_us"]
    batch = [time_batch(size, pool, args.limit, args.batch_reps) for size in sizes]
    batch_ratio = batch[-1]["median_us"] / batch[0]["median_us"]
    ok = ratio <= MAX_RATIO and all(set(m["outcomes"]) == {"absorbed"} for m in micro)

    profile_text = None
    if args.profile or not ok:
        profiler = cProfile.Profile()
        lanes[-1].run(args.passes, record=False, profiler=profiler)
        out = io.StringIO()
        pstats.Stats(profiler, stream=out).sort_stats("cumulative").print_stats(30)
        profile_text = out.getvalue()

    if args.json:
        print(json.dumps({
            "summarizer": InstantStubSummarizer.model_name,
            "sessions": [p.name for p in paths],
            "context_limit": args.limit,
            "micro": micro, "micro_ratio": ratio, "max_ratio": MAX_RATIO,
            "batch": batch, "batch_ratio": batch_ratio, "ok": ok,
        }, indent=1))
    else:
        print("Micro pass overhead, excluding the summarizer call")
        print(f"  summarizer: {InstantStubSummarizer.model_name} -- returns instantly; its own time is subtracted")
        print(f"  exchanges from: {', '.join(p.name for p in paths)}; a user message every {USER_EVERY} exchanges")
        print(f"  context window {args.limit:,} for every size (tail budget "
              f"{ContextWindow(args.limit).tail_token_budget:,} tokens); {args.warmup} warm-up + "
              f"{args.passes} timed passes per size, round-robin in blocks of {args.block}")
        print()
        print(f"  {'messages':>10} | {'tokens':>9} | {'median':>9} | {'p90':>9} | {'stub':>6} | outcomes")
        for m in micro:
            span = f"{m['messages_min']}-{m['messages_max']}"
            if m["messages_min"] == m["messages_max"]:
                span = str(m["messages_min"])
            mix = ", ".join(f"{k} {v}" for k, v in sorted(m["outcomes"].items()))
            print(f"  {span:>10} | {m['tokens']:>9,} | {m['median_us']:>7.0f}us | {m['p90_us']:>7.0f}us |"
                  f" {m['stub_us_median']:>4.0f}us | {mix}")
        verdict = "OK" if ok else "FAIL"
        print(f"\n  median({sizes[-1]}) / median({sizes[0]}) = {ratio:.2f}  (limit {MAX_RATIO}) -> {verdict}")
        print("\nBatch compress, for context (same stub; expected to grow with the middle it condenses)")
        print(f"  {'messages':>10} | {'middle tokens':>13} | {'median':>9} | {'p90':>9} | reps")
        for b in batch:
            print(f"  {b['messages']:>10} | {b['absorbed_tokens']:>13,} | {b['median_us']:>7.0f}us |"
                  f" {b['p90_us']:>7.0f}us | {b['reps']}")
        print(f"\n  median({sizes[-1]}) / median({sizes[0]}) = {batch_ratio:.2f}")
        if profile_text:
            print(f"\ncProfile of {args.passes} passes at {sizes[-1]} messages (cumulative):")
            print(profile_text)
    log_dir.cleanup()
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
