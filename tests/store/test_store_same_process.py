"""A second Store on the same file in one process must not disturb the first.

SQLite's locks are POSIX advisory locks, which a process loses on *every* descriptor of
the file the moment any one of them is closed. Opening the database file outside SQLite
(to read its header) while a connection of this process holds it would silently drop
that connection's locks: another process then believes it is the last one, checkpoints
and deletes the write-ahead log under it, and what this process writes next is lost.
"""

from __future__ import annotations

import os
import subprocess
import sys

from hermes_tui.core.transcript import Message
from hermes_tui.store import Store

READ_BACK = """
import sys
from hermes_tui.store import Store
with Store(sys.argv[1]) as store:
    print(len(store.load_active(sys.argv[2])))
"""


def count_in_another_process(db, session_id: str) -> int:
    result = subprocess.run([sys.executable, "-c", READ_BACK, str(db), session_id],
                            capture_output=True, text=True, timeout=120, env=os.environ.copy())
    assert result.returncode == 0, result.stderr
    return int(result.stdout)


def test_a_second_store_in_the_same_process_keeps_the_first_ones_writes(tmp_path):
    db = tmp_path / "state.db"
    with Store(db) as writer:
        sid = writer.create_session("one writer").id
        writer.flush(sid, [Message("user", "first")])
        with Store(db) as reader:  # e.g. the sessions screen or an export opening its own
            assert len(reader.load_active(sid)) == 1
        assert count_in_another_process(db, sid) == 1  # another process opens and closes it
        writer.flush(sid, [Message("user", "second"), Message("user", "third")])
        assert (tmp_path / "state.db-wal").exists()
        assert count_in_another_process(db, sid) == 3
    assert count_in_another_process(db, sid) == 3
