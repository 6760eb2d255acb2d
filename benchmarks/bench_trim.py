"""Peak occupancy of real agent sessions with and without the trim stage.

    uv run python benchmarks/bench_trim.py [SESSION.json ...] [--context-limit 32768] [--turns step]

Sessions default to ../shared/data/sessions/*.json. Each is replayed through the real
engine (``hermes_tui.analysis.replay.replay``, default compression settings, a 32,768-token
window) four times: with ``compression.trim`` on and off, and with two summarizers:

* **failing**: every call raises a timeout, as a summarizer that is down or far too slow
  for its timeout. No micro pass lands; what holds the window is the trim stage and batch
  compaction landing each chunk's deterministic notes (``compaction.batch``); trim spares
  batch compactions (each a cache break and a lossy condensation);
* **extractive**: the built-in extractive summarizer (no model, not an LLM): passes land.

Peak occupancy is the largest transcript the chat model would have been sent (before each
turn's compaction), as a share of the compaction threshold. Also shown: the transcript at
the end, trims published, and batch compactions that landed.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from hermes_tui.analysis.replay import replay
from hermes_tui.compaction.summarizer import SummarizerError
from hermes_tui.config import Config
from hermes_tui.core.conversation import Conversation
from hermes_tui.core.transcript import parse_transcript
from hermes_tui.providers.extractive.summarizer import ExtractiveSummarizer
from hermes_tui.session.wiring import make_compactor, make_counter

SESSIONS = Path(__file__).resolve().parents[2] / "shared" / "data" / "sessions"
CONTEXT_LIMIT = 32_768


class FailingSummarizer:
    """Every call fails, as a summarizer that is down or never answers in time."""

    model_name = "failing"

    def complete(self, messages, *, max_tokens):
        raise SummarizerError("timeout", "the summarizer did not answer in time")


def peak_occupancy(path: Path, *, trim: bool, failing: bool, context_limit: int = CONTEXT_LIMIT,
                   turns: str = "step") -> dict[str, Any]:
    """Replay ``path``; the peak and final occupancy (% of the threshold) and what ran."""
    messages = parse_transcript(path.read_text(encoding="utf-8"), source=str(path))
    config = Config().with_overrides({"compression.trim": trim})
    counter = make_counter(config)
    summarizer = FailingSummarizer() if failing else ExtractiveSummarizer()
    compactor = make_compactor(config, counter=counter, summarizer=summarizer, context_limit=context_limit,
                               session_id=path.stem)
    conv = Conversation(counter=counter)
    peak = 0

    def on_turn(number: int, total: int, reports) -> None:
        nonlocal peak
        before = reports[0].fields["tokens_before"] if reports else conv.total_tokens
        peak = max(peak, before)

    result = replay(messages, conv, compactor, turns=turns, on_turn=on_turn)
    window = compactor.ctx.window
    return {
        "session": path.stem,
        "trim": trim,
        "summarizer": summarizer.model_name,
        "peak_pct": window.occupancy_pct(peak),
        "final_pct": window.occupancy_pct(conv.total_tokens),
        "trims": result.count("trimmed", "trim"),
        "results_trimmed": sum(r.fields.get("results_trimmed") or 0 for r in result.reports if r.kind == "trim"),
        "batches": result.count("compressed", "batch"),
        "absorbed": result.count("absorbed", "micro") + result.count("defrag", "micro"),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("sessions", nargs="*", type=Path)
    parser.add_argument("--context-limit", type=int, default=CONTEXT_LIMIT)
    parser.add_argument("--turns", choices=("step", "user"), default="step")
    args = parser.parse_args(argv)
    paths = args.sessions or sorted(SESSIONS.glob("*.json"))
    print(f"window {args.context_limit:,} tokens, turns={args.turns}, default compression settings; "
          "peak/final occupancy in % of the compaction threshold")
    print(f"{'session':38} {'summarizer':10} {'peak off':>9} {'peak on':>8} {'final off':>10} {'final on':>9} "
          f"{'trims':>5} {'results':>7} {'batch off/on':>12} {'absorbed off/on':>15}")
    for path in paths:
        for failing in (True, False):
            off = peak_occupancy(path, trim=False, failing=failing, context_limit=args.context_limit, turns=args.turns)
            on = peak_occupancy(path, trim=True, failing=failing, context_limit=args.context_limit, turns=args.turns)
            print(f"{path.stem:38} {on['summarizer']:10} {off['peak_pct']:>9.1f} {on['peak_pct']:>8.1f} "
                  f"{off['final_pct']:>10.1f} {on['final_pct']:>9.1f} {on['trims']:>5} {on['results_trimmed']:>7} "
                  f"{off['batches']:>5}/{on['batches']:<6} {off['absorbed']:>7}/{on['absorbed']:<7}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
