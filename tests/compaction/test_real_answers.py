"""Passes given the answers real small models gave (tests/compaction/fixtures/real_answers.json).

Each answer was recorded from Qwen2.5-Coder 0.5B or 1.5B under llama-server, on the exchange
stored beside it. A scripted summarizer replays it, so what the engine does with each way a
small model misreads a pass is pinned without a model: a copy of the exchange, "NOTHING NEW"
for an exchange with facts, a reply that loops until the token limit, an invented dialogue
and a refusal are never absorbed as a summary; the exchange still leaves the context, with
at least its deterministic notes kept.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from helpers import ScriptedSummarizer, make_compactor

from hermes_tui.compaction import facts
from hermes_tui.compaction.checks import INSTRUCTIONS, clean_summary, summary_problem
from hermes_tui.compaction.notes import exchange_notes
from hermes_tui.core.transcript import Message

ANSWERS = json.loads((Path(__file__).parent / "fixtures" / "real_answers.json").read_text(encoding="utf-8"))


def recorded(name: str) -> dict:
    return ANSWERS[name]


def session_with(exchange: list[dict], *, before: int = 0) -> list[Message]:
    """A system prompt and a user message, ``before`` filler steps, the recorded exchange, and a
    last reply that fills the tail."""
    messages = [Message(role="system", content="You are a coding agent."),
                Message(role="user", content="Fix the media ordering warning in django/forms/widgets.py.")]
    for n in range(before):
        call = {"id": f"f{n}", "type": "function", "function": {"name": "bash", "arguments": '{"command": "ls"}'}}
        messages += [Message(role="assistant", content="", tool_calls=[call]),
                     Message(role="tool", content=f"file_{n}.py\n" + "src/module.py\n" * 40, tool_call_id=f"f{n}",
                             name="bash")]
    messages += [Message.from_openai(m) for m in exchange]
    messages.append(Message(role="assistant", content="Next I will run the tests. " + "The suite is long. " * 60))
    return messages


class Replaying(ScriptedSummarizer):
    """The recorded reply first, then what ``then`` says (the strict second try)."""

    def __init__(self, reply: str, finish: str, then: str | None = None):
        self.replies = [(reply, finish), ((then if then is not None else reply), finish)]
        super().__init__(lambda request: "")

    def summarize(self, request, *, max_tokens):
        self.requests.append(request)
        text, finish = self.replies[min(len(self.requests), len(self.replies)) - 1]
        from hermes_tui.compaction.summarizer import Completion

        return Completion(text, finish, 300, 100, 0.01)


def appending(summarizer, **kw):
    compactor, conv = make_compactor(summarizer, protect_first_n=1, target_ratio=0.01, mode="append", fact_guard=True,
                                     **kw)
    return compactor, conv


def absorb_recorded(name: str, then: str | None = None):
    answer = recorded(name)
    summarizer = Replaying(answer["reply"], answer["finish_reason"], then)
    compactor, conv = appending(summarizer)
    conv.extend(session_with(answer["exchange"]))
    report = compactor.micro_pass(conv)
    return answer, summarizer, compactor, conv, report


def notes_of(answer: dict) -> list[str]:
    return exchange_notes([Message.from_openai(m) for m in answer["exchange"]])


@pytest.mark.parametrize("name", ["echo", "nothing_new_with_facts", "invented_exchange"])
def test_a_misread_answer_is_asked_again_strictly_then_the_notes_take_its_place(name):
    answer, summarizer, compactor, conv, report = absorb_recorded(name)
    assert report.outcome == "absorbed"
    assert [r.strict for r in summarizer.requests] == [False, True]  # the retry changed the prompt
    body = facts.body_of(compactor.rolling_summary, compactor.state.facts)
    assert clean_summary(answer["reply"]).strip() not in body
    assert body.splitlines() == [line for line in notes_of(answer) if line.strip()]
    assert report.fields["written_by"] == "notes" if "written_by" in report.fields else True


def test_a_misread_answer_then_notes_from_the_strict_try_are_the_summary():
    answer, summarizer, compactor, conv, report = absorb_recorded("echo", then=recorded("notes")["reply"])
    assert report.outcome == "absorbed"
    body = facts.body_of(compactor.rolling_summary, compactor.state.facts)
    assert body == recorded("notes")["reply"].strip()


def test_notes_that_loop_until_the_token_limit_keep_their_whole_lines_once():
    answer, summarizer, compactor, conv, report = absorb_recorded("cut_off_loop")
    assert report.outcome == "absorbed" and len(summarizer.requests) == 1
    body = facts.body_of(compactor.rolling_summary, compactor.state.facts)
    assert body.splitlines() == ["- The assistant installed pytz.", "- The assistant set up Django properly."]


def test_the_notes_real_models_write_are_absorbed_as_they_are():
    answer, summarizer, compactor, conv, report = absorb_recorded("notes")
    assert report.outcome == "absorbed" and len(summarizer.requests) == 1
    assert facts.body_of(compactor.rolling_summary, compactor.state.facts) == answer["reply"].strip()


def test_a_refusal_is_never_the_summary():
    refusal = recorded("refusal")["reply"]
    answer = recorded("notes")
    summarizer = Replaying(refusal, "stop")
    compactor, conv = appending(summarizer)
    conv.extend(session_with(answer["exchange"]))
    report = compactor.micro_pass(conv)
    assert report.outcome == "absorbed"
    assert "sorry" not in compactor.rolling_summary.lower()
    assert [r.strict for r in summarizer.requests] == [False, True]


def test_a_refused_merge_is_never_the_summary():
    summarizer = Replaying(recorded("refusal")["reply"], "stop")
    compactor, conv = make_compactor(summarizer, protect_first_n=1, target_ratio=0.01)
    conv.extend(session_with(recorded("notes")["exchange"]))
    compactor.micro_pass(conv)
    assert "sorry" not in compactor.rolling_summary.lower()


def test_the_first_pass_absorbs_instead_of_a_defrag_of_an_empty_summary():
    """Window pressure with no summary yet: the 0.5B answered that defrag with an empty pair of
    tags after 159 s. The first pass is an ordinary absorb."""
    answer = recorded("empty_defrag")
    summarizer = Replaying(answer["reply"], answer["finish_reason"], then=recorded("notes")["reply"])
    compactor, conv = appending(summarizer, limit=1_600)
    conv.extend(session_with(recorded("notes")["exchange"], before=12))
    assert conv.total_tokens > compactor.ctx.pressure_share * compactor.ctx.window.threshold_tokens
    report = compactor.micro_pass(conv)
    assert report.outcome == "absorbed"
    assert not any(r.kind == "defrag" for r in summarizer.requests)


def test_an_empty_defrag_is_rejected():
    """The same scrap as the answer to a defrag of a real summary."""
    from hermes_tui.compaction.checks import TOO_SHORT, defrag_problem

    text = clean_summary(recorded("empty_defrag")["reply"])
    assert defrag_problem(text, finish_reason="stop", new_tokens=2, input_tokens=5_891) is not None
    assert defrag_problem("- Ran the tests: two failures in test_media.", finish_reason="stop", new_tokens=13,
                          input_tokens=5_891) == TOO_SHORT


def test_a_third_person_summary_behind_a_speaker_label_is_a_summary():
    """The instruction check's one false alarm on real answers: the 0.5B put "Assistant:"
    in front of notes written in the third person."""
    for reply in recorded("speaker_label")["third_person"]:
        text = clean_summary(reply)
        assert text == reply.removeprefix("Assistant:").strip()
        assert summary_problem(text, finish_reason="stop", new_tokens=10, replaced_tokens=1000) is None


def test_a_first_person_turn_behind_a_speaker_label_stays_rejected():
    """The same label on a turn of the dialogue ("I made a mistake ... I will correct this")
    is not notes: the label stays and the reply is rejected."""
    for reply in recorded("speaker_label")["first_person"]:
        text = clean_summary(reply)
        assert text == reply.strip()
        assert summary_problem(text, finish_reason="stop", new_tokens=10, replaced_tokens=1000) == INSTRUCTIONS
