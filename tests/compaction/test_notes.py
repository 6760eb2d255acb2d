"""Deterministic notes (compaction.notes): what an exchange leaves behind without a model.

They are the extractive summarizer and every pass's fallback, so what they drop is lost to the
summary. A decision and its reason, or a question left open, usually comes after the first
sentence of the assistant's message, where the notes used to stop.
"""

from __future__ import annotations

from hermes_tui.compaction.notes import exchange_notes
from hermes_tui.core.transcript import Message


def said(text: str) -> list[str]:
    return exchange_notes([Message(role="assistant", content=text)])


def test_a_reason_and_an_open_question_after_the_first_sentence_are_kept_word_for_word():
    notes = said(
        "Let me look at the merge method. It is in django/forms/widgets.py and has 40 lines. "
        "Decision: use a topological sort rather than the pairwise merge, because the pairwise merge "
        "warns on valid orders. Open question: should the merge also handle duplicate files?"
    )
    assert notes == [
        "- Let me look at the merge method.",
        "- Decision: use a topological sort rather than the pairwise merge, because the pairwise merge warns "
        "on valid orders.",
        "- Open question: should the merge also handle duplicate files?",
        "- files: django/forms/widgets.py",
    ]


def test_sentences_that_only_narrate_are_left_out_and_at_most_two_reasons_are_kept():
    assert said("Reading the file. It has 40 lines. Then I ran the tests.") == ["- Reading the file."]
    many = " ".join(f"I kept step {n} because it works." for n in range(5))
    assert said("Done. " + many) == ["- Done.", "- I kept step 0 because it works.", "- I kept step 1 because it works."]


def test_a_first_sentence_that_is_the_question_is_not_repeated():
    assert said("Why does test_flush time out? Let me check.") == ["- Why does test_flush time out?"]
