"""``hermes-tui compact`` and ``hermes-tui demo``: replay a transcript through compaction."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import TextIO

from hermes_tui.analysis.replay import ReplayResult, replay
from hermes_tui.cli.common import UserError, config_from
from hermes_tui.compaction.engine import PassReport
from hermes_tui.compaction.summarizer import Summarizer
from hermes_tui.config import FALLBACK_CONTEXT_LIMIT, Config
from hermes_tui.core.conversation import Conversation
from hermes_tui.core.tokens import TokenCounter
from hermes_tui.core.transcript import BATCH, MICRO, Message, dump_transcript, read_transcript
from hermes_tui.hermes_agent.sessions import read_transcript_file
from hermes_tui.providers.context_resolution import resolve as resolve_context_limit
from hermes_tui.providers.selection import make_summarizer
from hermes_tui.session.speeds import KeptSpeed
from hermes_tui.session.wiring import make_compactor, make_counter
from hermes_tui.store import Store
from hermes_tui.util import paths
from hermes_tui.util.logs import setup_logging

DEMO_SESSION = Path(__file__).resolve().parents[1] / "assets" / "demo_session.json"


def run_compact(args: argparse.Namespace) -> int:
    config = config_from(args, {
        "auxiliary.compression.provider": args.provider,
        "auxiliary.compression.model": args.model,
        "auxiliary.compression.base_url": args.base_url,
        "compression.threshold": args.threshold,
        "compression.target_ratio": args.target_ratio,
        "compression.protect_first_n": args.protect_first_n,
        "compression.micro_compact_mode": args.mode,
        "compression.policy": args.policy,
    })
    if args.context_limit is not None and args.context_limit < 256:
        raise UserError(f"--context-limit must be at least 256 tokens, got {args.context_limit}")
    messages = read_transcript_file(args.transcript).messages
    setup_logging()
    counter = make_counter(config)
    summarizer = make_summarizer(config.auxiliary.compression)  # fails early, before any work
    with Store(paths.state_db_path()) as store:  # closing gives up the session's lease
        return _compact_into_store(args, config, messages, counter, summarizer, store)


def _compact_into_store(
    args: argparse.Namespace, config: Config, messages: list[Message], counter: TokenCounter,
    summarizer: Summarizer, store: Store,
) -> int:
    if args.resume:
        session = store.get_session(args.resume)
        store.acquire_lease(session.id)  # one writer: a second replay of it stops here
        done = _replayed_prefix(store, session.id, messages, args.transcript)
        conv = Conversation(store.load_active(session.id), counter=counter)
    else:
        session = store.create_session(
            args.session or _replay_title(store, args.transcript),
            model=config.model.model or None,
            aux_model=config.auxiliary.compression.model or config.auxiliary.compression.provider,
            kind="replay",
        )
        done = 0
        conv = Conversation(counter=counter)
    if args.context_limit:
        limit, source = args.context_limit, "--context-limit"
    else:
        resolved = resolve_context_limit(config.model)
        limit, source = resolved.tokens, f"{resolved.source}; --context-limit overrides"
    compactor = make_compactor(
        config, counter=counter, summarizer=summarizer, context_limit=limit, session_id=session.id
    )
    # The model's speeds as last measured here size the first defrag and batch; what this
    # replay measures is kept after each turn that ran passes (an interrupted replay keeps it).
    kept_speed = KeptSpeed.open(store, summarizer, compactor.ctx.speed)
    progress = Progress(sys.stderr) if sys.stderr.isatty() else None

    def on_turn(number: int, total: int, reports: list[PassReport]) -> None:
        if progress:
            progress.update(number, total, reports)
        if reports and kept_speed is not None:
            kept_speed.save_if_new()

    result = replay(
        messages, conv, compactor, turns=args.turns, start_at=done,
        flush=lambda new: store.flush(session.id, new),
        persist=lambda pass_result: store.archive_and_compact(session.id, pass_result),
        on_turn=on_turn,
    )
    if progress:
        progress.close()
    output = dump_transcript(conv.messages) + "\n"
    if args.out:
        try:
            args.out.write_text(output, encoding="utf-8")
        except OSError as exc:
            raise UserError(f"{args.out}: cannot write ({exc.strerror or exc})") from None
    else:
        sys.stdout.write(output)
    print(result_line(result, compactor.ctx.window.occupancy_pct(conv.total_tokens), len(conv)), file=sys.stderr)
    print(f"context window {limit:,} tokens ({source}); stored as session {session.id} ({session.title})", file=sys.stderr)
    return 0


def _replay_title(store: Store, transcript: Path) -> str:
    """The file name and the time: replays of one file stay apart in ``sessions list``."""
    from datetime import datetime

    title = f"{transcript.name} · replay {datetime.now():%Y-%m-%d %H:%M:%S}"
    taken = {s.title for s in store.list_sessions(kind="replay")}
    n = 2
    unique = title
    while unique in taken:
        unique, n = f"{title} ({n})", n + 1
    return unique


def _replayed_prefix(store: Store, session_id: str, messages: list[Message], transcript: Path) -> int:
    """How many input messages an interrupted replay already stored (they must match the input).

    Markers the input carried count like any other message; only those the replay's own passes
    wrote are not input. Messages match in their wire form: parts and tool calls included.
    """
    stored = store.load_appended(session_id)
    for n, msg in enumerate(stored):
        if n >= len(messages) or msg.to_openai() != messages[n].to_openai():
            raise UserError(f"{transcript}: message {n} differs from session {session_id}: not the same transcript")
    return len(stored)


def result_line(result: ReplayResult, occupancy: float | None, messages: int) -> str:
    micro = [r for r in result.reports if r.kind == MICRO]
    outcomes: dict[str, int] = {}
    for report in micro:
        outcomes[report.outcome] = outcomes.get(report.outcome, 0) + 1
    mix = ", ".join(f"{name} {count}" for name, count in sorted(outcomes.items())) or "none"
    failures = sorted({failure for r in result.reports if (failure := r.fields.get("failure"))})
    occ = f"{occupancy:.1f}% of threshold" if occupancy is not None else "unknown (no context limit)"
    failed_batches = result.count("failed", BATCH)
    batches = f"batch compactions {result.count('compressed', BATCH)}" + (
        f" ({failed_batches} failed)" if failed_batches else ""
    )
    lines = [
        f"turns {result.turns}, micro passes {len(micro)} ({mix}), {batches}",
        f"tokens {result.tokens_before:,} -> {result.tokens_after:,} ({messages} messages), final occupancy {occ}",
    ]
    if failures:
        lines.append(f"failures: {', '.join(failures)} (details in {paths.log_path()})")
    return "\n".join(lines)


class Progress:
    """A one-line progress bar on a terminal."""

    def __init__(self, stream: TextIO, width: int = 30):
        self.stream, self.width = stream, width

    def update(self, done: int, total: int, reports: list[PassReport]) -> None:
        filled = self.width * done // max(total, 1)
        last = reports[-1].outcome if reports else ""
        self.stream.write(f"\r[{'#' * filled}{'.' * (self.width - filled)}] turn {done}/{total} {last:<20}")
        self.stream.flush()

    def close(self) -> None:
        self.stream.write("\n")


def progress_dots(done: int, total: int, reports: list[PassReport]) -> None:
    if sys.stdout.isatty() and (done % 5 == 0 or done == total):
        print(f"\r  replayed {done}/{total} agent steps", end="", flush=True)


def run_demo(args: argparse.Namespace) -> int:
    """Replay the bundled agent session with the extractive summarizer, printing each pass."""
    from hermes_tui.analysis.report_figures import trajectory
    from hermes_tui.analysis.report_text import format_trajectory

    config = config_from(args, {"auxiliary.compression.provider": "extractive"})
    setup_logging()
    messages = read_transcript(DEMO_SESSION)
    counter = make_counter(config)
    compactor = make_compactor(config, counter=counter, context_limit=FALLBACK_CONTEXT_LIMIT, session_id="demo")
    conv = Conversation(counter=counter)
    print(
        f"Replaying {DEMO_SESSION.name}: {len(messages)} messages of a real agent session, one pass per agent step,\n"
        f"with the built-in extractive summarizer (no model needed) and a {FALLBACK_CONTEXT_LIMIT:,}-token window.\n"
    )
    result = replay(messages, conv, compactor, turns="step", on_turn=progress_dots)
    print()
    rows = trajectory([r.fields for r in result.reports if r.kind == MICRO])
    step = max(1, len(rows) // 12)
    print("\n".join(format_trajectory(rows[::step] + ([rows[-1]] if rows and (len(rows) - 1) % step else []))))
    print()
    print(result_line(result, compactor.ctx.window.occupancy_pct(conv.total_tokens), len(conv)))
    print(f"\nRolling summary now ({compactor.state.summary_tokens} tokens), first lines:")
    for line in compactor.rolling_summary.splitlines()[:8]:
        print(f"  {line}")
    print(f"\nTelemetry: {paths.log_path()}  (summarize it: hermes-tui report --per-session)")
    return 0
