"""``hermes-tui sessions``: list, show, export, import (from Hermes Agent), search and delete."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from hermes_tui import paths
from hermes_tui.cli.common import UserError, cli_config
from hermes_tui.store import Store


def add_parser(sub: Any) -> None:
    """Add ``sessions`` and its actions to the top-level subparsers of ``hermes-tui``."""
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
    config = cli_config(args)
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
