"""What a compactor remembers between passes, the result of a pass, and the cursor rules.

The transcript is the source of truth: every field of ``MicroState`` that matters
for correctness can be recovered from it (the newest marker's metadata and the
``compaction_skipped`` flags), so a fresh process or a resumed session carries on
exactly where the last one stopped. A marker is read back through ``markers``,
which treats its metadata as untrusted input.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any

from hermes_tui.compaction.markers import MarkerSummary, is_marker, read_marker
from hermes_tui.core.conversation import Splice
from hermes_tui.core.transcript import Message, exchange_end, group_end

# Outcomes (docs/architecture.md, "Pass outcomes").
ABSORBED = "absorbed"
DEFRAG = "defrag"
DEFRAG_FAILED = "defrag_failed"
SUMMARIZE_FAILED = "summarize_failed"
EXCHANGE_SKIPPED = "exchange_skipped"
NOTHING_TO_ABSORB = "nothing_to_absorb"
STORE_FAILED = "store_failed"
STALE = "stale"            # the transcript changed underneath the pass; dropped, retried next turn
ERROR = "error"            # an unexpected exception, logged; the transcript is untouched
COMPRESSED = "compressed"  # batch
BATCH_FAILED = "failed"    # batch

SKIPPED_FLAG = "compaction_skipped"
MAX_CONSECUTIVE_FAILURES = 3


@dataclass(frozen=True)
class MicroState:
    cursor: int | None = None          # index of the first message not yet absorbed
    cursor_anchor: str | None = None   # id of the message just before the cursor, to validate it
    summary: str = ""                  # the whole rolling summary, Facts section included
    summary_tokens: int = 0
    facts: tuple[tuple[str, str], ...] = ()  # the Facts section's (kind, value)s, oldest first
    marker_index: int | None = None
    marker_id: str | None = None
    failing_id: str | None = None      # first message id of the exchange that last failed
    failures: int = 0                  # consecutive failures of that exchange
    defrag_failures: int = 0           # consecutive failed defrags
    defrag_wait: int = 0               # passes to wait before trying defrag again
    defrag_failed_request: int | None = None  # hash of the strict defrag request that last failed
    passes_total: int = 0
    tokens_saved_total: int = 0
    quotes: tuple[tuple[str, str], ...] = ()  # the user messages the summary quotes (user_floor)
    users_folded_total: int = 0        # user messages folded by the floor policy, this session

    def evolve(self, **changes: Any) -> MicroState:
        return replace(self, **changes)


@dataclass
class PassResult:
    """What a pass decided. Nothing is applied until the compactor publishes it."""

    kind: str                           # MICRO | BATCH (core.transcript), or trim.TRIM
    outcome: str
    state: MicroState                   # the state to adopt if the result is published
    splice: Splice | None = None
    failure: str | None = None          # short, content-free reason
    detail: str | None = None           # the failure in one redacted line for the user (never telemetry)
    skipped: tuple[Message, ...] = ()   # messages to flag as skipped on publish
    stats: dict[str, Any] = field(default_factory=dict)
    epoch: int | None = None            # Conversation.epoch of the view it was planned on


def is_marker_or_step_over(msg: Message) -> bool:
    """Messages the cursor walks past: user and system messages, markers, skipped exchanges."""
    return msg.role in ("user", "system") or is_marker(msg) or bool(msg.meta.get(SKIPPED_FLAG))


def normalize_cursor(messages: list[Message], cursor: int) -> int:
    """Step the cursor over what is never absorbed, to the next candidate exchange.

    Two cursors are equal exactly when they normalize to the same index; this is
    what makes a recovered cursor comparable with the one a process held in memory.
    """
    while cursor < len(messages) and (
        is_marker_or_step_over(messages[cursor]) or messages[cursor].role == "tool"
        or _never_completes(messages, cursor)
    ):
        cursor += 1
    return cursor


def _never_completes(messages: list[Message], index: int) -> bool:
    """An exchange with an unanswered call and more after its results: results follow
    their call, so it stays incomplete (and verbatim) for good."""
    return (
        messages[index].role == "assistant"
        and group_end(messages, index + 1) < len(messages)
        and exchange_end(messages, index) is None
    )


def last_marker(messages: list[Message]) -> tuple[int, MarkerSummary] | None:
    """The newest message that passes as a marker, with what it says."""
    for index in range(len(messages) - 1, -1, -1):
        marker = read_marker(messages[index])
        if marker is not None:
            return index, marker
    return None


def cursor_is_valid(messages: list[Message], state: MicroState) -> bool:
    cursor = state.cursor
    if cursor is None or not 0 <= cursor <= len(messages):
        return False
    anchor = messages[cursor - 1].id if cursor > 0 else None
    if anchor != state.cursor_anchor:
        return False
    if state.marker_index is None:
        return True
    index = state.marker_index
    return index < len(messages) and messages[index].id == state.marker_id


def recover_state(messages: list[Message], head_end: int, state: MicroState) -> MicroState:
    """Rebuild cursor and rolling summary from the transcript (newest marker, checked).

    Counters that span the session (passes, tokens saved) are carried in the marker
    too; failure counting starts afresh.
    """
    found = last_marker(messages)
    if found is None:
        cursor = head_end
        return state.evolve(
            cursor=cursor,
            cursor_anchor=messages[cursor - 1].id if cursor > 0 else None,
            summary="", summary_tokens=0, facts=(), quotes=(), marker_index=None, marker_id=None,
        )
    marker_index, marker = found
    cursor = max(head_end, marker_index + 1)
    return state.evolve(
        cursor=cursor,
        cursor_anchor=messages[cursor - 1].id,
        summary=marker.summary,
        summary_tokens=marker.summary_tokens or 0,
        facts=marker.facts,
        quotes=marker.quotes,
        users_folded_total=max(state.users_folded_total, marker.users_folded_total or 0),
        marker_index=marker_index,
        marker_id=messages[marker_index].id,
        passes_total=max(state.passes_total, marker.passes_total or 0),
        tokens_saved_total=state.tokens_saved_total if marker.tokens_saved_total is None else marker.tokens_saved_total,
    )
