"""Compaction with a real local model: the bundled real sessions replayed at a small window.

    uv run python benchmarks/bench_real_compaction.py [--base-url URL --model NAME | --serve MODEL]
                                                      [--messages N] [--sessions NAME ...]
                                                      [--context-limit 16384] [--chat-prefill] [--json]
                                                      [--save FILE] | --tables FILE

Without ``--base-url`` a llama-server is started with ``../shared/realmodels/serve`` on
``--serve`` (default: Qwen2.5-Coder-1.5B-Instruct Q4_K_M) and stopped at the end; any
OpenAI-compatible server works with ``--base-url`` and ``--model``. Sessions are
``../shared/data/sessions/*.json`` (``--sessions`` picks some by file name), whole or their
first ``--messages`` messages.

Each session is replayed step by step through the real engine with default settings
(``hermes_tui.analysis.evaluate``: a decision or an open question planted in every 8th
assistant message, every fact absorbed looked up in the rolling summary after each pass),
once with the real model as the compression model and once with the extractive summarizer
(no model) as the baseline, in the same run. Printed per session and pooled:

* passes by outcome, failures, and who wrote what was absorbed: the model, or the exchange's
  deterministic notes (a step too small to ask about, or the model's answers rejected --
  with the reasons);
* pass p50 / p90 seconds, with prompt, cached and generated tokens per pass;
* peak occupancy: the context the chat model gets after each step (after the step's passes,
  as the next request carries it) as a share of the threshold, and the share of steps above
  it; also the peak before a step's passes (a large tool result lands before any pass can
  run: the app then waits for the passes before its next request); batch compactions fired
  and failed;
* retention at the end: found facts (paths, identifiers, errors, URLs, numbers; exact text)
  and the planted decisions and open questions (60% of their words);
* engine overhead: the passes' whole time over the model's own time for the same calls;
* the instruction check on the model's own answers: how many of them it flags (the bundled
  sessions plant no injection, so each one flagged is a false alarm, or an answer that did
  talk to the assistant: the flagged answers are in the JSON to be read).

``--chat-prefill``: each step's chat request (the compacted transcript) is also sent to the
server with one generated token, once per policy (watermark, per_exchange, batch-only), and
the prompt and cached tokens it reports are summed: what each policy costs a chat model's
prefix cache, measured on a real one. The compression model is the extractive summarizer in
those runs, so that only the policy differs.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from hermes_tui.analysis.evaluate import DECISION, OPEN_QUESTION, evaluate
from hermes_tui.analysis.fact_tracking import retention
from hermes_tui.analysis.replay import replay
from hermes_tui.compaction import facts as factlib
from hermes_tui.compaction.checks import clean_summary, looks_like_instructions
from hermes_tui.config import Config
from hermes_tui.core.conversation import Conversation
from hermes_tui.core.transcript import parse_transcript, wire_view
from hermes_tui.providers.extractive.summarizer import ExtractiveSummarizer
from hermes_tui.providers.openai.summarizer import OpenAISummarizer
from hermes_tui.session.wiring import make_compactor, make_counter

SHARED = Path(__file__).resolve().parents[2] / "shared"
SESSIONS = SHARED / "data" / "sessions"
SERVE = SHARED / "realmodels" / "serve"
DEFAULT_MODEL = "qwen2.5-coder-1.5b-instruct-q4_k_m"
CONTEXT_LIMIT = 16_384
POLICIES = ("watermark", "per_exchange", "batch-only")


@dataclass
class SessionRun:
    """One session replayed with one summarizer."""

    session: str
    summarizer: str
    steps: int = 0
    passes: list[dict[str, Any]] = field(default_factory=list)  # micro telemetry fields
    batches: list[dict[str, Any]] = field(default_factory=list)
    trims: list[dict[str, Any]] = field(default_factory=list)  # the model-free first stage
    occupancy: list[float] = field(default_factory=list)  # per step, after its passes: what the chat model gets
    before_passes: list[float] = field(default_factory=list)  # per step, before its passes
    found: float | None = None
    planted: float | None = None
    wall_s: float = 0.0
    answers: list[dict[str, Any]] = field(default_factory=list)  # the model's answers (not the extractive's)

    def to_json(self) -> dict[str, Any]:
        return {"session": self.session, "summarizer": self.summarizer, "steps": self.steps,
                "figures": figures([self]), "passes": self.passes, "batches": self.batches, "trims": self.trims,
                "occupancy": self.occupancy, "before_passes": self.before_passes, "answers": self.answers}


class RecordingSummarizer(OpenAISummarizer):
    """The compression model under test, keeping each answer it gave (what the instruction
    check is measured on; telemetry keeps no text)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.answers: list[dict[str, Any]] = []

    def complete(self, messages: list[dict[str, Any]], *, max_tokens: int):
        completion = super().complete(messages, max_tokens=max_tokens)
        flagged = looks_like_instructions(clean_summary(completion.text))
        answer = {"text": completion.text, "finish_reason": completion.finish_reason, "flagged": flagged}
        if flagged:  # what it answered, for a fixture: the request is already redacted
            answer["messages"] = messages
        self.answers.append(answer)
        return completion


