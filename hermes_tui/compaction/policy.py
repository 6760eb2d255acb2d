"""When compaction runs: the one rule every path asks after a completed exchange.

A splice rewrites the context right after the head, so every prefix cache of the chat
model (in-process MLX, llama.cpp, vLLM, hosted prompt caching) loses what follows it.
The policy therefore decides *when* passes run, and how many run together:

* ``watermark`` (the default): nothing until the transcript passes the high mark, then
  micro passes back to back, published as one splice between two chat requests, until
  it is at or under the low mark. The cache breaks once per several exchanges instead
  of after every one. Marks are shares of the compaction threshold; when what cannot be
  absorbed (head, tail, summary) is over the low mark, the next splice waits for the
  same growth (``trigger_tokens``).
* ``per_exchange``: one pass after every N-th completed exchange (N =
  ``micro_compact_every_n_turns``): an agent step, or a plain reply.
* ``per_turn``: one pass after every N-th completed user turn (the spec's schedule).

Batch compaction is due when the transcript is over the threshold and no micro pass is,
and it follows a micro splice that left the transcript over the threshold
(``after_splice``): the synchronous path (``Compactor.finalize_turn``) and the queue of
background passes (``session.pass_queue``, the app and the agent loop) both ask it.
The counter (``exchanges``) counts every completed exchange the session saw; the
decisions are logged one line each, counts only, so the app, ``compact``, ``demo``,
``eval`` and the agent loop can be compared on the same transcript.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

from hermes_tui.compaction.state import ABSORBED, DEFRAG
from hermes_tui.compaction.window import ContextWindow
from hermes_tui.config import CompressionConfig
from hermes_tui.core.transcript import BATCH, MICRO

log = logging.getLogger("hermes_tui.compaction")

WATERMARK, PER_EXCHANGE, PER_TURN = "watermark", "per_exchange", "per_turn"
POLICIES = (WATERMARK, PER_EXCHANGE, PER_TURN)
# Bounds the passes of one splice, so a summarizer that never shrinks anything cannot
# hold the chat for ever; the next exchange asks again.
MAX_PASSES_AT_ONCE = 64


@dataclass(frozen=True)
class Decision:
    """What runs after one completed exchange."""

    exchange: int  # the session's count of completed exchanges, this one included
    kind: str | None = None  # MICRO, BATCH or None
    down_to: int | None = None  # MICRO: keep passing while the transcript is over this many tokens
    tokens: int = 0  # the transcript when decided

    @property
    def passes(self) -> int:
        """Passes at most in this splice."""
        return 0 if self.kind != MICRO else (MAX_PASSES_AT_ONCE if self.down_to is not None else 1)

    def describe(self) -> str:
        if self.kind == MICRO and self.down_to is not None:
            return f"micro down to {self.down_to}"
        return self.kind or "none"


class CompactionPolicy:
    def __init__(self, window: ContextWindow):
        self.window = window
        self.exchanges = 0  # completed exchanges counted: the one counter
        self._waiting = 0  # exchanges (per_exchange) or turns (per_turn) since the last pass
        self._landed_at: int | None = None  # the transcript's tokens after the last splice

    @property
    def settings(self) -> CompressionConfig:
        """The ``compression`` section: the window's, as the passes read it."""
        return self.window.settings

    @property
    def name(self) -> str:
        return self.settings.policy

    @property
    def high_tokens(self) -> int:
        return int(self.settings.high_water * self.window.threshold_tokens)

    @property
    def low_tokens(self) -> int:
        return int(self.settings.low_water * self.window.threshold_tokens)

    @property
    def trigger_tokens(self) -> int:
        """Where the next watermark splice starts: the high mark, unless the last splice
        ended so close under it (the head, the tail and the summary alone are more than
        the low mark) that less than half the marks' span is left to grow: then as far
        above where it ended as the marks are apart (never past the threshold), so
        splices still come once per several exchanges, not after every one."""
        span = self.high_tokens - self.low_tokens
        if self._landed_at is None or self._landed_at + span // 2 <= self.high_tokens:
            return self.high_tokens
        return min(self._landed_at + span, self.window.threshold_tokens)

    def landed(self, total_tokens: int) -> None:
        """The passes of a decision were published; the transcript is now ``total_tokens``."""
        self._landed_at = total_tokens

    def after_exchange(self, total_tokens: int, *, turn_ended: bool = True) -> Decision:
        """Count one completed exchange (an assistant message and the results of its calls;
        ``turn_ended``: no calls, the user's turn is over) and decide what runs now."""
        self.exchanges += 1
        settings = self.settings
        kind, down_to = None, None
        if settings.enabled and settings.micro_compact:
            kind, down_to = self._micro(total_tokens, turn_ended)
        if kind is None and settings.enabled and total_tokens > self.window.threshold_tokens:
            kind = BATCH
        decision = Decision(self.exchanges, kind, down_to, total_tokens)
        if kind is not None:
            log.info(
                "compaction policy: exchange %d (%s, %d tokens) -> %s",
                decision.exchange, self.name, total_tokens, decision.describe(),
            )
        return decision

    def _micro(self, total_tokens: int, turn_ended: bool) -> tuple[str | None, int | None]:
        if self.name == WATERMARK:
            if total_tokens > self.trigger_tokens:
                return MICRO, self.low_tokens
            return None, None
        if self.name == PER_TURN and not turn_ended:
            return None, None
        self._waiting += 1
        if self._waiting < self.settings.micro_compact_every_n_turns:
            return None, None
        self._waiting = 0
        return MICRO, None

    def after_splice(self, landed: str, total_tokens: int) -> str | None:
        """What follows a pass of kind ``landed`` that has just ended, the transcript now
        ``total_tokens``: BATCH when micro passes left it over the threshold (they could not
        fold enough, and the next request must fit), else None. Asked whatever the pass's
        outcome: a failed pass leaves the transcript as large as it was."""
        over = total_tokens > self.window.threshold_tokens
        return BATCH if landed == MICRO and over and self.settings.enabled else None

    @staticmethod
    def again(decision: Decision, outcome: str, total_tokens: int, passes_run: int) -> bool:
        """Whether another pass belongs to the same splice: the last one folded something,
        the transcript is still over the decision's mark, and the bound is not reached."""
        return (
            decision.down_to is not None
            and outcome in (ABSORBED, DEFRAG)
            and total_tokens > decision.down_to
            and passes_run < decision.passes
        )
