"""Summary fidelity: how many facts of the absorbed exchanges the rolling summary keeps,
with and without the fact guard.

    uv run python benchmarks/bench_fidelity.py [SESSION.json ...] [--p 0.5] [--mode append|merge]
                                               [--no-tiny] [--json]

Sessions default to ../shared/data/sessions/*.json. Each is replayed through the real
engine with ``hermes_tui.analysis.evaluate`` (one pass per agent step, a 32,768-token window,
default compression settings, a decision or an open question planted in every 8th
assistant message) and, after every pass, every fact absorbed so far is looked up in
the rolling summary. Facts are those the fact guard's own extractor finds (paths,
identifiers, errors, URLs, numbers; exact text must survive) plus the planted ones
(60% of their content words must survive; the guard does not keep these).

Summarizers:

(a) the built-in **extractive summarizer (no model)**: deterministic notes (first
    sentence, each tool call and the first line of its result, error lines, paths).
(b) a **scripted lossy double -- NOT A MODEL**: it keeps the previous summary and adds
    one line per exchange listing the exchange's facts (and its decision or open
    question, if one was planted), each dropped with probability ``p`` (seeded by the
    fact and the exchange, so guard on and off drop the same facts); defrag keeps the
    newest lines that fit in 45% of its input. It stands for a model that drops facts at
    a known rate, to test the guard itself.
(c) the **tiny random-weight model** (MLX in-process, models/build_tiny.py), only to show
    the mechanics run end to end: its output is noise and never ends, so every pass is
    rejected (cut off); and the probe questions asked of it as the chat model, scored on
    its (random) answers.

Judged by: retention of found facts with the guard on vs off (the guard's improvement,
in percentage points) under (a) and (b).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
import zlib
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from hermes_tui.analysis.evaluate import DECISION, OPEN_QUESTION, evaluate, make_probes, run_probes
from hermes_tui.compaction import facts as factlib
from hermes_tui.compaction.prompts import NOTHING_NEW
from hermes_tui.compaction.summarizer import Completion
from hermes_tui.compaction.summary_request import SummaryRequest
from hermes_tui.config import Config
from hermes_tui.core.conversation import Conversation
from hermes_tui.core.tokens import EstimateCounter
from hermes_tui.core.transcript import parse_transcript
from hermes_tui.providers.extractive.summarizer import ExtractiveSummarizer
from hermes_tui.session.wiring import make_compactor, make_counter

REPO = Path(__file__).resolve().parents[1]
SESSIONS = Path(__file__).resolve().parents[2] / "shared" / "data" / "sessions"
CONTEXT_LIMIT = 32_768
# For (c): small enough that passes start within a few steps, large enough that neither
# batch compaction nor the window-pressure defrag fires on these steps.
TINY_WINDOW = 12_288
FOUND = factlib.KINDS
COLUMNS = FOUND + ("found", DECISION, OPEN_QUESTION)


class LossyDouble:
    """SCRIPTED DOUBLE, NOT A MODEL: previous summary + one line per exchange, each fact dropped with probability p."""

    def __init__(self, p: float, seed: int = 0):
        self.p, self.seed = p, seed
        self.model_name = f"lossy scripted double (p={p:g}), not a model"
        self.counter = EstimateCounter()

    def summarize(self, request: SummaryRequest, *, max_tokens: int) -> Completion:
        started = time.perf_counter()
        line = self._line(request.messages)
        old = [x for x in request.summary.splitlines() if x.strip()]
        if request.kind == "append":
            text = line or NOTHING_NEW
        elif request.kind == "defrag":
            size = self.counter.count_text(request.summary) + sum(self.counter.count_text(m.content)
                                                                  for m in request.messages)
            text = "\n".join(self._newest(old + ([line] if line else []), size * 45 // 100))
        else:  # absorb (merge), batch
            text = "\n".join(old + ([line] if line else []))
        return Completion(text, "stop", None, self.counter.count_text(text), time.perf_counter() - started)

    def complete(self, messages, *, max_tokens):  # pragma: no cover - summarize() is used
        raise NotImplementedError

    def _line(self, messages) -> str:
        if not messages:
            return ""
        key = f"{self.seed}|{messages[0].content[:200]}|{(messages[0].tool_calls or [{}])[0].get('id', '')}"
        kept = [value for _, value in factlib.extract_facts(messages) if not self._dropped(key, value)]
        what = ", ".join(kept) if kept else "no specifics kept"
        planted = [line.strip() for m in messages if m.role == "assistant" for line in m.content.splitlines()
                   if line.startswith(("Decision:", "Open question:")) and not self._dropped(key, line)]
        return " ".join([f"- the assistant took a step ({what})."] + planted)

    def _dropped(self, key: str, value: str) -> bool:
        return zlib.crc32(f"{key}|{value}".encode()) / 2**32 < self.p

    def _newest(self, lines: list[str], budget: int) -> list[str]:
        kept, spent = [], 0
        for line in reversed(lines):
            cost = self.counter.count_text(line) + 1
            if spent + cost > budget and kept:
                break
            kept.append(line)
            spent += cost
        return list(reversed(kept))


def run(path: Path, summarizer, *, guard: bool, mode: str) -> dict[str, Any]:
    messages = parse_transcript(path.read_text(encoding="utf-8"), source=str(path))
    config = Config().with_overrides({"compression.fact_guard": guard, "compression.micro_compact_mode": mode})
    counter = make_counter(config)
    compactor = make_compactor(config, counter=counter, summarizer=summarizer, context_limit=CONTEXT_LIMIT,
                               session_id=path.stem)
    result, _ = evaluate(messages, compactor, Conversation(counter=counter), transcript=path.name)
    return result.to_json()


def _found(kinds: dict[str, Any]) -> dict[str, int]:
    present = sum(kinds[k]["present"] for k in FOUND)
    total = sum(kinds[k]["total"] for k in FOUND)
    return {"present": present, "total": total}


def cells(point: dict[str, Any]) -> dict[str, dict[str, int]]:
    kinds = point["kinds"]
    out = {k: {"present": kinds[k]["present"], "total": kinds[k]["total"]} for k in FOUND + (DECISION, OPEN_QUESTION)}
    out["found"] = _found(kinds)
    return out


def pct(bucket: dict[str, int]) -> str:
    return f"{100 * bucket['present'] / bucket['total']:.0f}%" if bucket["total"] else "-"


def pooled(rows: list[dict[str, dict[str, int]]]) -> dict[str, dict[str, int]]:
    return {c: {"present": sum(r[c]["present"] for r in rows), "total": sum(r[c]["total"] for r in rows)}
            for c in COLUMNS}


def table(label: str, results: dict[str, dict[bool, dict[str, Any]]]) -> tuple[list[str], dict[str, Any]]:
    """Final retention per kind, per session, guard off and on, then pooled and the improvement.

    ``found avg``: retention of found facts averaged over every pass, which depends less
    than the final figure on when the last defrag happened to fall.
    """
    heads = ["session", "guard"] + list(COLUMNS[:6]) + ["found avg"] + list(COLUMNS[6:])
    widths = [32, 5] + [max(7, len(c)) for c in heads[2:]]

    def line(values: list[str]) -> str:
        return "  " + "  ".join(v.ljust(w) if i < 2 else v.rjust(w) for i, (v, w) in enumerate(zip(values, widths)))

    def row_cells(row: dict[str, dict[str, int]], avg: str) -> list[str]:
        return [pct(row[c]) for c in COLUMNS[:6]] + [avg] + [pct(row[c]) for c in COLUMNS[6:]]

    rule = "  " + "-" * (sum(widths) + 2 * (len(widths) - 1))
    out = [label, line(heads), rule]
    finals: dict[bool, list] = {False: [], True: []}
    per_pass: dict[bool, list[float]] = {False: [], True: []}
    for session, by_guard in results.items():
        for guard in (False, True):
            run_ = by_guard[guard]
            row = cells(run_["final"])
            finals[guard].append(row)
            per_pass[guard] += [p["found"] for p in run_["trajectory"] if p["found"] is not None]
            avg = run_["mean_over_passes"]["found"]
            out.append(line([session if not guard else "", "on" if guard else "off"]
                            + row_cells(row, "-" if avg is None else f"{100 * avg:.0f}%")))
    pool = {guard: pooled(rows) for guard, rows in finals.items()}
    pool_avg = {g: (sum(v) / len(v) if v else None) for g, v in per_pass.items()}
    out.append(rule)
    for guard in (False, True):
        avg = pool_avg[guard]
        out.append(line(["all sessions, pooled", "on" if guard else "off"]
                        + row_cells(pool[guard], "-" if avg is None else f"{100 * avg:.0f}%")))
    gains = {}
    for c in COLUMNS:
        off, on = pool[False][c], pool[True][c]
        if off["total"] and on["total"]:
            gains[c] = 100 * (on["present"] / on["total"] - off["present"] / off["total"])
    if pool_avg[False] is not None and pool_avg[True] is not None:
        gains["found avg"] = 100 * (pool_avg[True] - pool_avg[False])
    out.append(line(["guard improvement (points)", ""] + [f"{gains[c]:+.0f}" if c in gains else "-" for c in heads[2:]]))

    # Over time: found facts absorbed so far, pooled, after 10 and 50 passes and at the end.
    over_time = []
    for guard in (False, True):
        marks = {}
        for n in (10, 50):
            rows = [cells(next(p for p in r[guard]["checkpoints"] if p["passes"] == n))
                    for r in results.values() if any(p["passes"] == n for p in r[guard]["checkpoints"])]
            marks[n] = pct(pooled(rows)["found"]) if rows else "-"
        early = pooled([cells({"kinds": r[guard]["final"]["early"]}) for r in results.values()])["found"]
        over_time.append(f"    guard {'on ' if guard else 'off'}: after 10 passes {marks[10]}, after 50 {marks[50]}, "
                         f"final {pct(pool[guard]['found'])}; facts of the first 10 passes still there at the end: "
                         f"{pct(early)}")
    out += ["", "  found facts over time (pooled):", *over_time]
    return out, {"pooled": {str(g): pool[g] for g in pool}, "found_mean_over_passes": pool_avg,
                 "improvement_points": gains}


# --- (c) the tiny model: mechanics only ---------------------------------------------------


def tiny_mechanics(path: Path, steps: int) -> tuple[list[str], dict[str, Any]]:
    from hermes_tui.providers.mlx.chat import MlxChatClient
    from hermes_tui.providers.mlx.summarizer import MlxSummarizer

    sys.path.insert(0, str(REPO / "models"))
    import build_tiny

    out_dir = Path(tempfile.mkdtemp(prefix="bench_fidelity_tiny_"))
    model = str(build_tiny.build(out_dir)["q4"])
    messages = parse_transcript(path.read_text(encoding="utf-8"), source=str(path))
    # The first steps only, and a small window so that passes start at once.
    end = next((i for i, _ in enumerate(messages) if sum(m.role == "assistant" for m in messages[:i]) > steps),
               len(messages))
    while end < len(messages) and messages[end].role == "tool":
        end += 1
    head = messages[:end]
    config = Config().with_overrides({"auxiliary.compression.max_tokens": 16})
    counter = make_counter(config)
    started = time.perf_counter()
    compactor = make_compactor(config, counter=counter, summarizer=MlxSummarizer(model), context_limit=TINY_WINDOW,
                               session_id="tiny")
    conv = Conversation(counter=counter)
    records: list[dict[str, Any]] = []
    result, _ = evaluate(head, compactor, conv, transcript=path.name,
                         on_turn=lambda n, t, reports: records.extend(r.fields for r in reports if r.kind == "micro"))
    compaction_s = time.perf_counter() - started
    called = [r for r in records if r["outcome"] != "nothing_to_absorb"]

    # Probes need absorbed facts: the transcript compacted by the extractive summarizer,
    # asked of the tiny model as the chat model.
    ext_compactor = make_compactor(config, counter=counter, summarizer=ExtractiveSummarizer(),
                                   context_limit=TINY_WINDOW)
    ext_conv = Conversation(counter=counter)
    _, tracker = evaluate(head, ext_compactor, ext_conv, transcript=path.name)
    started = time.perf_counter()
    probes = run_probes(MlxChatClient(model), ext_conv.messages, make_probes(tracker), max_tokens=24)
    probe_s = time.perf_counter() - started

    lines = [
        "(c) tiny random-weight model (MLX in-process, q4): mechanics only, its output is noise",
        f"  compression model over the first {steps} agent steps of {path.name} ({TINY_WINDOW:,}-token window, "
        "max_tokens 16):",
        f"    micro passes {len(records)}: " + ", ".join(f"{k} {v}" for k, v in sorted(result.outcomes.items())),
        f"    failures: {sorted({r['failure'] for r in called if r['failure']})} -- a never-ending reply is cut off "
        "and rejected, so nothing is absorbed and the guard never runs",
        f"    per pass: median prompt {_med(called, 'prompt_tokens')} tokens, cached {_med(called, 'cached_tokens')}, "
        f"prefill {_med(called, 'prefill_tokens')}, generated {_med(called, 'generated_tokens')}; "
        f"{compaction_s:.1f} s in all",
        f"  probes asked of it as the chat model (transcript compacted by the extractive summarizer), {probe_s:.1f} s:",
    ]
    for p in probes:
        score = "error " + p.error if p.error else f"{p.hits}/{len(p.probe.expected)} expected facts in the answer"
        lines.append(f"    {p.probe.name:<14} {score}")
    if not probes:
        lines.append("    (no probe had an expected answer in this slice)")
    return lines, {"outcomes": result.outcomes, "probes": [p.to_json() for p in probes]}


def _med(records: list[dict[str, Any]], key: str) -> str:
    values = [r[key] for r in records if isinstance(r.get(key), (int, float))]
    return f"{statistics.median(values):,.0f}" if values else "-"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("sessions", nargs="*", type=Path)
    parser.add_argument("--p", type=float, default=0.5, help="the lossy double's drop probability per fact")
    parser.add_argument("--mode", choices=["append", "merge"], default=Config().compression.micro_compact_mode)
    parser.add_argument("--no-tiny", action="store_true", help="skip (c), the tiny-model mechanics")
    parser.add_argument("--tiny-steps", type=int, default=12)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    paths = args.sessions or sorted(SESSIONS.glob("*.json"))

    started = time.perf_counter()
    summarizers = {
        "extractive": ("(a) extractive summarizer (no model), not an LLM", ExtractiveSummarizer),
        "lossy": (f"(b) scripted lossy double (p={args.p:g}) -- NOT A MODEL: drops each fact of an exchange "
                  f"with probability {args.p:g}", lambda: LossyDouble(args.p)),
    }
    document: dict[str, Any] = {"mode": args.mode, "context_limit": CONTEXT_LIMIT, "p": args.p,
                                "sessions": [p.name for p in paths], "summarizers": {}}
    text = [
        "Summary fidelity: retention of facts absorbed into the rolling summary, fact guard off vs on",
        f"  sessions: {', '.join(p.name for p in paths)}",
        f"  mode {args.mode}, a pass per agent step, {CONTEXT_LIMIT:,}-token window, default compression settings;",
        "  a decision or open question planted in every 8th assistant message. Cells: final retention",
        "  (present in the final summary / absorbed over the session). 'found' = paths, identifiers, errors,",
        "  URLs and numbers together (exact text); decision/open_question: 60% of content words (not guarded).",
    ]
    for name, (label, make) in summarizers.items():
        results = {p.stem: {g: run(p, make(), guard=g, mode=args.mode) for g in (False, True)} for p in paths}
        lines, figures = table(label, results)
        text += [""] + lines
        document["summarizers"][name] = {"label": label, **figures, "runs": {
            s: {str(g): {"final": r["final"], "checkpoints": r["checkpoints"], "outcomes": r["outcomes"]}
                for g, r in by.items()} for s, by in results.items()}}
    replay_s = time.perf_counter() - started
    text.append(f"\n  ({len(paths) * 4} replays in {replay_s:.1f} s)")

    if not args.no_tiny:
        target = next((p for p in paths if "msa2" in p.name), paths[0])
        lines, figures = tiny_mechanics(target, args.tiny_steps)
        text += [""] + lines
        document["tiny"] = figures
    print(json.dumps(document, indent=1) if args.json else "\n".join(text))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