def load_session(path: Path, messages: int | None):
    loaded = parse_transcript(path.read_text(encoding="utf-8"), source=str(path))
    return loaded[:messages] if messages else loaded


def config_for(policy: str = "watermark") -> Config:
    data: dict[str, Any] = {"compression": {"policy": policy if policy != "batch-only" else "watermark"}}
    if policy == "batch-only":
        data["compression"]["micro_compact"] = False
    return Config.model_validate(data)


def run_session(path: Path, summarizer, messages: int | None, context_limit: int) -> SessionRun:
    """Replay one session through ``evaluate`` with ``summarizer``; collect what the bench prints."""
    config = config_for()
    counter = make_counter(config)
    compactor = make_compactor(config, counter=counter, summarizer=summarizer, context_limit=context_limit)
    conv = Conversation(counter=counter)
    run = SessionRun(path.name, getattr(summarizer, "model_name", "?"))
    threshold = compactor.ctx.window.threshold_tokens
    # The context each step leaves before its passes: ``evaluate`` finalizes right after
    # appending the step, so the first report's tokens_before is it (else the context now).
    seen_before: list[int] = []

    def on_turn(number: int, total: int, reports) -> None:
        run.steps += 1
        before = next((r.fields["tokens_before"] for r in reports), conv.total_tokens)
        seen_before.append(before)
        run.before_passes.append(round(100.0 * before / threshold, 1))
        run.occupancy.append(round(100.0 * conv.total_tokens / threshold, 1))
        for report in reports:
            kept = {"micro": run.passes, "trim": run.trims}.get(report.kind, run.batches)
            kept.append(dict(report.fields))
        print(f"\r  {path.name} · {run.summarizer}: step {number}/{total}, passes {len(run.passes)}",
              end="", file=sys.stderr, flush=True)

    started = time.perf_counter()
    result, _ = evaluate(load_session(path, messages), compactor, conv, transcript=path.name, on_turn=on_turn)
    run.wall_s = round(time.perf_counter() - started, 1)
    print(file=sys.stderr)
    run.answers = list(getattr(summarizer, "answers", []))
    run.found = retention(result.final.kinds, factlib.KINDS)
    run.planted = retention(result.final.kinds, (DECISION, OPEN_QUESTION))
    return run


