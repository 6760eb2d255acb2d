"""Does the notes prompt keep the decisions and open questions a step states? A real model, step by step.

The bundled real sessions (``../shared/data/sessions``, the first ``--messages`` of each) get a
decision ("Decision: use X rather than Y, because Z.") or an open question ("Open question:
should X also handle Y?") added to every 8th assistant message (``analysis.fact_tracking.plant``,
the planting ``hermes-tui eval`` and ``bench_real_compaction.py`` use). Each planted step (the
assistant message and its tool results, redacted) is sent through the append-mode notes prompt
(``compaction.prompts``) to an OpenAI-compatible server, and the notes are judged as the
replays judge the summary: at least 60% of the planted sentence's content words present.

With ``--alternative TEXT`` each step is also asked with that task sentence in place of the
shipped one (``prompts.NOTES_TASK``), side by side, so a wording is chosen by measurement.
Printed per step and in all: kept, the share of the step copied back (``checks.copied_share``)
and the tokens generated. Example::

    ../shared/realmodels/serve qwen2.5-coder-1.5b-instruct-q4_k_m 8081
    uv run python benchmarks/bench_notes_decisions.py --base-url http://127.0.0.1:8081/v1 \\
        --model qwen2.5-coder-1.5b-instruct-q4_k_m --steps 12
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path
from typing import Any

from hermes_tui.analysis.fact_tracking import WORD_SHARE, Planted, content_words, plant
from hermes_tui.compaction import checks, prompts
from hermes_tui.compaction.redaction import redact_message
from hermes_tui.core.transcript import Message, parse_transcript
from hermes_tui.providers.openai.summarizer import OpenAISummarizer

SESSIONS = Path(__file__).resolve().parents[2] / "shared" / "data" / "sessions"
MAX_TOKENS = 200  # notes of one step; the pass's own cap is sized to the step


def planted_steps(messages: int, limit: int) -> list[tuple[str, Planted, list[Message]]]:
    """(session, planted fact, the step that states it) for the first ``limit`` planted steps."""
    found = []
    for path in sorted(SESSIONS.glob("*.json")):
        msgs = parse_transcript(path.read_text(encoding="utf-8"), source=str(path))[:messages]
        msgs, planted = plant(msgs, 8, 0)
        index = {m.id: i for i, m in enumerate(msgs)}
        for fact in planted:
            start = end = index[fact.message_id]
            end += 1
            while end < len(msgs) and msgs[end].role == "tool":
                end += 1
            found.append((path.name, fact, [redact_message(m) for m in msgs[start:end]]))
            if len(found) == limit:
                return found
    return found


def ask(summarizer: OpenAISummarizer, step: list[Message], task: str) -> tuple[str, int | None, float]:
    # The shipped prompt, as a pass builds it; an alternative replaces only its task sentence.
    chat = prompts.append_prompt("", step)
    chat[-1]["content"] = chat[-1]["content"].replace(prompts.NOTES_TASK, task)
    started = time.perf_counter()
    completion = summarizer.complete(chat, max_tokens=MAX_TOKENS)
    return completion.text, completion.completion_tokens, time.perf_counter() - started


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--base-url", required=True)
    ap.add_argument("--model", required=True)
    ap.add_argument("--messages", type=int, default=120, help="the first N messages of each session")
    ap.add_argument("--steps", type=int, default=12, help="planted steps to ask about")
    ap.add_argument("--alternative", help="a task sentence to ask beside the shipped one")
    ap.add_argument("--timeout", type=float, default=300.0)
    ap.add_argument("--json", type=Path, help="write every answer here")
    args = ap.parse_args()

    variants = {"shipped": prompts.NOTES_TASK, **({"alternative": args.alternative} if args.alternative else {})}
    summarizer = OpenAISummarizer(args.base_url, args.model, timeout=args.timeout)
    rows: list[dict[str, Any]] = []
    for session, fact, step in planted_steps(args.messages, args.steps):
        for name, task in variants.items():
            text, tokens, seconds = ask(summarizer, step, task)
            words = set(content_words(text))
            kept = sum(word in words for word in fact.words) >= WORD_SHARE * len(fact.words)
            copied = checks.copied_share(checks.clean_summary(text), prompts.render_messages(step))
            rows.append({"session": session, "kind": fact.kind, "variant": name, "kept": kept,
                         "copied": round(copied, 2), "tokens": tokens, "seconds": round(seconds, 1), "text": text})
            print(f"{session[:30]:30} {fact.kind:13} {name:11} kept={kept!s:5} copied={copied:.2f} "
                  f"tokens={tokens} {seconds:.1f} s", flush=True)
    print()
    for name in variants:
        mine = [r for r in rows if r["variant"] == name]
        print(f"{name}: kept {sum(r['kept'] for r in mine)} of {len(mine)}, "
              f"copied >= 0.6: {sum(r['copied'] >= 0.6 for r in mine)}, "
              f"mean tokens {sum(r['tokens'] or 0 for r in mine) / max(1, len(mine)):.0f}")
    if args.json:
        args.json.write_text(json.dumps(rows, indent=1), encoding="utf-8")


if __name__ == "__main__":
    main()
