"""Reply pieces from the turn's thread reach the screen in runs: one message per run, in order."""

from __future__ import annotations

import threading

from hermes_tui.core.transcript import Message
from hermes_tui.tui.screens.agent_bridge import ReplyDelta, ScreenListener, StepReplied, StepStarted


def test_pieces_in_a_row_share_one_message_taken_when_handled():
    posted: list = []
    listener = ScreenListener(posted.append)
    for piece in ("Hel", "lo", " there"):
        listener.text(piece)
    assert len(posted) == 1 and isinstance(posted[0], ReplyDelta)
    assert posted[0].take() == "Hello there"
    listener.text("!")  # after the screen took the text: a new message
    assert len(posted) == 2 and posted[1].take() == "!"


def test_text_never_goes_ahead_of_a_message_posted_after_it():
    posted: list = []
    listener = ScreenListener(posted.append)
    listener.step_started(1)
    listener.text("first step")
    listener.reply(Message(role="assistant", content="first step"))
    listener.step_started(2)
    listener.text("second ")
    listener.text("step")
    # The screen has handled nothing yet: the first step's message holds only its own text.
    kinds = [type(m) for m in posted]
    assert kinds == [StepStarted, ReplyDelta, StepReplied, StepStarted, ReplyDelta]
    assert posted[1].take() == "first step"
    assert posted[4].take() == "second step"


def test_pieces_from_a_thread_while_the_screen_takes_them_are_all_shown_once():
    posted: list = []
    listener = ScreenListener(posted.append)
    pieces = [f"{i} " for i in range(20_000)]
    writer = threading.Thread(target=lambda: [listener.text(p) for p in pieces])
    writer.start()
    shown = []
    taken = 0
    while writer.is_alive() or taken < len(posted):
        while taken < len(posted):
            shown.append(posted[taken].take())
            taken += 1
    writer.join()
    assert "".join(shown) == "".join(pieces)