def _pct(values: list[float], q: float) -> float | None:
    if not values:
        return None
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def figures(runs: list[SessionRun]) -> dict[str, Any]:
    """The printed figures of one or more runs (pooled)."""
    passes = [p for r in runs for p in r.passes]
    worked = [p for p in passes if p["outcome"] != "nothing_to_absorb"]
    outcomes: dict[str, int] = {}
    failures: dict[str, int] = {}
    rejected: dict[str, int] = {}
    for p in worked:
        outcomes[p["outcome"]] = outcomes.get(p["outcome"], 0) + 1
        if p.get("failure"):
            failures[p["failure"]] = failures.get(p["failure"], 0) + 1
        for reason in p.get("rejected") or []:
            rejected[reason] = rejected.get(reason, 0) + 1
    absorbed = [p for p in worked if p["outcome"] in ("absorbed", "defrag")]
    by_model = [p for p in absorbed if p.get("written_by") in ("model", None) and p["outcome"] == "absorbed"]
    asked = [p for p in worked if p.get("model_calls")]
    seconds = [p["duration_ms"] / 1000 for p in asked if p.get("duration_ms") is not None]
    model_s = sum((p.get("summarizer_ms") or 0) for p in asked) / 1000
    batches = [b for r in runs for b in r.batches]
    trims = [t for r in runs for t in r.trims if t["outcome"] == "trimmed"]
    occupancy = [o for r in runs for o in r.occupancy]
    before_passes = [o for r in runs for o in r.before_passes]
    answers = [a for r in runs for a in r.answers]

    def mean(key: str) -> float | None:
        values = [p[key] for p in asked if p.get(key) is not None]
        return round(statistics.fmean(values), 1) if values else None

    def pooled(attr: str) -> float | None:
        values = [getattr(r, attr) for r in runs if getattr(r, attr) is not None]
        return round(statistics.fmean(values), 3) if values else None

    return {
        "passes": len(worked),
        "outcomes": outcomes,
        "failures": failures,
        "rejected_answers": rejected,
        "absorbed_with_content": round(len(absorbed) / len(worked), 3) if worked else None,
        "absorbed_written_by_model": round(len(by_model) / len(worked), 3) if worked else None,
        "absorbed_by_notes": sum(1 for p in absorbed if p.get("written_by") == "notes"),
        "model_calls": sum(p.get("model_calls") or 0 for p in worked),
        "pass_s_p50": _pct(seconds, 0.5),
        "pass_s_p90": _pct(seconds, 0.9),
        "prompt_tokens_mean": mean("prompt_tokens"),
        "cached_tokens_mean": mean("cached_tokens"),
        "generated_tokens_mean": mean("completion_tokens"),
        # Only for a model (a server reports prompt tokens): the extractive's "model" is
        # a few milliseconds of the same code, and the ratio says nothing.
        "engine_over_model": round(sum(seconds) / model_s, 3) if model_s and mean("prompt_tokens") else None,
        "peak_occupancy_pct": max(occupancy) if occupancy else None,
        "steps_above_threshold": round(sum(o > 100 for o in occupancy) / len(occupancy), 3) if occupancy else None,
        "peak_before_passes_pct": max(before_passes) if before_passes else None,
        "results_trimmed": sum(t.get("results_trimmed") or 0 for t in trims),
        "batch_fired": sum(1 for b in batches if b["outcome"] == "compressed"),
        "batch_failed": sum(1 for b in batches if b["outcome"] != "compressed"),
        "answers_flagged_as_instructions": (f"{sum(a['flagged'] for a in answers)} of {len(answers)}"
                                            if answers else None),
        "found_fact_retention": pooled("found"),
        "decision_retention": pooled("planted"),
    }


# --- the chat model's prefix cache ----------------------------------------------------------


def chat_prefill(path: Path, base_url: str, model: str, messages: int | None, context_limit: int) -> dict[str, Any]:
    """Per policy: the prompt and cached tokens a real server reports for each step's chat request."""
    out: dict[str, Any] = {}
    for policy in POLICIES:
        config = config_for(policy)
        counter = make_counter(config)
        compactor = make_compactor(config, counter=counter, summarizer=ExtractiveSummarizer(),
                                   context_limit=context_limit)
        conv = Conversation(counter=counter)
        totals = {"requests": 0, "prompt_tokens": 0, "cached_tokens": 0, "server_s": 0.0}

        def on_turn(number: int, total: int, reports, conv=conv, totals=totals, policy=policy) -> None:
            if conv.messages[-1].role == "assistant":
                # A final answer (or calls whose results the slice cut off): the next request
                # comes after the next user message or results, never with a reply last (a
                # server would continue it, or refuse one with calls).
                return
            started = time.perf_counter()
            usage = _one_token(base_url, model, wire_view(conv.messages))
            totals["server_s"] += time.perf_counter() - started
            totals["requests"] += 1
            totals["prompt_tokens"] += usage.get("prompt_tokens") or 0
            totals["cached_tokens"] += (usage.get("prompt_tokens_details") or {}).get("cached_tokens") or 0
            print(f"\r  {path.name} · chat prefill, {policy}: step {number}/{total}", end="", file=sys.stderr,
                  flush=True)

        replay(load_session(path, messages), conv, compactor, turns="step", on_turn=on_turn)
        print(file=sys.stderr)
        totals["prefilled_tokens"] = totals["prompt_tokens"] - totals["cached_tokens"]
        totals["server_s"] = round(totals["server_s"], 1)
        out[policy] = totals
    base = out["batch-only"]["prefilled_tokens"] or 1
    for policy in POLICIES:
        out[policy]["prefilled_vs_batch_only"] = round(out[policy]["prefilled_tokens"] / base, 2)
    return out


