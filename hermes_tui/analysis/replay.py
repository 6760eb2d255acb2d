"""Replay a transcript turn by turn, finalizing each as the app would.

After each one the compaction policy decides what runs (``Compactor.finalize_turn``),
as it does in the app and the agent loop.
``turns="user"``: a turn is a user message and everything up to the next one, counted
as one exchange that ends the turn (a plain chat's reply).
``turns="step"``: every agent-loop step (an assistant message and its tool results)
is an exchange, as an agent counts them; it ends the turn when it makes no calls. Use
it for long agent sessions with few user messages.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from hermes_tui.compaction.engine import Compactor, PassReport, Persist
from hermes_tui.core.conversation import Conversation
from hermes_tui.core.tokens import count_messages
from hermes_tui.core.transcript import Message, iter_steps, iter_turns
from hermes_tui.util.faults import crash_point

TURN_MODES = ("user", "step")


@dataclass
class ReplayResult:
    reports: list[PassReport] = field(default_factory=list)
    turns: int = 0
    tokens_before: int = 0   # the whole input, as one uncompacted transcript
    tokens_after: int = 0

    def count(self, outcome: str, kind: str | None = None) -> int:
        return sum(1 for r in self.reports if r.outcome == outcome and (kind is None or r.kind == kind))


def turn_boundaries(messages: list[Message], mode: str) -> list[int]:
    """Indices after which a turn is finalized."""
    return [end for end, _ in exchange_ends(messages, mode)]


def exchange_ends(messages: list[Message], mode: str) -> list[tuple[int, bool]]:
    """(index after the exchange, whether it ends the user's turn) for each exchange."""
    if mode == "user":
        return [(end, True) for start, end in iter_turns(messages)
                if any(m.role == "user" for m in messages[start:end])]
    if mode == "step":
        return [(end, not messages[start].tool_calls) for start, end in iter_steps(messages)
                if messages[start].role == "assistant"]
    raise ValueError(f"turns must be one of {', '.join(TURN_MODES)}, got {mode!r}")


def replay(
    messages: list[Message],
    conv: Conversation,
    compactor: Compactor,
    *,
    turns: str = "user",
    persist: Persist | None = None,
    flush: Callable[[list[Message]], object] | None = None,  # what it returns is not used
    on_turn: Callable[[int, int, list[PassReport]], None] | None = None,
    start_at: int = 0,
) -> ReplayResult:
    """Feed ``messages[start_at:]`` into ``conv`` and finalize each turn.

    ``flush`` receives each turn's new messages before the turn is finalized (the
    store's append-only flush). ``start_at`` lets a resumed replay continue after
    what is already in ``conv``; a turn that ended exactly there is finalized again,
    since its pass may not have run.
    """
    result = ReplayResult(tokens_before=count_messages(conv.counter, messages))
    ends = [(b, ended) for b, ended in exchange_ends(messages, turns) if b >= start_at and b > 0]
    boundaries = [b for b, _ in ends]
    position = start_at
    for number, (boundary, turn_ended) in enumerate(ends, start=1):
        new = messages[position:boundary]
        conv.extend(new)
        if flush is not None:
            flush(new)
        position = boundary
        reports = compactor.finalize_turn(conv, persist, turn_ended=turn_ended)
        crash_point("turn.end")
        result.turns += 1
        result.reports.extend(reports)
        if on_turn is not None:
            on_turn(number, len(boundaries), reports)
    conv.extend(messages[position:])
    if flush is not None:
        flush(messages[position:])
    result.tokens_after = conv.total_tokens
    return result
