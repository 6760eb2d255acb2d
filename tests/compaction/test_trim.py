"""The trim stage: bulky old tool results cut to head + tail + digest, no model (trim.py)."""

from __future__ import annotations

import json
import logging
from pathlib import Path

import pytest
from helpers import (
    ScriptedSummarizer,
    assert_tools_paired,
    assistant,
    failing,
    make_compactor,
    user,
    words,
)
from hypothesis import given, settings
from hypothesis import strategies as st

from hermes_tui.compaction import facts, telemetry
from hermes_tui.compaction.engine import Compactor
from hermes_tui.compaction.policy import Decision
from hermes_tui.compaction.redaction import REDACTED, redact
from hermes_tui.compaction.state import STALE, STORE_FAILED
from hermes_tui.compaction.trim import (
    META_KEY,
    TRIM,
    TRIMMED,
    cut,
    is_trimmed,
    plan_trim,
    trimmed,
)
from hermes_tui.compaction.window import head_end, tail_start
from hermes_tui.core.conversation import Conversation, Replacement, StaleSplice
from hermes_tui.core.tokens import EstimateCounter, count_message, count_messages
from hermes_tui.core.transcript import MICRO, Message
from hermes_tui.store import Store

COUNTER = EstimateCounter()
REPO = Path(__file__).resolve().parents[2]
SOURCE = (REPO / "hermes_tui" / "core" / "transcript.py").read_text(encoding="utf-8")  # real code: brackets, escapes


def bulky(call: Message, content: str) -> Message:
    return Message(role="tool", content=content, tool_call_id=call.call_ids[0], name="bash")


