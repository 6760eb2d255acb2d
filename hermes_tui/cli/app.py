"""The chat app (``hermes-tui``, ``--resume [ID]``, ``open TRANSCRIPT``) and ``hermes-tui run``."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from hermes_tui.cli.common import UserError, config_from
from hermes_tui.store import Store
from hermes_tui.tui.heap import hold_collections, release_collections
from hermes_tui.util import paths
from hermes_tui.util.logs import setup_logging

if TYPE_CHECKING:
    from hermes_tui.config import Config


def run_app(args: argparse.Namespace) -> int:
    """The chat app: a new session, a resumed one (``--resume [ID]``) or an imported transcript
    (``open``). What can be checked before the screen takes over is, with a one-line error."""
    hold_collections()  # until the first screen is up (see tui.heap)
    try:
        return _run_app(args)
    finally:
        release_collections()


def _run_app(args: argparse.Namespace) -> int:
    config = config_from(args)
    transcript = getattr(args, "transcript", None)
    import_session = getattr(args, "session", None)
    if transcript is not None:
        _check_transcript(transcript, import_session)  # a bad file: exit 2 before the app starts
    workspace = Path(args.workspace).expanduser() if getattr(args, "workspace", None) else None
    if workspace is not None and not workspace.is_dir():
        raise UserError(f"--workspace {args.workspace}: not a directory")
    setup_logging()
    store = Store(paths.state_db_path())
    try:
        session_id = None
        if args.resume is not None:
            session_id = store.get_session(args.resume).id if args.resume else _latest_session(store)
            store.check_not_open_elsewhere(session_id)  # one line and exit 2, before the screen takes over
        if uses_mlx(config):
            from hermes_tui.providers.mlx.runtime import import_mlx_on_main_thread

            import_mlx_on_main_thread()
        from hermes_tui.tui.app import HermesApp

        app = HermesApp(config, store, session_id=session_id, import_path=transcript, config_path=args.config,
                        workspace=workspace, import_session=import_session)
        app.run()
    finally:
        store.close()
    return app.return_code or 0



def _check_transcript(path: Path, session: str | None) -> None:
    """A file ``open`` cannot take: one line. A file of several sessions with none chosen: its
    sessions listed on stdout, and how to pick one."""
    from hermes_tui.hermes_agent.sessions import SeveralSessions, read_transcript_file

    try:
        read_transcript_file(path, session=session)
    except SeveralSessions as exc:
        for choice in exc.choices:
            print(f"{choice.id}  {choice.messages:>6} messages  {choice.title or '(untitled)'}")
        raise UserError(f"{exc.problem}: open one with hermes-tui open {path} --session ID (or the start of its title)") from None

def uses_mlx(config: Config) -> bool:
    """Whether the chat or the compression model runs in-process on MLX as configured.

    Only then is mlx_lm (and transformers under it, over a second of start-up) imported up
    front, on the main thread; with endpoints it is never imported. A model chosen later in
    the app loads MLX where it loads.
    """
    from hermes_tui.hub.resolve import ModelUnavailable
    from hermes_tui.providers.backend import ProviderError
    from hermes_tui.providers.selection import resolve_provider

    for cfg, role in ((config.model, "model"), (config.auxiliary.compression, "auxiliary.compression")):
        try:
            if resolve_provider(cfg, role=role) == "mlx":
                return True
        except (ProviderError, ModelUnavailable):
            pass  # the app says what to configure; nothing of MLX to load for it
    return False


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

    config = config_from(args)
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
        from hermes_tui.util.terminal_text import visible_controls

        print(visible_controls(outcome.result.text))  # the model's text, to a terminal: its escapes shown, not obeyed
    else:
        print(f"hermes-tui: {problem}", file=sys.stderr)
        return 130 if outcome.result.outcome == "stopped" else 1
    return 0
