"""Fit the token estimate's coefficients against a real tokenizer and report its error.

    uv run python benchmarks/calibrate_estimate.py TOKENIZER_JSON [SESSION.json ...]

Sessions default to ../shared/data/sessions/*.json. Prints the fitted coefficients
(to paste into hermes_tui/core/tokens.py), then the error of the current coefficients and
of the anchor's chars/4 rule: per message (median and p90 absolute error) and over
whole transcripts (total ratio), which is what thresholds and occupancy depend on.
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from hermes_tui.core.tokens import EstimateCounter, TokenizerCounter
from hermes_tui.core.transcript import parse_transcript

DEFAULT_SESSIONS = Path(__file__).resolve().parents[2] / "shared" / "data" / "sessions"


def texts_of(path: Path) -> list[str]:
    out = []
    for msg in parse_transcript(path.read_text(), source=str(path)):
        out.append(msg.content)
        for call in msg.tool_calls or []:
            out.append(call["function"].get("arguments", ""))
    return [t for t in out if t]


def main(argv: list[str]) -> int:
    if not argv:
        print(__doc__)
        return 2
    real = TokenizerCounter(Path(argv[0]))
    sessions = [Path(p) for p in argv[1:]] or sorted(DEFAULT_SESSIONS.glob("*.json"))
    texts = [t for s in sessions for t in texts_of(s)]
    estimate = EstimateCounter()
    keys = list(estimate.k)
    features = np.array([[estimate.features(t)[k] for k in keys] for t in texts])
    truth = np.array([real.count_text(t) for t in texts], dtype=float)
    coef, *_ = np.linalg.lstsq(features, truth, rcond=None)
    print("fitted coefficients:", {k: round(float(c), 3) for k, c in zip(keys, coef)})

    def report(label: str, predicted: np.ndarray) -> None:
        rel = np.abs(predicted - truth) / np.maximum(truth, 1)
        print(
            f"{label:>12}: per-text error median {np.median(rel):.1%}, p90 {np.percentile(rel, 90):.1%};"
            f" total {predicted.sum() / truth.sum():.3f}x of real"
        )

    report("estimate", np.array([estimate.count_text(t) for t in texts], dtype=float))
    report("chars/4", np.array([max(1, len(t) // 4) for t in texts], dtype=float))
    print(f"{len(texts)} texts from {len(sessions)} sessions, {int(truth.sum()):,} real tokens")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
