"""Command line: ``hermes-tui`` (the app; ``--resume [ID]``, ``open TRANSCRIPT``) | run | demo | compact | report.

Every user error (a bad transcript, config or endpoint) ends in one line naming
the file or key and the problem, and a non-zero exit; never a traceback.

Building the parser imports nothing heavy: each command's module (and the model, store and
config libraries it needs) is imported when that command runs, so ``--help`` and light
commands start as fast as Python does.
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys
from collections.abc import Callable, Sequence
from pathlib import Path

from hermes_tui import __version__
from hermes_tui.analysis import report as report_cli
from hermes_tui.cli.bench import add_bench_parser
from hermes_tui.cli.common import COMPRESSION_PROVIDERS, MICRO_MODES, POLICIES, TURN_MODES
from hermes_tui.cli.eval import add_eval_parser
from hermes_tui.cli.mcp import add_parser as add_mcp_parser
from hermes_tui.cli.models import add_parser as add_models_parser


def command(module: str, function: str) -> Callable[[argparse.Namespace], int]:
    """The function that runs a command, from ``hermes_tui.cli.<module>``, imported when it runs."""

    def run(args: argparse.Namespace) -> int:
        code: int = getattr(importlib.import_module(f"hermes_tui.cli.{module}"), function)(args)
        return code

    return run


def user_errors() -> tuple[type[Exception], ...]:
    """The exceptions that are the user's to fix. Imported only once one is raised (an
    ``except`` clause is evaluated then), so a command does not load what it never uses."""
    from hermes_tui.cli.common import UserError
    from hermes_tui.config import ConfigError
    from hermes_tui.core.transcript import TranscriptError
    from hermes_tui.hermes_agent.state_db import HermesImportError
    from hermes_tui.providers.backend import ProviderError
    from hermes_tui.store import StoreError
    from hermes_tui.util.logs import LogFileError

    return (UserError, ConfigError, ProviderError, TranscriptError, StoreError, LogFileError, HermesImportError)


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        code: int = args.run(args)
        return code
    except KeyboardInterrupt:
        print("hermes-tui: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        # The reader went away (e.g. `| head`): stop quietly, as Unix tools do.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 1
    except user_errors() as exc:
        from hermes_tui.util.terminal_text import visible_controls

        # The message may quote outside text (an endpoint's error, a transcript's value).
        print(f"hermes-tui: {visible_controls(str(exc))}", file=sys.stderr)
        return 2


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
    parser.set_defaults(run=command("app", "run_app"))
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")

    open_ = sub.add_parser("open", help="import a transcript as a new session and open it in the app")
    open_.add_argument(
        "transcript", type=Path,
        help="JSON array (or JSONL) of OpenAI chat messages, a Hermes Agent session snapshot or sessions export",
    )
    open_.add_argument(
        "--session", metavar="ID|TITLE",
        help="which session of a file that holds several: its id, or the start of its title",
    )
    open_.set_defaults(run=command("app", "run_app"))

    demo = sub.add_parser("demo", help="replay a bundled agent session and watch it compact")
    demo.set_defaults(run=command("compact", "run_demo"))

    compact = sub.add_parser("compact", help="replay a transcript through compaction, turn by turn")
    compact.add_argument(
        "transcript", type=Path,
        help="JSON array (or JSONL) of OpenAI chat messages, a Hermes Agent session snapshot or sessions export",
    )
    compact.add_argument("--out", type=Path, help="write the compacted transcript here (default: stdout)")
    compact.add_argument("--provider", choices=COMPRESSION_PROVIDERS)
    compact.add_argument("--model", help="compression model (a name the endpoint serves, or an MLX model)")
    compact.add_argument("--base-url", help="OpenAI-compatible endpoint for the compression model")
    compact.add_argument("--context-limit", type=int, metavar="TOKENS", help="the main model's context window")
    compact.add_argument("--threshold", type=float, metavar="F", help="compress at this share of the window")
    compact.add_argument("--target-ratio", type=float, metavar="F", help="share of the threshold kept as tail")
    compact.add_argument("--protect-first-n", type=int, metavar="N", help="opening messages never compacted")
    compact.add_argument("--mode", choices=MICRO_MODES, help="micro-compaction mode (compression.micro_compact_mode)")
    compact.add_argument("--policy", choices=POLICIES, help="when passes run (compression.policy)")
    compact.add_argument(
        "--turns", choices=TURN_MODES, default="user",
        help="finalize after each user turn (default) or after every agent step",
    )
    compact.add_argument("--session", metavar="NAME", help="title of the stored session (default: the file name and the time)")
    compact.add_argument(
        "--resume", metavar="ID", help="continue an interrupted replay of this transcript in stored session ID"
    )
    compact.set_defaults(run=command("compact", "run_compact"))

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
    run.set_defaults(run=command("app", "run_headless_turn"))

    sessions = sub.add_parser("sessions", help="list, show, export, search and delete stored sessions")
    ssub = sessions.add_subparsers(dest="sessions_command", metavar="ACTION", required=True)
    listing = ssub.add_parser("list", help="stored sessions, newest first")
    listing.add_argument("--json", action="store_true", help="machine-readable: id, kind (chat or replay), title, created, message count")
    listing.set_defaults(run=command("sessions", "run_sessions_list"))
    show = ssub.add_parser("show", help="a session's active transcript, readable")
    show.add_argument("id", help="session id (a unique prefix is enough)")
    show.set_defaults(run=command("sessions", "run_sessions_show"))
    export = ssub.add_parser("export", help="a session as OpenAI JSON, Markdown or a Hermes Agent snapshot, to stdout")
    export.add_argument("id")
    export.add_argument(
        "--format", choices=["json", "md", "hermes"], default="json",
        help="hermes: a Hermes Agent JSON session snapshot whose summaries Hermes recognises",
    )
    export.add_argument("--all", action="store_true", help="include the archived originals, in order")
    export.set_defaults(run=command("sessions", "run_sessions_export"))
    importing = ssub.add_parser(
        "import", help="copy Hermes Agent sessions in as new sessions (read-only on its files)",
        description="Without SESSION or --all, lists the Hermes sessions there are and imports none.",
    )
    importing.add_argument("--from", dest="source", choices=["hermes"], required=True, help="the program to import from")
    importing.add_argument("--home", type=Path, metavar="DIR", help="Hermes Agent's home (default: HERMES_HOME, else ~/.hermes)")
    importing.add_argument("--all", action="store_true", help="import every conversation (a compression chain once)")
    importing.add_argument("session", nargs="*", metavar="SESSION", help="Hermes session ids to import")
    importing.set_defaults(run=command("sessions", "run_sessions_import"))
    search = ssub.add_parser("search", help="full-text search over every session, archived messages included")
    search.add_argument("query")
    search.add_argument("--limit", type=int, default=20)
    search.set_defaults(run=command("sessions", "run_sessions_search"))
    remove = ssub.add_parser("rm", help="delete a session and all its messages")
    remove.add_argument("id")
    remove.set_defaults(run=command("sessions", "run_sessions_rm"))

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