def _one_token(base_url: str, model: str, messages: list[dict[str, Any]]) -> dict[str, Any]:
    """The usage a server reports for ``messages`` (the wire view) and one generated token."""
    body = {"model": model, "messages": messages, "max_tokens": 1, "temperature": 0}
    request = urllib.request.Request(f"{base_url}/chat/completions", data=json.dumps(body).encode(),
                                     headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=1800) as response:
        return json.loads(response.read()).get("usage") or {}


# --- the server ----------------------------------------------------------------------------------


def serve(model: str, port: int) -> str:
    printed = subprocess.run([str(SERVE), model, str(port)], check=True, capture_output=True, text=True).stdout
    return printed.split()[0]


def stop(port: int) -> None:
    subprocess.run([str(SERVE), "--stop", str(port)], check=False)


# --- output --------------------------------------------------------------------------------------

ROWS = [
    ("passes", "passes (that found work)"), ("absorbed_with_content", "absorbed with content"),
    ("absorbed_written_by_model", "  written by the model"), ("absorbed_by_notes", "  by the exchange's notes"),
    ("outcomes", "outcomes"), ("failures", "failures"), ("rejected_answers", "model answers rejected"),
    ("model_calls", "model calls"), ("pass_s_p50", "pass p50 s"), ("pass_s_p90", "pass p90 s"),
    ("prompt_tokens_mean", "prompt tokens / pass"), ("cached_tokens_mean", "cached tokens / pass"),
    ("generated_tokens_mean", "generated tokens / pass"), ("engine_over_model", "pass time / model time"),
    ("peak_occupancy_pct", "peak occupancy % of threshold"), ("steps_above_threshold", "steps above threshold"),
    ("peak_before_passes_pct", "peak before a step's passes %"),
    ("results_trimmed", "tool results trimmed"), ("batch_fired", "batch compactions"), ("batch_failed", "batch compactions failed"),
    ("answers_flagged_as_instructions", "answers flagged: instructions"),
    ("found_fact_retention", "found-fact retention (end)"), ("decision_retention", "decision retention (end)"),
]


def table(title: str, columns: dict[str, dict[str, Any]]) -> str:
    names = list(columns)
    width = max(12, *(len(n) for n in names))
    lines = [title, f"  {'':32}" + "".join(f"{n:>{width + 2}}" for n in names)]
    for key, label in ROWS:
        cells = []
        for name in names:
            value = columns[name].get(key)
            if isinstance(value, dict):
                value = ", ".join(f"{k} {v}" for k, v in sorted(value.items())) or "-"
            cells.append(f"{'-' if value is None else value!s:>{width + 2}}")
        lines.append(f"  {label:32}" + "".join(cells))
    return "\n".join(lines)


def _run_of(entry: dict[str, Any]) -> SessionRun:
    """A session's run as ``--save`` wrote it."""
    run = SessionRun(entry["session"], entry["summarizer"], entry["steps"], entry["passes"], entry["batches"],
                     entry["trims"], entry["occupancy"], entry.get("before_passes", []))
    run.found = entry["figures"]["found_fact_retention"]
    run.planted = entry["figures"]["decision_retention"]
    run.answers = entry.get("answers", [])
    return run