def session(bulky_size: int = 1500, exchanges: int = 8) -> list[Message]:
    """system, user, then exchanges each with one bulky result, a user message in between."""
    messages = [Message(role="system", content="You are a coding agent."), user("Fix the bug in app/models.py")]
    for n in range(exchanges):
        if n == exchanges // 2:
            messages.append(user(words(bulky_size, "u")))  # a bulky *user* message: never trimmed
        call = assistant("Reading the file.", calls=1)
        messages += [call, bulky(call, "\n".join(words(12, f"l{n}x{i}_") for i in range(bulky_size // 12)))]
    messages.append(assistant("Done."))
    return messages


def plan(messages: list[Message], *, protect_first_n: int = 1, tail_budget: int = 2000, threshold: int = 600):
    return plan_trim(messages, COUNTER, protect_first_n=protect_first_n, tail_budget=tail_budget,
                     threshold_tokens=threshold)


def applied(messages: list[Message], result) -> list[Message]:
    conv = Conversation(messages, counter=COUNTER)
    conv.apply(result.replacement)
    return conv.messages


# --- planning ----------------------------------------------------------------------------


def test_only_bulky_tool_results_between_head_and_tail_are_trimmed():
    messages = session()
    head = head_end(messages, 1)
    tail = tail_start(messages, COUNTER, 2000)
    result = plan(messages)
    assert result.kind == TRIM and result.outcome == TRIMMED
    indices = [i for i, _ in result.replacement.removed]
    expected = [i for i in range(head, tail) if messages[i].role == "tool" and count_message(COUNTER, messages[i]) > 600]
    assert indices == expected and indices
    after = applied(messages, result)
    assert len(after) == len(messages)
    for i, (old, new) in enumerate(zip(messages, after, strict=True)):
        if i in indices:
            assert (new.role, new.tool_call_id, new.name) == (old.role, old.tool_call_id, old.name)
            assert new.id != old.id and new.meta[META_KEY]["original"] == old.id
            assert count_message(COUNTER, new) < count_message(COUNTER, old) / 2
        else:
            assert new is old  # user, assistant, system messages, head and tail: the same objects
    assert_tools_paired(after)


def test_a_trimmed_result_is_never_trimmed_again():
    messages = session()
    once = applied(messages, plan(messages))
    assert plan(once) is None
    assert plan(once, threshold=300) is None or all(not is_trimmed(m) for m in
                                                    plan(once, threshold=300).replacement.archived)


def test_nothing_in_the_head_or_tail_and_no_marker_or_user_message():
    messages = session(exchanges=2)
    # A tail budget that covers everything after the head: nothing may be trimmed.
    assert plan(messages, tail_budget=10**6) is None
    # A head that covers everything: nothing either.
    assert plan(messages, protect_first_n=len(messages)) is None


def test_the_digest_says_what_was_cut_and_keeps_error_lines():
    text = "\n".join([*(f"ok line {i}" for i in range(200)), "Traceback (most recent call last):",
                      '  File "app/models.py", line 3', "ValueError: row 7 has no id",
                      *(f"more {i}" for i in range(200))])
    call = assistant("run", calls=1)
    new = trimmed(bulky(call, text), COUNTER)
    assert "[trimmed; full output archived; tokens: " in new.content
    assert not [f for f in facts.extract_facts([new]) if f[0] == facts.NUMBER]  # the digest's counts are no facts
    assert "ValueError: row 7 has no id" in new.content  # in the middle: named by the digest
    assert new.content.startswith("ok line 0\nok line 1\n")
    assert new.content.endswith("more 199")


@pytest.mark.parametrize("text", [
    SOURCE,                                                              # real Python: brackets, escapes
    json.dumps({"k": ["\\n\"quoted\"\t" * 40, {"deep": [[1, 2], {"x": "y\\u00e9"}]}] * 200}),  # one long line
    "\n".join("x" * 3000 for _ in range(5)),                             # long lines only
    SOURCE.replace("\n", "\r\n"),                                       # CRLF
    SOURCE + "\n\n\n",                                                  # trailing newlines
])
def test_real_code_survives_cutting_exactly(text):
    head, middle, tail = cut(text, COUNTER, 150, 70)
    assert head + middle + tail == text  # a prefix and a suffix, byte for byte
    assert head and tail.strip()
    assert COUNTER.count_text(head) <= 150 + 2 and COUNTER.count_text(tail) <= 70 + 2
    if "\n" in text[: len(head) + 1] and len(text.split("\n")[0]) < 400:
        assert head.endswith("\n") or middle == ""  # whole lines when lines are short


def test_a_cut_never_exposes_part_of_a_credential():
    key = "ghp_" + "A1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q7r8"
    password = "hunter2-Very-Secret"
    lines = [f"line {i}" for i in range(300)]
    lines[1] = f"export GITHUB_TOKEN={key}"
    lines[-2] = f"DATABASE_URL=postgres://admin:{password}@db.example.com/app"
    # A long line with a key where a long line's prefix is cut (redaction runs before the cut).
    lines[2] = "x" * 580 + " " + key + " " + "y" * 500
    call = assistant("run", calls=1)
    new = trimmed(bulky(call, "\n".join(lines)), COUNTER)
    for secret in (key, password):
        for start in range(len(secret) - 8):
            assert secret[start:start + 9] not in new.content
    assert REDACTED in new.content
    assert redact(new.content) == new.content


@settings(max_examples=60, deadline=None)
@given(
    sizes=st.lists(st.integers(1, 2500), min_size=1, max_size=12),
    users_at=st.sets(st.integers(0, 11)),
    protect=st.integers(0, 4),
    tail_budget=st.integers(0, 6000),
    threshold=st.integers(300, 1500),
)
def test_property_trim_keeps_every_invariant(sizes, users_at, protect, tail_budget, threshold):
    messages = [Message(role="system", content="sys"), user("go")]
    for n, size in enumerate(sizes):
        if n in users_at:
            messages.append(user(words(size, "u")))
        call = assistant("step", calls=1 + n % 2)
        messages.append(call)
        messages += [bulky_for(cid, size) for cid in call.call_ids]
    head = head_end(messages, protect)
    tail = tail_start(messages, COUNTER, tail_budget)
    result = plan(messages, protect_first_n=protect, tail_budget=tail_budget, threshold=threshold)
    if result is None:
        return
    after = applied(messages, result)
    assert [m.role for m in after] == [m.role for m in messages]
    assert_tools_paired(after)
    for i, (old, new) in enumerate(zip(messages, after, strict=True)):
        if new is not old:
            assert head <= i < tail and old.role == "tool" and not is_trimmed(old)
            assert count_message(COUNTER, old) > threshold
    assert count_messages(COUNTER, after) < count_messages(COUNTER, messages)
    again = plan(after, protect_first_n=protect, tail_budget=tail_budget, threshold=threshold)
    assert again is None or not any(is_trimmed(m) for m in again.replacement.archived)
    # Nothing lost: the active transcript plus the archived originals are every message.
    kept = {m.id for m in after} | {m.id for m in result.replacement.archived}
    assert {m.id for m in messages} <= kept


def bulky_for(call_id: str, size: int) -> Message:
    return Message(role="tool", content="\n".join(words(10, f"r{size}_{i}_") for i in range(max(1, size // 10))),
                   tool_call_id=call_id, name="bash")



# --- the tail under pressure -------------------------------------------------------------


def pressed(reads: int = 3, size: int = 4000, answered: bool = False) -> list[Message]:
    """A small start, then one step whose parallel reads are bigger than the window: the
    shape of a real session (spotter-dov: three file reads of ~14K tokens at a 16K window)."""
    messages = [user("Fix the bug in app/models.py")]
    call = assistant("Reading the files.", calls=reads)
    messages.append(call)
    messages += [bulky_for(cid, size + 100 * n) for n, cid in enumerate(call.call_ids)]
    if answered:
        messages.append(assistant("I read them; app/models.py is the one to change."))
    return messages


def plan_pressed(messages: list[Message], window: int, tail_budget: int = 1000):
    return plan_trim(messages, COUNTER, protect_first_n=1, tail_budget=tail_budget, threshold_tokens=600,
                     window_tokens=window)


def test_a_step_bigger_than_the_window_is_trimmed_in_the_tail_largest_first():
    messages = pressed()
    assert tail_start(messages, COUNTER, 1000) == 1  # the whole step is the tail: no pass can reach it
    window = count_messages(COUNTER, messages) // 2
    result = plan_pressed(messages, window)
    assert result is not None and result.stats["tail_results_trimmed"] == result.stats["results_trimmed"]
    after = applied(messages, result)
    assert count_messages(COUNTER, after) <= window - 1000  # head + tail now leave room for the rest
    # The unanswered results are trimmed largest first, and no more than needed.
    indices = [i for i, _ in result.replacement.removed]
    sizes = sorted((count_message(COUNTER, messages[i]), i) for i in range(2, 5))
    assert sorted(indices) == sorted(i for _, i in sizes[len(sizes) - len(indices):])
    assert len(indices) == 2  # no more than needed
    assert_tools_paired(after)


def test_after_the_final_answer_the_largest_result_goes_first_and_alone_when_enough():
    call = assistant("Reading the files.", calls=3)
    results = [bulky_for(cid, size) for cid, size in zip(call.call_ids, (3000, 800, 800), strict=True)]
    messages = [user("Fix the bug in app/models.py"), call, *results, assistant("app/models.py it is.")]
    tail_budget = count_messages(COUNTER, messages[3:]) + 100  # with group_start, the step is the tail
    assert tail_start(messages, COUNTER, tail_budget) == 1
    total = count_messages(COUNTER, messages)
    saved = count_message(COUNTER, results[0]) - count_message(COUNTER, trimmed(results[0], COUNTER))
    window = total - saved + 10 + tail_budget  # trimming the largest (the oldest) alone reaches the mark
    assert window < total
    result = plan_pressed(messages, window, tail_budget=tail_budget)
    assert [i for i, _ in result.replacement.removed] == [2]


def test_the_tail_is_left_whole_under_the_threshold_or_when_passes_can_bring_it_back():
    messages = pressed()
    total = count_messages(COUNTER, messages)
    assert plan_pressed(messages, total + 1) is None  # under the threshold: nothing to do
    # Over it, but small steps before the big one that the passes can absorb, and a tail that
    # fits beside them: the passes' job, not the trim's.
    lead = [user("Fix the bug in app/models.py")]
    for n in range(30):
        call = assistant(f"step {n}", calls=1)
        lead += [call, Message(role="tool", content=words(120, f"s{n}"), tool_call_id=call.call_ids[0], name="bash")]
    small_tail = pressed(reads=1, size=2000)[1:]
    messages = lead + small_tail
    window = count_messages(COUNTER, messages) - 500
    assert count_messages(COUNTER, small_tail) < window - 1000
    assert plan_pressed(messages, window) is None
    assert plan_pressed(messages, window, tail_budget=10) is None or all(
        i < tail_start(messages, COUNTER, 10) for i, _ in plan_pressed(messages, window, tail_budget=10).replacement.removed)


def test_the_engine_trims_a_giant_step_so_the_window_holds():
    compactor, conv = make_compactor(ScriptedSummarizer(failing()), limit=8000, policy="watermark", target_ratio=0.2)
    for msg in pressed(size=2500):
        conv.append(msg)
    assert conv.total_tokens > compactor.ctx.window.threshold_tokens
    reports = compactor.finalize_turn(conv)
    assert reports[0].kind == TRIM and reports[0].outcome == TRIMMED
    assert conv.total_tokens <= compactor.ctx.window.threshold_tokens
    assert_tools_paired(conv.messages)


@settings(max_examples=60, deadline=None)
@given(
    sizes=st.lists(st.integers(1, 2500), min_size=1, max_size=12),
    protect=st.integers(0, 4),
    tail_budget=st.integers(0, 6000),
    window=st.integers(500, 20_000),
)
def test_property_the_tail_is_trimmed_only_under_pressure(sizes, protect, tail_budget, window):
    messages = [Message(role="system", content="sys"), user("go")]
    for n, size in enumerate(sizes):
        call = assistant("step", calls=1 + n % 3)
        messages.append(call)
        messages += [bulky_for(cid, size) for cid in call.call_ids]
        if n % 2:
            messages.append(assistant("noted"))
    head = head_end(messages, protect)
    tail = tail_start(messages, COUNTER, tail_budget)
    result = plan_trim(messages, COUNTER, protect_first_n=protect, tail_budget=tail_budget, threshold_tokens=600,
                       window_tokens=window)
    if result is None:
        return
    after = applied(messages, result)
    assert_tools_paired(after)
    pinned = count_messages(COUNTER, messages[:head]) + count_messages(COUNTER, messages[tail:])
    outside = sum(count_message(COUNTER, messages[i]) - count_message(COUNTER, after[i])
                  for i in range(head, tail))
    for i, (old, new) in enumerate(zip(messages, after, strict=True)):
        if new is not old:
            assert i >= head and old.role == "tool" and count_message(COUNTER, old) > 600
            if i >= tail:  # only when no pass could have brought the window back
                assert count_messages(COUNTER, messages) - outside > window and pinned > window - tail_budget
    kept = {m.id for m in after} | {m.id for m in result.replacement.archived}
    assert {m.id for m in messages} <= kept

# --- the conversation --------------------------------------------------------------------


def test_a_stale_replacement_is_refused_whole():
    messages = session()
    result = plan(messages)
    conv = Conversation(messages, counter=COUNTER)
    index, _ = result.replacement.removed[-1]
    conv.messages[index] = conv.messages[index].copy()  # the same position, another id
    before = list(conv.messages)
    with pytest.raises(StaleSplice):
        conv.apply(result.replacement)
    assert conv.messages == before


def test_a_replacement_keeps_the_token_total_a_recount():
    messages = session()
    conv = Conversation(messages, counter=COUNTER)
    conv.apply(plan(messages).replacement)
    assert conv.total_tokens == count_messages(COUNTER, conv.messages)
    with pytest.raises(ValueError):
        Replacement(((0, "a"),), ())


# --- the engine and the store ------------------------------------------------------------


def watermark_compactor(summarizer=None) -> tuple[Compactor, Conversation]:
    return make_compactor(summarizer or ScriptedSummarizer(failing()), limit=8000, policy="watermark",
                          target_ratio=0.1)


def test_trim_rides_on_the_policy_and_publishes_store_first(tmp_path):
    compactor, conv = watermark_compactor()
    store = Store(tmp_path / "state.db")
    info = store.create_session("t")
    persist = lambda result: store.archive_and_compact(info.id, result)  # noqa: E731
    messages = session(bulky_size=900, exchanges=6)
    reports = []
    for msg in messages:
        conv.append(msg)
        store.flush(info.id, [msg])
        if msg.role == "tool" or (msg.role == "assistant" and not msg.tool_calls):
            reports += compactor.finalize_turn(conv, persist)
    trims = [r for r in reports if r.kind == TRIM]
    assert trims and all(r.outcome == TRIMMED for r in trims)
    # Resume loads the trimmed versions; the archive keeps the originals, searchable.
    active = store.load_active(info.id)
    assert [m.id for m in active] == [m.id for m in conv.messages]
    originals = {m.id for m in messages if any(is_trimmed(a) and a.meta[META_KEY]["original"] == m.id
                                               for a in conv.messages)}
    assert originals
    rows = {m.id: state for m, state in store.load_all(info.id)}
    assert all(rows[mid] == "archived" for mid in originals)
    assert {m.id for m, _ in store.load_all(info.id)} >= {m.id for m in messages}  # nothing lost
    original = next(m for m in messages if m.id in originals)
    lines = original.content.split("\n")
    middle = lines[len(lines) // 2].split()[0]
    hits = store.search(middle)  # a word only in the middle of an original
    assert hits and {h.message_id for h in hits} == {original.id} and hits[0].state == "archived"
    assert store.get_session(info.id).message_count == len(messages)
    store.close()
    with Store(tmp_path / "state.db") as again:
        resumed = again.load_active(info.id)
    assert [m.content for m in resumed] == [m.content for m in conv.messages]
    assert_tools_paired(resumed)


def test_no_trim_while_no_pass_is_due_and_under_the_threshold():
    """Cache policy: every in-place change breaks the chat model's prefix cache, so a trim
    rides on splices that happen anyway."""
    compactor, conv = make_compactor(ScriptedSummarizer(failing()), limit=20_000, policy="watermark",
                                     target_ratio=0.1)
    messages = session(bulky_size=700, exchanges=3)
    conv.extend(messages)
    assert conv.total_tokens < compactor.policy.high_tokens
    assert compactor.finalize_turn(conv) == []
    assert conv.messages == messages


def test_trim_is_first_in_the_publish_of_a_decision():
    compactor, conv = watermark_compactor(ScriptedSummarizer())
    conv.extend(session(bulky_size=900, exchanges=8))
    decision = Decision(1, MICRO, down_to=1)
    results = compactor.plan_micro_passes(list(conv.messages), decision, epoch=conv.epoch)
    assert results[0].kind == TRIM and results[1].kind == MICRO
    reports = compactor.publish_all(conv, results)
    assert [r.kind for r in reports][:2] == [TRIM, MICRO] and reports[0].outcome == TRIMMED
    assert_tools_paired(conv.messages)


def test_a_stale_or_refused_trim_changes_nothing():
    compactor, conv = watermark_compactor()
    conv.extend(session(bulky_size=900, exchanges=6))
    result = compactor.plan_trim(list(conv.messages), epoch=conv.epoch)
    index, _ = result.replacement.removed[0]
    conv.messages[index] = conv.messages[index].copy()
    before = list(conv.messages)
    assert compactor.publish(conv, result).outcome == STALE
    assert conv.messages == before

    result = compactor.plan_trim(list(conv.messages), epoch=conv.epoch)

    def refuse(_):
        raise OSError("disk full")

    assert compactor.publish(conv, result, refuse).outcome == STORE_FAILED
    assert conv.messages == before


def test_the_trim_telemetry_line_is_counts_only(caplog):
    compactor, conv = watermark_compactor()
    conv.extend(session(bulky_size=900, exchanges=6))
    with caplog.at_level(logging.INFO, logger="hermes_tui.compaction"):
        [report] = compactor.trim(conv)
    lines = [r.getMessage() for r in caplog.records if r.getMessage().startswith(telemetry.TRIM_PREFIX)]
    assert len(lines) == 1
    payload = json.loads(lines[0][len(telemetry.TRIM_PREFIX):])
    assert list(payload) == list(telemetry.TRIM_FIELDS)
    assert payload["event"] == "trim_compaction" and payload["outcome"] == TRIMMED
    assert payload["results_trimmed"] >= 1
    assert payload["tokens_after"] < payload["tokens_before"]
    assert all(not isinstance(v, str) or len(v) < 40 for v in payload.values())  # no content


def test_what_a_trim_saves_counts_in_the_sessions_tokens_saved():
    """/usage and the markers' running total count the trim's savings as a pass's."""
    compactor, conv = watermark_compactor()
    conv.extend(session(bulky_size=900, exchanges=6))
    before = conv.total_tokens
    [report] = compactor.trim(conv)
    assert compactor.state.tokens_saved_total == before - conv.total_tokens > 0
    assert report.fields["tokens_saved_total"] == compactor.state.tokens_saved_total
    assert compactor.state.passes_total == 0  # a trim is not a pass


def test_trim_off_means_no_trim():
    compactor, conv = make_compactor(ScriptedSummarizer(failing()), limit=8000, policy="watermark")
    compactor.settings.trim = False
    conv.extend(session(bulky_size=900, exchanges=8))
    assert compactor.plan_trim(list(conv.messages)) is None
    assert all(r.kind != TRIM for r in compactor.finalize_turn(conv))


def test_export_all_holds_each_original_once_in_place_of_its_trimmed_version(tmp_path):
    from hermes_tui.store.export import session_messages

    compactor, conv = watermark_compactor()
    messages = session(bulky_size=900, exchanges=6)
    with Store(tmp_path / "state.db") as store:
        info = store.create_session("t")
        conv.extend(messages)
        store.flush(info.id, conv.messages)
        [report] = compactor.trim(conv, lambda result: store.archive_and_compact(info.id, result))
        assert report.outcome == TRIMMED
        everything = session_messages(store, info.id, include_archived=True)
        active = session_messages(store, info.id, include_archived=False)
    assert [m.id for m in everything] == [m.id for m in messages]
    assert_tools_paired(everything)
    assert any(is_trimmed(m) for m in active)
