"""The session-wide counters: ``tokens_saved_total`` and ``passes_total``, over several
passes and across a resume from a real SQLite store.

What the passes truly saved is the transcript recounted before and after (each message
counted anew, ignoring cached counts), so a counter that forgets the marker's own cost,
or loses its value on a resume, is caught.
"""

from __future__ import annotations

from dataclasses import replace

from helpers import (
    ScriptedSummarizer,
    agent_session,
    assistant,
    exchange,
    failing,
    make_compactor,
    user,
)

from hermes_tui.compaction.state import SKIPPED_FLAG
from hermes_tui.core.conversation import Conversation
from hermes_tui.core.tokens import count_message
from hermes_tui.store import Store


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


def test_passes_that_find_nothing_to_absorb_are_not_counted():
    # Hermes counts a pass only when it found an exchange to work on.
    compactor, conv = make_compactor(target_ratio=0.9)
    conv.extend(agent_session(exchanges=2, size=30))
    reports = [compactor.micro_pass(conv) for _ in range(3)]
    assert [r.outcome for r in reports] == ["nothing_to_absorb"] * 3
    assert [r.fields["passes_total"] for r in reports] == [0, 0, 0]
    assert [r.fields["tokens_saved_total"] for r in reports] == [0, 0, 0]
    assert all(r.fields["tokens_delta"] == 0 for r in reports)


def test_a_pass_that_fails_on_an_exchange_counts():
    compactor, conv = make_compactor(ScriptedSummarizer(failing()))
    conv.extend(agent_session(exchanges=6, size=120))
    failed = compactor.micro_pass(conv)
    assert failed.outcome == "summarize_failed" and failed.fields["passes_total"] == 1


def exchange_of(tokens_wanted: int, counter) -> list:
    """A plain exchange (call and result) of about ``tokens_wanted`` tokens."""
    for size in range(1, 200):
        messages = exchange(size, text="ok")
        if sum(count_message(counter, m) for m in messages) >= tokens_wanted:
            return messages
    raise AssertionError("no exchange that small")


def test_a_first_pass_never_absorbs_an_exchange_smaller_than_the_marker_it_would_add(caplog):
    # A 20-token exchange folded into a 12-token summary: with the marker's scaffolding the
    # context would grow, so it is left as it is, at once and for good (flagged: a new
    # process steps over it too; counting to three failures never ended where each
    # `hermes-tui run` is a process of its own), and the next pass takes the next exchange.
    caplog.set_level("INFO", logger="hermes_tui.compaction")
    compactor, conv = make_compactor(ScriptedSummarizer(lambda request: "- the assistant listed a folder."))
    counter = conv.counter
    small = exchange_of(20, counter)
    conv.extend([user("start"), user("list it"), *small, user("and now?"), *exchange(400), assistant("Done.")])
    exchange_tokens = sum(count_message(counter, m) for m in small)
    assert 20 <= exchange_tokens < 40
    before = recount(counter, conv.messages)
    report = compactor.micro_pass(conv)
    assert report.fields["cursor"] == 2 and report.fields["exchange_tokens"] == exchange_tokens
    assert report.outcome == "exchange_skipped" and report.fields["failure"] == "grown"
    assert recount(counter, conv.messages) == before and report.fields["tokens_delta"] == 0
    assert compactor.state.tokens_saved_total == 0 and not any(m.is_marker for m in conv.messages)
    assert all(m.meta.get(SKIPPED_FLAG) for m in small)
    assert "skipping exchange at cursor 2 at once: its own notes are larger than it" in caplog.text
    assert compactor.ctx.summarizer.requests == []  # nothing written about it could cost less: no one asked
    fresh, _ = make_compactor(ScriptedSummarizer(lambda request: "- the assistant listed a folder."))
    nxt = fresh.micro_pass(conv)  # a new process
    assert nxt.outcome == "absorbed" and nxt.fields["cursor"] > 2


def test_a_first_pass_whose_marker_pays_for_itself_absorbs_and_saves():
    compactor, conv = make_compactor(ScriptedSummarizer(lambda request: "- the assistant listed a folder."))
    counter = conv.counter
    conv.extend([user("start"), user("list it"), *exchange(200), user("and now?"), *exchange(400), assistant("Done.")])
    before = recount(counter, conv.messages)
    report = compactor.micro_pass(conv)
    assert report.outcome == "absorbed" and report.fields["tokens_delta"] < 0
    assert recount(counter, conv.messages) < before


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
    assert (report.fields["tokens_saved_total"], report.fields["passes_total"]) == (saved, 2)  # this one found nothing
