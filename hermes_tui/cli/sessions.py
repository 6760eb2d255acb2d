"""``hermes-tui sessions ...``: list, show, export, import, search and delete stored sessions."""

from __future__ import annotations

import argparse
import sys

from hermes_tui.cli.common import UserError, config_from
from hermes_tui.store import Store
from hermes_tui.util import paths


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

        from hermes_tui.hermes_agent.sessions import to_hermes_snapshot

        snapshot = to_hermes_snapshot(messages, session_id=info.id, title=info.title, model=info.model)
        print(json.dumps(snapshot, ensure_ascii=False, indent=1))
    else:
        print(to_json(messages) if args.format == "json" else to_markdown(info, messages))
    return 0


def run_sessions_import(args: argparse.Namespace) -> int:
    """List Hermes' conversations, or import the named ones (or all): everything is read first,
    so a bad session id imports nothing."""
    from hermes_tui.hermes_agent.importer import (
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
    config = config_from(args)
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
