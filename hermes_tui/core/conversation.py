"""The live transcript: messages plus a running token total, changed by appends and changes.

A change is what a compaction pass publishes, in one of two shapes, each checked the
same way (every message it takes out, by index *and* id, so a change computed on an
older view is refused rather than half-applied):

* a ``Splice`` (micro and batch passes): messages to remove and the marker to put
  where the last removed message was;
* a ``Replacement`` (the trim stage): messages each replaced in place by another, so
  nothing moves and tool pairing is untouched.

Appends at the end never invalidate a change, so the user can keep talking while a
pass runs; the system prompt replaced in place at index 0 does not either (the head is never
in a change), and one put in front of a transcript without it does (every index moves).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

from hermes_tui.core.tokens import TokenCounter, count_message
from hermes_tui.core.transcript import Message


class StaleSplice(Exception):
    """The transcript changed underneath a pass in a way that matters."""


@dataclass(frozen=True)
class Splice:
    """Replace ``removed`` messages with ``marker`` at the position of the last one."""

    removed: tuple[tuple[int, str], ...]  # (index, message id), ascending
    marker: Message
    archived: tuple[Message, ...] = field(default=())  # the removed messages, for the store

    @property
    def marker_index(self) -> int:
        """Where the marker lands once the splice is applied."""
        last = self.removed[-1][0]
        return last - (len(self.removed) - 1)


@dataclass(frozen=True)
class Replacement:
    """Replace each of ``removed`` in place with the message of ``messages`` at the same rank."""

    removed: tuple[tuple[int, str], ...]  # (index, message id), ascending
    messages: tuple[Message, ...]         # the replacements, one per removed message
    archived: tuple[Message, ...] = field(default=())  # the replaced messages, for the store

    def __post_init__(self) -> None:
        if len(self.removed) != len(self.messages):
            raise ValueError("a replacement needs one new message per removed one")


Change = Splice | Replacement


class Conversation:
    """Messages with a token total kept up to date from per-message cached counts."""

    def __init__(self, messages: Iterable[Message] = (), *, counter: TokenCounter):
        self.counter = counter
        self.messages: list[Message] = []
        self.total_tokens = 0
        self.generation = 0  # bumps on every change; a cheap "did anything change" check
        self.epoch = 0       # bumps when the whole transcript is swapped: older plans are void
        self.extend(messages)

    def __len__(self) -> int:
        return len(self.messages)

    def append(self, message: Message) -> None:
        self.messages.append(message)
        self.total_tokens += count_message(self.counter, message)
        self.generation += 1

    def prepend(self, message: Message) -> None:
        """Put ``message`` first (the session's system prompt, for a transcript that began
        without one). Every index moves: a change planned before is then refused as stale."""
        self.messages.insert(0, message)
        self.total_tokens += count_message(self.counter, message)
        self.generation += 1

    def extend(self, messages: Iterable[Message]) -> None:
        for message in messages:
            self.append(message)

    def check(self, change: Change) -> None:
        """Raise StaleSplice unless every removed message is still where the pass saw it."""
        for index, message_id in change.removed:
            if index >= len(self.messages) or self.messages[index].id != message_id:
                raise StaleSplice(f"message {message_id} is no longer at index {index}")

    def apply(self, change: Change) -> None:
        if isinstance(change, Replacement):
            self._replace(change)
            return
        splice = change
        self.check(splice)
        insert_at = splice.marker_index
        for index, _ in reversed(splice.removed):
            self.total_tokens -= count_message(self.counter, self.messages[index])
            del self.messages[index]
        self.messages.insert(insert_at, splice.marker)
        self.total_tokens += count_message(self.counter, splice.marker)
        self.generation += 1

    def _replace(self, replacement: Replacement) -> None:
        self.check(replacement)
        for (index, _), new in zip(replacement.removed, replacement.messages, strict=True):
            self.total_tokens += count_message(self.counter, new) - count_message(self.counter, self.messages[index])
            self.messages[index] = new
        self.generation += 1

    def replace_all(self, messages: Iterable[Message]) -> None:
        """Swap in a whole new transcript (a resumed session, an import, a rewind)."""
        self.epoch += 1
        self.messages = []
        self.total_tokens = 0
        self.extend(messages)
