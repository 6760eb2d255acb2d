"""Command line: ``hermes-tui`` (the app; ``--resume [ID]``, ``open TRANSCRIPT``) | run | demo | compact | report.

The subcommands with modules of their own: ``compact`` and ``demo`` (cli.replay), ``sessions``,
``bench``, ``eval``, ``models``, ``mcp``.

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
from hermes_tui.cli.bench import add_bench_parser
from hermes_tui.cli.common import UserError, _config
from hermes_tui.cli.eval import add_eval_parser
from hermes_tui.cli.mcp import add_parser as add_mcp_parser
from hermes_tui.cli.models import add_parser as add_models_parser
from hermes_tui.cli.replay import add_replay_parsers
from hermes_tui.cli.sessions import add_sessions_parser
from hermes_tui.config import ConfigError
from hermes_tui.hermes_sessions import read_transcript_file
from hermes_tui.logs import LogFileError, setup_logging
from hermes_tui.providers.select import ProviderError
from hermes_tui.store import Store, StoreError
from hermes_tui.store.hermes import HermesImportError
from hermes_tui.transcript import TranscriptError


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
    parser.add_argument("--workspace", metavar="DIR",
                        help="the folder the chat's tools act in (default: agent.workspace, else here)")
    parser.set_defaults(run=run_app)
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")

    open_ = sub.add_parser("open", help="import a transcript as a new session and open it in the app")
    open_.add_argument(
        "transcript", type=Path,
        help="JSON array (or JSONL) of OpenAI chat messages, a Hermes Agent session snapshot or sessions export",
    )
    open_.set_defaults(run=run_app)

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

    report = sub.add_parser(
        "report", help="summarize compaction telemetry from logs", description=report_cli.DESCRIPTION
    )
    report_cli.add_arguments(report)
    report.set_defaults(run=report_cli.run)

    add_replay_parsers(sub)
    add_sessions_parser(sub)
    add_bench_parser(sub)
    add_eval_parser(sub)
    add_models_parser(sub)
    add_mcp_parser(sub)
    return parser


# --- the app -------------------------------------------------------------------------


def run_app(args: argparse.Namespace) -> int:
    """The chat app: a new session, a resumed one (``--resume [ID]``) or an imported transcript
    (``open``). What can be checked before the screen takes over is, with a one-line error."""
    config = _config(args)
    transcript = getattr(args, "transcript", None)
    if transcript is not None:
        read_transcript_file(transcript)  # a bad file: one line and exit 2, before the app starts
    workspace = Path(args.workspace).expanduser() if args.workspace else None
    if workspace is not None and not workspace.is_dir():
        raise UserError(f"--workspace {args.workspace}: not a directory")
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

        app = HermesApp(config, store, session_id=session_id, import_path=transcript, config_path=args.config,
                        workspace=workspace)
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

if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
