"""Command line: ``hermes-tui`` (the app; ``--resume [ID]``, ``open TRANSCRIPT``) | run | demo | compact | report.

Every user error (a bad transcript, config or endpoint) ends in one line naming
the file or key and the problem, and a non-zero exit; never a traceback.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence
from pathlib import Path

from hermes_tui import __version__, paths
from hermes_tui.analysis import report as report_cli
from hermes_tui.analysis.replay import TURN_MODES, ReplayResult, replay
from hermes_tui.cli.bench import add_bench_parser
from hermes_tui.cli.eval import add_eval_parser
from hermes_tui.cli.mcp import add_parser as add_mcp_parser
from hermes_tui.cli.models import add_parser as add_models_parser
from hermes_tui.compaction.engine import PassReport
from hermes_tui.compaction.policy import POLICIES
from hermes_tui.config import Config, ConfigError, apply_overrides, load_config
from hermes_tui.conversation import Conversation
from hermes_tui.hermes_sessions import read_transcript_file
from hermes_tui.logs import LogFileError, setup_logging
from hermes_tui.providers.context_limits import resolve as resolve_context_limit
from hermes_tui.providers.select import ProviderError
from hermes_tui.session.wiring import make_compactor, make_counter
from hermes_tui.store import Store, StoreError
from hermes_tui.store.hermes import HermesImportError
from hermes_tui.summarizers.select import make_summarizer
from hermes_tui.transcript import TranscriptError, dump_transcript, read_transcript

DEMO_SESSION = Path(__file__).resolve().parents[1] / "assets" / "demo_session.json"


class UserError(Exception):
    """A problem the user can fix; printed as one line."""


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        return args.run(args)
    except (UserError, ConfigError, ProviderError, TranscriptError, StoreError, LogFileError, HermesImportError) as exc:
        print(f"hermes-tui: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("hermes-tui: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        # The reader went away (e.g. `| head`): stop quietly, as Unix tools do.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 1


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="hermes-tui",
        description="A local-first terminal chat app whose context never fills up.",
    )
    parser.add_argument("--version", action="version", version=f"hermes-tui {__version__}")
    parser.add_argument("--config", type=Path, help="config.yaml to use (default: in HERMES_TUI_HOME)")
    parser.add_argument(
        "--resume", nargs="?", const="", metavar="ID",
        help="open the app on a stored session (default: the most recent one)",
    )
    parser.set_defaults(run=run_app)
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")

    open_ = sub.add_parser("open", help="import a transcript as a new session and open it in the app")
    open_.add_argument(
        "transcript", type=Path,
        help="JSON array (or JSONL) of OpenAI chat messages, a Hermes Agent session snapshot or sessions export",
    )
    open_.set_defaults(run=run_app)

    demo = sub.add_parser("demo", help="replay a bundled agent session and watch it compact")
    demo.set_defaults(run=run_demo)

    compact = sub.add_parser("compact", help="replay a transcript through compaction, turn by turn")
    compact.add_argument(
        "transcript", type=Path,
        help="JSON array (or JSONL) of OpenAI chat messages, a Hermes Agent session snapshot or sessions export",
    )
    compact.add_argument("--out", type=Path, help="write the compacted transcript here (default: stdout)")
    compact.add_argument("--provider", choices=["auto", "mlx", "openai-api", "extractive"])
    compact.add_argument("--model", help="compression model (a name the endpoint serves, or an MLX model)")
    compact.add_argument("--base-url", help="OpenAI-compatible endpoint for the compression model")
    compact.add_argument("--context-limit", type=int, metavar="TOKENS", help="the main model's context window")
    compact.add_argument("--threshold", type=float, metavar="F", help="compress at this share of the window")
    compact.add_argument("--target-ratio", type=float, metavar="F", help="share of the threshold kept as tail")
    compact.add_argument("--protect-first-n", type=int, metavar="N", help="opening messages never compacted")
    compact.add_argument("--mode", choices=["merge", "append"], help="micro-compaction mode (compression.micro_compact_mode)")
    compact.add_argument("--policy", choices=list(POLICIES), help="when passes run (compression.policy)")
    compact.add_argument(
        "--turns", choices=TURN_MODES, default="user",
        help="finalize after each user turn (default) or after every agent step",
    )
    compact.add_argument("--session", metavar="NAME", help="title of the stored session (default: the file name and the time)")
    compact.add_argument(
        "--resume", metavar="ID", help="continue an interrupted replay of this transcript in stored session ID"
    )
    compact.set_defaults(run=run_compact)

    run = sub.add_parser(
        "run", help="one agent turn without the UI: tool activity on stderr, the answer on stdout",
        description="Run PROMPT through the agent loop without the UI. Anything the approval mode "
        "does not allow is denied (no one is asked). Exit 0 when the turn completed.",
    )
    run.add_argument("prompt", help="the user's message")
    run.add_argument("--workspace", metavar="DIR", help="the folder tools act in (default: agent.workspace, else here)")
    run.add_argument(
        "--approve", choices=["read-only", "auto-edit", "full"],
        help="approval mode for this run (default: agent.approval; what would ask is denied)",
    )
    run.add_argument("--resume", metavar="ID", help="carry on stored session ID")
    run.set_defaults(run=run_headless_turn)

    sessions = sub.add_parser("sessions", help="list, show, export, search and delete stored sessions")
    ssub = sessions.add_subparsers(dest="sessions_command", metavar="ACTION", required=True)
    listing = ssub.add_parser("list", help="stored sessions, newest first")
    listing.add_argument("--json", action="store_true", help="machine-readable: id, kind (chat or replay), title, created, message count")
    listing.set_defaults(run=run_sessions_list)
    show = ssub.add_parser("show", help="a session's active transcript, readable")
    show.add_argument("id", help="session id (a unique prefix is enough)")
    show.set_defaults(run=run_sessions_show)
    export = ssub.add_parser("export", help="a session as OpenAI JSON, Markdown or a Hermes Agent snapshot, to stdout")
    export.add_argument("id")
    export.add_argument(
        "--format", choices=["json", "md", "hermes"], default="json",
        help="hermes: a Hermes Agent JSON session snapshot whose summaries Hermes recognises",
    )
    export.add_argument("--all", action="store_true", help="include the archived originals, in order")
    export.set_defaults(run=run_sessions_export)
    importing = ssub.add_parser(
        "import", help="copy Hermes Agent sessions in as new sessions (read-only on its files)",
        description="Without SESSION or --all, lists the Hermes sessions there are and imports none.",
    )
    importing.add_argument("--from", dest="source", choices=["hermes"], required=True, help="the program to import from")
    importing.add_argument("--home", type=Path, metavar="DIR", help="Hermes Agent's home (default: HERMES_HOME, else ~/.hermes)")
    importing.add_argument("--all", action="store_true", help="import every conversation (a compression chain once)")
    importing.add_argument("session", nargs="*", metavar="SESSION", help="Hermes session ids to import")
    importing.set_defaults(run=run_sessions_import)
    search = ssub.add_parser("search", help="full-text search over every session, archived messages included")
    search.add_argument("query")
    search.add_argument("--limit", type=int, default=20)
    search.set_defaults(run=run_sessions_search)
    remove = ssub.add_parser("rm", help="delete a session and all its messages")
    remove.add_argument("id")
    remove.set_defaults(run=run_sessions_rm)

    report = sub.add_parser(
        "report", help="summarize compaction telemetry from logs", description=report_cli.DESCRIPTION
    )
    report_cli.add_arguments(report)
    report.set_defaults(run=report_cli.run)

    add_bench_parser(sub)
    add_eval_parser(sub)
    add_models_parser(sub)
    add_mcp_parser(sub)
    return parser


# --- config --------------------------------------------------------------------------


def _config(args: argparse.Namespace, overrides: dict | None = None) -> Config:
    """The config file (a named one must exist), with command-line flags applied on top."""
    if args.config is not None and not args.config.is_file():
        raise UserError(f"--config {args.config}: no such file")
    config = load_config(args.config)
    overrides = {k: v for k, v in (overrides or {}).items() if v is not None}
    try:
        return apply_overrides(config, overrides, origin="command line") if overrides else config
    except ConfigError as exc:
        flag = FLAG_OF_KEY.get(exc.key or "", exc.key)
        raise UserError(f"{flag}: {exc.message}") from None


# The compact flags and the config keys they override, so errors name what was typed.
FLAG_OF_KEY = {
    "auxiliary.compression.provider": "--provider",
    "auxiliary.compression.model": "--model",
    "auxiliary.compression.base_url": "--base-url",
    "compression.threshold": "--threshold",
    "compression.target_ratio": "--target-ratio",
    "compression.protect_first_n": "--protect-first-n",
    "compression.policy": "--policy",
}


# --- compact -------------------------------------------------------------------------


def run_compact(args: argparse.Namespace) -> int:
    config = _config(args, {
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
    args: argparse.Namespace, config: Config, messages: list, counter, summarizer, store: Store,
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
    progress = Progress(sys.stderr) if sys.stderr.isatty() else None
    result = replay(
        messages, conv, compactor, turns=args.turns, start_at=done,
        flush=lambda new: store.flush(session.id, new),
        persist=lambda pass_result: store.archive_and_compact(session.id, pass_result),
        on_turn=progress.update if progress else None,
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


def _replayed_prefix(store: Store, session_id: str, messages, transcript: Path) -> int:
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
    micro = [r for r in result.reports if r.kind == "micro"]
    outcomes: dict[str, int] = {}
    for report in micro:
        outcomes[report.outcome] = outcomes.get(report.outcome, 0) + 1
    mix = ", ".join(f"{name} {count}" for name, count in sorted(outcomes.items())) or "none"
    failures = sorted({r.fields.get("failure") for r in result.reports if r.fields.get("failure")})
    occ = f"{occupancy:.1f}% of threshold" if occupancy is not None else "unknown (no context limit)"
    failed_batches = result.count("failed", "batch")
    batches = f"batch compactions {result.count('compressed', 'batch')}" + (
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

    def __init__(self, stream, width: int = 30):
        self.stream, self.width = stream, width

    def update(self, done: int, total: int, reports: list[PassReport]) -> None:
        filled = self.width * done // max(total, 1)
        last = reports[-1].outcome if reports else ""
        self.stream.write(f"\r[{'#' * filled}{'.' * (self.width - filled)}] turn {done}/{total} {last:<20}")
        self.stream.flush()

    def close(self) -> None:
        self.stream.write("\n")


# --- the app -------------------------------------------------------------------------


def run_app(args: argparse.Namespace) -> int:
    """The chat app: a new session, a resumed one (``--resume [ID]``) or an imported transcript
    (``open``). What can be checked before the screen takes over is, with a one-line error."""
    config = _config(args)
    transcript = getattr(args, "transcript", None)
    if transcript is not None:
        read_transcript_file(transcript)  # a bad file: one line and exit 2, before the app starts
    setup_logging()
    store = Store(paths.state_db_path())
    try:
        session_id = None
        if args.resume is not None:
            session_id = store.get_session(args.resume).id if args.resume else _latest_session(store)
            store.check_not_open_elsewhere(session_id)  # one line and exit 2, before the screen takes over
        from hermes_tui.providers.mlx_runtime import import_mlx_on_main_thread
        from hermes_tui.tui.app import HermesApp

        import_mlx_on_main_thread()

        app = HermesApp(config, store, session_id=session_id, import_path=transcript, config_path=args.config)
        app.run()
    finally:
        store.close()
    return app.return_code or 0


def _latest_session(store: Store) -> str:
    """The newest chat: a replay ``compact`` stored is opened only by its id."""
    chats = store.list_sessions(kind="chat")
    if not chats:
        replays = len(store.list_sessions(kind="replay"))
        also = f" ({replays} compact replays are stored: hermes-tui --resume ID opens one)" if replays else ""
        raise UserError(f"no stored session to resume in {store.path}: run hermes-tui to start one{also}")
    return chats[0].id


# --- run -----------------------------------------------------------------------------


def run_headless_turn(args: argparse.Namespace) -> int:
    from hermes_tui.chat.client import ChatError
    from hermes_tui.session.headless import failure_line, run_headless

    config = _config(args)
    if args.workspace is not None and not Path(args.workspace).expanduser().is_dir():
        raise UserError(f"--workspace {args.workspace}: not a directory")
    setup_logging()
    with Store(paths.state_db_path()) as store:
        try:
            outcome = run_headless(config, store, args.prompt, workspace=args.workspace,
                                   mode=args.approve, resume=args.resume)
        except ChatError as exc:
            raise UserError(str(exc)) from None
        except ValueError as exc:  # the workspace: config agent.workspace is not a folder
            raise UserError(f"agent.workspace: {exc}") from None
    problem = failure_line(outcome, config.agent.max_steps)
    if problem is None:
        print(outcome.result.text)
    else:
        print(f"hermes-tui: {problem}", file=sys.stderr)
        return 130 if outcome.result.outcome == "stopped" else 1
    return 0


# --- demo ----------------------------------------------------------------------------


def progress_dots(done: int, total: int, reports: list[PassReport]) -> None:
    if sys.stdout.isatty() and (done % 5 == 0 or done == total):
        print(f"\r  replayed {done}/{total} agent steps", end="", flush=True)


def run_demo(args: argparse.Namespace) -> int:
    """Replay the bundled agent session with the extractive summarizer, printing each pass."""
    from hermes_tui.analysis.report import format_trajectory, trajectory

    config = _config(args, {"auxiliary.compression.provider": "extractive"})
    setup_logging()
    messages = read_transcript(DEMO_SESSION)
    counter = make_counter(config)
    compactor = make_compactor(config, counter=counter, context_limit=32_768, session_id="demo")
    conv = Conversation(counter=counter)
    print(
        f"Replaying {DEMO_SESSION.name}: {len(messages)} messages of a real agent session, agent step by step\n"
        f"(passes: compression.policy {config.compression.policy}),"
        " "
        "with the built-in extractive summarizer (no model needed) and a 32,768-token window.\n"
    )
    result = replay(messages, conv, compactor, turns="step", on_turn=progress_dots)
    print()
    rows = trajectory([r.fields for r in result.reports if r.kind == "micro"])
    step = max(1, len(rows) // 12)
    print("\n".join(format_trajectory(rows[::step] + ([rows[-1]] if rows and (len(rows) - 1) % step else []))))
    print()
    print(result_line(result, compactor.ctx.window.occupancy_pct(conv.total_tokens), len(conv)))
    print(f"\nRolling summary now ({compactor.state.summary_tokens} tokens), first lines:")
    for line in compactor.rolling_summary.splitlines()[:8]:
        print(f"  {line}")
    print(f"\nTelemetry: {paths.log_path()}  (summarize it: hermes-tui report --per-session)")
    return 0


# --- sessions ------------------------------------------------------------------------


def _store() -> Store:
    return Store(paths.state_db_path())


def run_sessions_list(args: argparse.Namespace) -> int:
    import json
    from datetime import datetime

    with _store() as store:
        sessions = store.list_sessions()
    if args.json:
        rows = [
            {"id": s.id, "kind": s.kind, "title": s.title, "created": s.created, "message_count": s.message_count}
            for s in sessions
        ]
        print(json.dumps(rows, indent=1))
        return 0
    if not sessions:
        print("no sessions yet")
    for s in sessions:
        when = datetime.fromtimestamp(s.updated).strftime("%Y-%m-%d %H:%M")
        print(f"{s.id}  {when}  {s.kind:<6}  {s.message_count:>6} messages  {s.title}")
    return 0


def run_sessions_show(args: argparse.Namespace) -> int:
    from hermes_tui.store.export import to_markdown

    with _store() as store:
        info = store.get_session(args.id)
        print(to_markdown(info, store.load_active(info.id)))
    return 0


def run_sessions_export(args: argparse.Namespace) -> int:
    from hermes_tui.store.export import session_messages, to_json, to_markdown

    with _store() as store:
        info = store.get_session(args.id)
        messages = session_messages(store, info.id, include_archived=args.all)
    if args.format == "hermes":
        import json

        from hermes_tui.hermes_sessions import to_hermes_snapshot

        snapshot = to_hermes_snapshot(messages, session_id=info.id, title=info.title, model=info.model)
        print(json.dumps(snapshot, ensure_ascii=False, indent=1))
    else:
        print(to_json(messages) if args.format == "json" else to_markdown(info, messages))
    return 0


def run_sessions_import(args: argparse.Namespace) -> int:
    """List Hermes' conversations, or import the named ones (or all): everything is read first,
    so a bad session id imports nothing."""
    from hermes_tui.session.hermes_import import (
        conversations,
        hermes_db,
        listing_line,
        read_all,
        store_session,
    )

    db = hermes_db(args.home)
    if args.all and args.session:
        raise UserError("sessions import: name sessions or give --all, not both")
    if not args.all and not args.session:
        listed = conversations(db)
        if not listed:
            print(f"no Hermes sessions in {db}")
        for s in listed:
            print(listing_line(s))
        print("import one with: hermes-tui sessions import --from hermes SESSION (or --all)", file=sys.stderr)
        return 0
    ids = [s.id for s in conversations(db)] if args.all else args.session
    sessions = read_all(db, ids)
    config = _config(args)
    with _store() as store:
        for session in sessions:
            print(store_session(store, session, config).line())
    return 0


def run_sessions_search(args: argparse.Namespace) -> int:
    with _store() as store:
        hits = store.search(args.query, limit=args.limit)
    if not hits:
        print(f"no matches for {args.query!r}")
    for hit in hits:
        state = " (archived)" if hit.state == "archived" else ""
        print(f"{hit.session_id}  {hit.role:<9}{state}  {hit.title}: {hit.snippet}")
    return 0


def run_sessions_rm(args: argparse.Namespace) -> int:
    with _store() as store:
        info = store.get_session(args.id)
        store.delete_session(info.id)
    print(f"deleted session {info.id} ({info.title}, {info.message_count} messages)")
    return 0


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
