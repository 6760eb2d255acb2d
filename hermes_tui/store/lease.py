"""One writer per session: who holds a session's lease, and whether that holder still lives.

A lease is a row in ``session_leases`` naming the process that writes the session
(pid, host, boot, the process's start time) and a random token. The store takes it
in a ``BEGIN IMMEDIATE`` transaction and checks the token inside every write
transaction of the session, so two processes never append to one session and a
writer whose lease was taken over cannot write at all.

A lease left behind by a killed process is taken over: on this host the holder is
gone when its pid is not running, or runs a different process (a reused pid has
another start time), or the machine has rebooted since. A holder on another host
cannot be asked, so its lease lapses when its heartbeat (refreshed by its writes)
is older than ``OTHER_HOST_STALE_S``.
"""

from __future__ import annotations

import os
import secrets
import socket
import subprocess
import sys
import time
from dataclasses import dataclass
from datetime import datetime
from functools import lru_cache

from hermes_tui.store.db import StoreError
from hermes_tui.store.guard import GuardedConnection

HEARTBEAT_EVERY_S = 60.0          # a write refreshes the heartbeat at most this often
OTHER_HOST_STALE_S = 30 * 60.0    # generous: only a lease from another machine ever lapses by time


@dataclass(frozen=True)
class Holder:
    """What a lease row says about the process that holds it."""

    pid: int
    host: str
    boot_id: str
    started: str
    acquired: float
    heartbeat: float

    def describe(self) -> str:
        where = "" if self.host == this_host() else f" on {self.host}"
        since = datetime.fromtimestamp(self.acquired).strftime("%H:%M:%S")
        return f"pid {self.pid}{where}, since {since}"


class SessionBusy(StoreError):
    """Another hermes-tui holds the session (``holder``; None: it took the lease over or
    deleted the session since this process held it). Nothing was written."""

    kind = "busy"

    def __init__(self, session_id: str, holder: Holder | None, advice: str):
        self.session_id, self.holder, self.advice = session_id, holder, advice
        super().__init__(f"{self.problem}: {advice}")

    @property
    def problem(self) -> str:
        if self.holder is None:
            return f"session {self.session_id} was deleted or taken over by another hermes-tui"
        return f"session {self.session_id} is open in another hermes-tui ({self.holder.describe()})"


def new_token() -> str:
    return secrets.token_hex(16)


# --- this process and others --------------------------------------------------------------


def this_host() -> str:
    return socket.gethostname()


@lru_cache(maxsize=1)
def boot_id() -> str:
    """An id of this boot of the machine ('' when unknown): a reboot ends every lease of this host."""
    try:
        with open("/proc/sys/kernel/random/boot_id", encoding="ascii") as f:
            return f.read().strip()
    except OSError:
        pass
    if sys.platform == "darwin":
        return _command_output(["sysctl", "-n", "kern.boottime"])
    return ""


def process_started(pid: int) -> str | None:
    """When process ``pid`` started, as an opaque string; None when no such process is running.

    '' when it runs but its start time cannot be read. Linux: the start time in clock
    ticks from /proc (a zombie counts as gone); without /proc: ``ps``'s start time.
    """
    if os.path.isdir("/proc/self"):
        try:
            with open(f"/proc/{pid}/stat", encoding="ascii", errors="replace") as f:
                fields = f.read().rsplit(")", 1)[1].split()  # the name in parentheses may hold spaces
            return None if fields[0] in ("Z", "X") else fields[19]  # state, starttime (fields 3 and 22)
        except FileNotFoundError:
            return None
        except (OSError, IndexError):
            pass
    if not _pid_running(pid):
        return None
    return _command_output(["ps", "-o", "lstart=", "-p", str(pid)])  # macOS, the BSDs


def _pid_running(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # someone else's process: it exists
    return True


def _command_output(command: list[str]) -> str:
    try:
        return subprocess.run(command, capture_output=True, text=True, timeout=5).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return ""


@lru_cache(maxsize=4)
def _own_start(pid: int) -> str:
    return process_started(pid) or ""


def me() -> Holder:
    now = time.time()
    return Holder(os.getpid(), this_host(), boot_id(), _own_start(os.getpid()), now, now)


def is_alive(holder: Holder, now: float | None = None) -> bool:
    """Whether the process that took this lease may still be writing."""
    if holder.host != this_host():
        return (now if now is not None else time.time()) - holder.heartbeat < OTHER_HOST_STALE_S
    if holder.boot_id and boot_id() and holder.boot_id != boot_id():
        return False
    started = process_started(holder.pid)
    if started is None:
        return False
    return not (holder.started and started and started != holder.started)


# --- the rows (inside the caller's transaction) -------------------------------------------


def read(conn: GuardedConnection, session_id: str) -> tuple[str, Holder] | None:
    row = conn.execute(
        "SELECT token, pid, host, boot_id, started, acquired, heartbeat FROM session_leases WHERE session_id = ?",
        (session_id,),
    ).fetchone()
    return None if row is None else (row[0], Holder(*row[1:]))


def write(conn: GuardedConnection, session_id: str, token: str) -> None:
    """Take the lease for this process (replacing a stale one)."""
    holder = me()
    conn.execute(
        """INSERT OR REPLACE INTO session_leases (session_id, token, pid, host, boot_id, started, acquired, heartbeat)
           VALUES (?,?,?,?,?,?,?,?)""",
        (session_id, token, holder.pid, holder.host, holder.boot_id, holder.started, holder.acquired,
         holder.heartbeat),
    )


def refresh(conn: GuardedConnection, session_id: str, token: str, heartbeat: float) -> None:
    """Refresh the heartbeat when it is old: one UPDATE every ``HEARTBEAT_EVERY_S`` at most."""
    now = time.time()
    if now - heartbeat >= HEARTBEAT_EVERY_S:
        conn.execute("UPDATE session_leases SET heartbeat = ? WHERE session_id = ? AND token = ?",
                     (now, session_id, token))


def delete(conn: GuardedConnection, session_id: str, token: str | None = None) -> None:
    if token is None:
        conn.execute("DELETE FROM session_leases WHERE session_id = ?", (session_id,))
    else:
        conn.execute("DELETE FROM session_leases WHERE session_id = ? AND token = ?", (session_id, token))
