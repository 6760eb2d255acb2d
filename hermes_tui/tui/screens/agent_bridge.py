"""Between an agent turn's thread and the chat screen: what the turn reports, how it asks.

The turn (``session.agent.AgentTurn``) runs in a thread worker. Its listener hooks are
called from that thread, so ``ScreenListener`` turns each into a message posted to the
screen (``post_message`` is thread-safe, and the screen handles them in order, handing
them to its turn controller, ``chat_turns``). The ``ask`` callback (``ModalAsk``) shows the
approval prompt on the event loop and blocks only the turn's thread until the user answers.
``ScreenPasses`` hands the passes the loop asks for to the screen's pass runner
(``chat_compaction``: one at a time, shown in the status bar).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from textual.message import Message as UIMessage

from hermes_tui.compaction.engine import PassReport
from hermes_tui.core.transcript import MICRO, Message
from hermes_tui.session.agent import AgentListener, AgentResult, Answer
from hermes_tui.session.fit import RequestSize
from hermes_tui.tools.approval import ApprovalRequest
from hermes_tui.tools.base import ToolResult
from hermes_tui.tui.screens.chat_fit import GuardCompacted, GuardCompacting

if TYPE_CHECKING:
    from textual.app import App

POLL_S = 0.05

# --- what the threads report ------------------------------------------------------------


class UserStored(UIMessage):
    def __init__(self, message: Message):
        super().__init__()
        self.message = message


class SystemPromptSet(UIMessage):
    """The turn's system prompt is new or changed: the transcript shows it first."""

    def __init__(self, message: Message):
        super().__init__()
        self.message = message


class StepStarted(UIMessage):
    def __init__(self, step: int):
        super().__init__()
        self.step = step


