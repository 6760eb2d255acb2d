"""The session store: SQLite on the user's disk (``$HERMES_TUI_HOME/state.db``)."""

from hermes_tui.store.db import StoreError
from hermes_tui.store.lease import SessionBusy
from hermes_tui.store.store import SearchHit, SessionInfo, Store

__all__ = ["SearchHit", "SessionBusy", "SessionInfo", "Store", "StoreError"]
