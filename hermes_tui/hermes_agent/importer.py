"""Hermes Agent's sessions as new sessions of ours: what it sends becomes our active
transcript, what it compacted away our archived history. Its files are only read
(``hermes_agent/state_db.py``)."""

from __future__ import annotations

from dataclasses import dataclass, replace
from datetime import datetime
from pathlib import Path

from hermes_tui.config import Config
from hermes_tui.hermes_agent.sessions import HermesSession
from hermes_tui.hermes_agent.state_db import (
    HermesImportError,
    HermesSessionInfo,
    list_sessions,
    read_session,
)
from hermes_tui.store import SessionInfo, Store
from hermes_tui.util import paths

STATE_DB = "state.db"


@dataclass(frozen=True)
class Imported:
    """One Hermes conversation stored as our session ``info``."""

    hermes: HermesSession
    info: SessionInfo

    def line(self) -> str:
        h = self.hermes
        archived = f", {len(h.archived)} archived" if h.archived else ""
        return (f"imported Hermes session {h.session_id} ({self.info.title}): {len(h.messages)} messages, "
                f"{h.markers} summar{'y' if h.markers == 1 else 'ies'}{archived} -> session {self.info.id}")


def hermes_db(home: Path | None = None) -> Path:
    """Hermes' ``state.db`` in ``home`` (default: HERMES_HOME, else ~/.hermes)."""
    home = Path(home).expanduser() if home is not None else paths.hermes_agent_home()
    if not home.is_dir():
        raise HermesImportError(f"{home}: no Hermes Agent home here (no such folder)")
    return home / STATE_DB


def conversations(db: Path) -> list[HermesSessionInfo]:
    """Hermes' sessions newest first, one per conversation: a compression chain is listed once,
    as its newest session (importing any session of a chain imports the whole chain)."""
    sessions = list_sessions(db)
    by_id = {s.id: s for s in sessions}
    continued = {s.continues for s in sessions if s.continues}
    return [replace(s, title=_chain_title(s, by_id)) for s in sessions if s.id not in continued]


def _chain_title(session: HermesSessionInfo, by_id: dict[str, HermesSessionInfo]) -> str | None:
    """A continuation's title is often empty: the nearest earlier session of its chain names it."""
    seen = set()
    while session.title is None and session.continues in by_id and session.id not in seen:
        seen.add(session.id)
        session = by_id[session.continues]
    return session.title


def started(session: HermesSessionInfo) -> str:
    return datetime.fromtimestamp(session.started_at).strftime("%Y-%m-%d %H:%M") if session.started_at else "?"


def size(session: HermesSessionInfo) -> str:
    return "?" if session.active_rows is None else f"{session.active_rows} messages"


def listing_line(session: HermesSessionInfo) -> str:
    return f"{session.id}  {started(session)}  {size(session):>13}  {session.title or '(untitled)'}"


def read_all(db: Path, session_ids: list[str]) -> list[HermesSession]:
    """Every named conversation read before anything is stored (a bad id stores nothing);
    two ids of one compression chain give it once."""
    out: list[HermesSession] = []
    seen: set[str] = set()
    for session_id in session_ids:
        if session_id in seen:
            continue
        session = read_session(db, session_id)
        seen.update(session.chain or (session.session_id,))
        out.append(session)
    return out


def store_session(store: Store, session: HermesSession, config: Config | None = None) -> Imported:
    """``session`` as a new session of ours, in one transaction (the lease given back)."""
    info = store.create_session(
        session.title or f"Hermes {session.session_id}",
        model=(config.model.model or None) if config else None,
        aux_model=(config.auxiliary.compression.model or None) if config else None,
        settings={"imported_from": {"program": "hermes-agent", "session": session.session_id,
                                    "chain": list(session.chain)}},
        messages=session.messages, archived=session.archived,
    )
    store.release_lease(info.id)
    return Imported(session, info)