class PendingText:
    """Reply text the turn's thread has written and the screen has not taken yet.

    Pieces arrive a few ms apart; a message per piece makes the event loop dispatch each one,
    and on a busy machine keys wait behind them. A message is posted for the first piece
    only: the pieces that follow before the screen handles it go with it."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._pieces: list[str] = []

    def add(self, piece: str) -> bool:
        """Keep ``piece``; True when no message is on its way for the text kept."""
        with self._lock:
            self._pieces.append(piece)
            return len(self._pieces) == 1

    def take(self) -> str:
        with self._lock:
            text = "".join(self._pieces)
            self._pieces.clear()
        return text


class ReplyDelta(UIMessage):
    """Text of the reply being written: ``text``, then what ``pending`` holds when taken."""

    def __init__(self, text: str = "", pending: PendingText | None = None):
        super().__init__()
        self.text = text
        self.pending = pending

    def take(self) -> str:
        return self.text + (self.pending.take() if self.pending is not None else "")


class CallDelta(UIMessage):
    def __init__(self, index: int, name: str | None, arguments: str):
        super().__init__()
        self.index, self.name, self.arguments = index, name, arguments


class StepReplied(UIMessage):
    """An assistant message, stored; its calls are about to run."""

    def __init__(self, message: Message):
        super().__init__()
        self.message = message


class CallStarted(UIMessage):
    def __init__(self, call_id: str):
        super().__init__()
        self.call_id = call_id


class CallFinished(UIMessage):
    def __init__(self, call_id: str, result: ToolResult, message: Message):
        super().__init__()
        self.call_id, self.result, self.message = call_id, result, message


class TurnEnded(UIMessage):
    def __init__(self, result: AgentResult, *, tools_available: bool):
        super().__init__()
        self.result, self.tools_available = result, tools_available


class TurnFailed(UIMessage):
    def __init__(self, error: BaseException):
        super().__init__()
        self.error = error


class PassRequested(UIMessage):
    def __init__(self, kind: str, passes: ScreenPasses):
        super().__init__()
        self.kind, self.passes = kind, passes


# --- the bridge -------------------------------------------------------------------------


class ScreenListener(AgentListener):
    """The turn's hooks (its thread) as messages to the screen (its event loop).

    Text pieces in a row share one ``ReplyDelta`` (see ``PendingText``); any other message
    starts a new run, so text never goes ahead of what was posted after it."""

    def __init__(self, post: Callable[[UIMessage], Any]) -> None:
        self._post = post
        self._text = PendingText()

    def post(self, message: UIMessage) -> None:
        self._text = PendingText()  # the text after this message waits for a ReplyDelta of its own
        self._post(message)

    def system_prompt(self, message: Message) -> None:
        self.post(SystemPromptSet(message))

    def step_started(self, step: int) -> None:
        self.post(StepStarted(step))

    def text(self, piece: str) -> None:
        if self._text.add(piece):
            self._post(ReplyDelta(pending=self._text))

    def tool_delta(self, event: Any) -> None:
        self.post(CallDelta(event.index, event.name, event.arguments or ""))

    def reply(self, message: Message) -> None:
        self.post(StepReplied(message))

    def call_started(self, call_id: str, name: str, arguments: Any) -> None:
        self.post(CallStarted(call_id))

    def call_finished(self, call_id: str, name: str, arguments: Any, result: ToolResult,
                      message: Message) -> None:
        self.post(CallFinished(call_id, result, message))

    def compacting(self, size: RequestSize) -> None:
        self.post(GuardCompacting(size, None))

    def compacted(self, report: PassReport | None, size: RequestSize) -> None:
        self.post(GuardCompacted(report, size, None))


class ScreenPasses:
    """What ``AgentTurn`` asks of its passes (``session.passes.BackgroundPasses``), done by
    the chat screen's pass runner: a pass asked for runs there (when the queue both share,
    ``session.pass_queue``, says) and is published as soon as it is planned, under the session's lock, so
    there is nothing to publish between model calls. ``settle`` waits for the screen's
    compaction to go idle (the loop asks only when the next request would not fit)."""

    def __init__(self, post: Callable[[UIMessage], Any], idle: Callable[[], bool],
                 cancel: threading.Event) -> None:
        self._post, self._idle, self._cancel = post, idle, cancel
        self._lock = threading.Lock()
        self._pending = 0  # asked for, not yet taken up by the screen

    def request(self, kind: str = MICRO) -> None:
        with self._lock:
            self._pending += 1
        self._post(PassRequested(kind, self))

    def taken(self) -> None:
        """(the screen) A request has become a running or queued pass."""
        with self._lock:
            self._pending -= 1

    @property
    def busy(self) -> bool:
        return bool(self._pending) or not self._idle()

    def publish_ready(self) -> None:
        return None

    def settle(self, timeout: float | None = None) -> None:
        deadline = None if timeout is None else time.monotonic() + timeout
        while self.busy and not self._cancel.is_set():
            if deadline is not None and time.monotonic() > deadline:
                return
            time.sleep(POLL_S)


class ModalAsk:
    """The turn's ``ask``: the approval prompt on the event loop; the turn's thread waits for
    the answer (a stop or the screen going away answers "deny" and takes the prompt down)."""

    def __init__(self, app: App[Any], cancel: threading.Event,
                 make_screen: Callable[[ApprovalRequest, str | None, str], Any]) -> None:
        self.app, self.cancel, self.make_screen = app, cancel, make_screen

    def __call__(self, request: ApprovalRequest, preview: str | None, reason: str) -> Answer:
        answered = threading.Event()
        box: list[Answer | None] = []
        screen = self.make_screen(request, preview, reason)

        def show() -> None:
            def done(answer: Answer | None) -> None:
                box.append(answer)
                answered.set()

            self.app.push_screen(screen, done)

        if self.cancel.is_set():
            return Answer.DENY
        try:
            self.app.call_from_thread(show)
        except RuntimeError:  # the app is closing: no one to ask
            return Answer.DENY
        while not answered.wait(POLL_S):
            if self.cancel.is_set():
                screen.post_message(screen.Withdrawn())  # never blocks: the loop may be closing
                return Answer.DENY
        return box[0] or Answer.DENY
