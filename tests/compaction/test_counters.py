"""The session-wide counters: ``tokens_saved_total`` and ``passes_total``, over several
passes and across a resume from a real SQLite store.

What the passes truly saved is the transcript recounted before and after (each message
counted anew, ignoring cached counts), so a counter that forgets the marker's own cost,
or loses its value on a resume, is caught.
"""

from __future__ import annotations

from dataclasses import replace

from helpers import ScriptedSummarizer, agent_session, exchange, make_compactor, user

from hermes_tui.conversation import Conversation
from hermes_tui.store import Store
from hermes_tui.tokens import count_message


def recount(counter, messages) -> int:
    return sum(count_message(counter, replace(m, token_count=None, token_counter=None)) for m in messages)


def growing(request) -> str:
    """A summary that grows by one line a pass, so the marker's cost changes every pass."""
    line = f"- step {len(request.summary.splitlines()) + 1}: read a file and ran the tests."
    return f"{request.summary}\n{line}" if request.summary else line


class StoredSession:
    """A compactor whose passes persist to a real store, flushed before each pass as the session loop does."""

    def __init__(self, store: Store, session_id: str, messages=()):
        self.store, self.id = store, session_id
        self.compactor, self.conv = make_compactor(ScriptedSummarizer(growing), target_ratio=0.05)
        self.conv.extend(messages)

    def micro(self):
        self.store.flush(self.id, self.conv.messages)
        return self.compactor.micro_pass(self.conv, lambda result: self.store.archive_and_compact(self.id, result))


def test_counters_equal_what_the_passes_saved_over_five_passes_and_after_a_resume(tmp_path):
    path = tmp_path / "state.db"
    original = agent_session(exchanges=14, size=120)
    with Store(path) as store:
        session = StoredSession(store, store.create_session("counters").id, original)
        counter = session.conv.counter
        first_total = recount(counter, session.conv.messages)
        reports = [session.micro() for _ in range(5)]
        assert [r.outcome for r in reports] == ["absorbed"] * 5
        saved = first_total - recount(counter, session.conv.messages)
        assert saved > 0
        deltas = [r.fields["tokens_delta"] for r in reports]
        assert session.compactor.state.tokens_saved_total == saved == -sum(deltas)
        assert reports[-1].fields["tokens_saved_total"] == saved
        assert [r.fields["passes_total"] for r in reports] == [1, 2, 3, 4, 5]
        session_id = session.id

    # A new process: the transcript comes back from the store, the counters from the marker.
    with Store(path) as store:
        store.acquire_lease(session_id)  # as every writer that resumes a session does
        loaded = store.load_active(session_id)
        assert [m.id for m in loaded] == [m.id for m in session.conv.messages]
        resumed = StoredSession(store, session_id, loaded)
        resumed.conv.extend([user("carry on"), *exchange(120), *exchange(120)])
        before_more = recount(counter, resumed.conv.messages)
        more = [resumed.micro() for _ in range(3)]
        assert [r.outcome for r in more] == ["absorbed"] * 3
        saved_after = before_more - recount(counter, resumed.conv.messages)
        assert resumed.compactor.state.tokens_saved_total == saved + saved_after
        assert saved + saved_after == -sum(deltas + [r.fields["tokens_delta"] for r in more])
        assert more[-1].fields["tokens_saved_total"] == saved + saved_after
        assert [r.fields["passes_total"] for r in more] == [6, 7, 8]


def test_passes_that_absorb_nothing_count_as_passes_and_save_nothing():
    compactor, conv = make_compactor(target_ratio=0.9)
    conv.extend(agent_session(exchanges=2, size=30))
    reports = [compactor.micro_pass(conv) for _ in range(3)]
    assert [r.outcome for r in reports] == ["nothing_to_absorb"] * 3
    assert [r.fields["passes_total"] for r in reports] == [1, 2, 3]
    assert [r.fields["tokens_saved_total"] for r in reports] == [0, 0, 0]
    assert all(r.fields["tokens_delta"] == 0 for r in reports)


def test_a_resumed_compactor_reports_the_counters_before_its_first_pass(tmp_path):
    compactor, conv = make_compactor(ScriptedSummarizer(growing))
    conv.extend(agent_session(exchanges=8, size=100))
    total = recount(conv.counter, conv.messages)
    for _ in range(2):
        compactor.micro_pass(conv)
    saved = total - recount(conv.counter, conv.messages)
    with Store(tmp_path / "state.db") as store:
        sid = store.create_session("s").id
        store.flush(sid, conv.messages)
        loaded = store.load_active(sid)
    fresh, _ = make_compactor(ScriptedSummarizer(growing), target_ratio=0.9)  # nothing outside the tail
    report = fresh.micro_pass(Conversation(loaded, counter=conv.counter))
    assert report.outcome == "nothing_to_absorb"
    assert (report.fields["tokens_saved_total"], report.fields["passes_total"]) == (saved, 3)