def print_tables(saved: list[dict[str, Any]]) -> int:
    """The per-session and pooled tables of saved runs (what a run cut short measured; runs of
    the same model on different sessions pooled)."""
    models = {s["model"] for s in saved}
    if len(models) > 1:
        raise SystemExit(f"--tables: runs of different models ({', '.join(sorted(models))}) are not pooled")
    (model,) = models
    runs: dict[str, list[SessionRun]] = {"model": [], "extractive": []}
    for one in saved:
        for name, entry in one["sessions"].items():
            if "chat_prefill" in entry:
                print(f"{name}: chat prefill per policy: {json.dumps(entry['chat_prefill'])}")
            if "model" not in entry:
                continue
            for who in runs:
                runs[who].append(_run_of(entry[who]))
            print(table(f"{name} ({entry['model']['steps']} steps)",
                        {model: entry["model"]["figures"], "extractive": entry["extractive"]["figures"]}))
            print()
    if runs["model"]:
        print(table(f"pooled over {len(runs['model'])} sessions",
                    {model: figures(runs["model"]), "extractive": figures(runs["extractive"])}))
    return 0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--base-url", help="an OpenAI-compatible /v1 endpoint (default: start ../shared/realmodels/serve)")
    ap.add_argument("--model", help="the model name the endpoint serves")
    ap.add_argument("--serve", default=DEFAULT_MODEL, help=f"the model to serve without --base-url ({DEFAULT_MODEL})")
    ap.add_argument("--port", type=int, default=8099)
    ap.add_argument("--messages", type=int, help="replay the first N messages of each session")
    ap.add_argument("--sessions", nargs="+", help="session file names under ../shared/data/sessions")
    ap.add_argument("--context-limit", type=int, default=CONTEXT_LIMIT)
    ap.add_argument("--timeout", type=float, default=120.0, help="auxiliary.compression.timeout (default 120 s)")
    ap.add_argument("--chat-prefill", action="store_true", help="measure each policy's chat prefill on the server")
    ap.add_argument("--prefill-only", action="store_true",
                    help="only the chat prefill per policy (no compression model run)")
    ap.add_argument("--extractive-only", action="store_true",
                    help="only the extractive baseline (no server: seconds, not hours)")
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--save", type=Path, help="write the JSON here after every session (a long run keeps what it measured)")
    ap.add_argument("--tables", type=Path, nargs="+",
                    help="print the tables of JSON files written by --save, pooled (no run)")
    args = ap.parse_args()
    if args.tables:
        return print_tables([json.loads(path.read_text(encoding="utf-8")) for path in args.tables])

    paths = sorted(SESSIONS.glob("*.json"))
    if args.sessions:
        paths = [p for p in paths if p.name in args.sessions]
    if not paths:
        ap.error("no sessions")
    if args.extractive_only:
        for path in paths:
            base = run_session(path, ExtractiveSummarizer(), args.messages, args.context_limit)
            print(table(f"{path.name} ({base.steps} steps)", {"extractive": figures([base])}), flush=True)
        return 0
    started_server = args.base_url is None
    base_url = args.base_url or serve(args.serve, args.port)
    model = args.model or args.serve
    result: dict[str, Any] = {"base_url": base_url, "model": model, "messages": args.messages,
                              "context_limit": args.context_limit, "sessions": {}}
    try:
        with tempfile.TemporaryDirectory(prefix="hermes-bench-real-"):
            runs: dict[str, list[SessionRun]] = {"model": [], "extractive": []}
            for path in paths:
                if args.prefill_only:
                    prefill = chat_prefill(path, base_url, model, args.messages, args.context_limit)
                    result["sessions"][path.name] = {"chat_prefill": prefill}
                    if args.save:
                        args.save.write_text(json.dumps(result, indent=1))
                    print(f"{path.name}: chat prefill per policy: {json.dumps(prefill)}", flush=True)
                    continue
                real = run_session(path, RecordingSummarizer(base_url, model, timeout=args.timeout), args.messages,
                                   args.context_limit)
                base = run_session(path, ExtractiveSummarizer(), args.messages, args.context_limit)
                runs["model"].append(real)
                runs["extractive"].append(base)
                entry = {"model": real.to_json(), "extractive": base.to_json()}
                if args.chat_prefill:
                    entry["chat_prefill"] = chat_prefill(path, base_url, model, args.messages, args.context_limit)
                result["sessions"][path.name] = entry
                if args.save:
                    args.save.write_text(json.dumps(result, indent=1))
                if not args.json:
                    print(table(f"{path.name} ({real.steps} steps, {real.wall_s:.0f} s with the model)",
                                {model: figures([real]), "extractive": figures([base])}))
                    if args.chat_prefill:
                        print("  chat prefill per policy: " + json.dumps(entry["chat_prefill"]))
                    print(flush=True)
            if args.prefill_only:
                return 0
            result["pooled"] = {"model": figures(runs["model"]), "extractive": figures(runs["extractive"])}
    finally:
        if started_server:
            stop(args.port)
    if args.json:
        print(json.dumps(result, indent=1))
    else:
        print(table(f"pooled over {len(paths)} sessions", {model: result["pooled"]["model"],
                                                            "extractive": result["pooled"]["extractive"]}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
