"""What a micro pass costs the engine itself, excluding the summarizer call, as transcripts grow.

    uv run python benchmarks/bench_pass_overhead.py [--sizes 250 1000 4000] [--passes 200]
                                                    [--profile] [--json]

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

from hermes_tui.compaction.engine import Compactor
from hermes_tui.compaction.summarize import SummaryRequest
from hermes_tui.compaction.summarizer import Completion
from hermes_tui.compaction.window import ContextWindow
from hermes_tui.config import CompressionConfig
from hermes_tui.conversation import Conversation
from hermes_tui.logs import setup_logging
from hermes_tui.session.wiring import build_compactor
from hermes_tui.tokens import EstimateCounter
from hermes_tui.transcript import Message, parse_transcript

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

    def __init__(self, pool: tuple[Message | None, list[list[Message]], list[Message]]):
        self.system, self.exchanges, self.users = pool
        self.next_exchange = 0
        self.next_user = 0
        self.ids = count()

    def opening(self) -> list[Message]:
        out = [_copy(self.system)] if self.system is not None else []
        return out + [self._user()]

    def _user(self) -> Message:
        msg = self.users[self.next_user % len(self.users)]
        self.next_user += 1
        return _copy(msg)

    def chunk(self) -> list[Message]:
        """The next exchange, preceded every USER_EVERY exchanges by a user message."""
        out = []
        if self.next_exchange and self.next_exchange % USER_EVERY == 0:
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
    args = parser.parse_args(argv)

    paths = args.sessions or sorted(SESSIONS.glob("*.json")) or [DEMO_SESSION]
    pool = load_pool(paths)
    # Telemetry goes to a log file, as in the app (a line per pass is part of the pass).
    log_dir = tempfile.TemporaryDirectory(prefix="bench_pass_overhead_")
    setup_logging(Path(log_dir.name) / "agent.log")

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
