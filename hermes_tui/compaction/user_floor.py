"""The user-message floor: what the user typed stays verbatim for as long as the window allows.

Passes never summarize a user message on their own, so in a long chatty session the
user messages alone would fill any window. The policy, newest first:

1. **Verbatim.** The most recent user messages stay in the context as they are, up to
   ``verbatim_budget`` tokens (``compression.user_verbatim_tokens``; by default a share
   of the compaction threshold, at most the 20K tokens Codex keeps). The last user
   message always stays, whatever its size, and so do those in the head.
2. **Quoted.** Older ones, once a defrag or a batch compaction folds the middle, leave
   the context (the store archives them, as it does every absorbed message) and are
   quoted word for word, redacted, in a "What the user said" section at the top of the
   summary, while the section fits ``quote_budget`` tokens.
3. **Folded.** Past that, the oldest quotes drop out of the section: what the summarizer
   wrote about them when they were folded is what remains in the context.

The section is the engine's, like the Facts section: the summarizer never sees it
(so it cannot rewrite a quote) and the marker's metadata lists the quotes, so a resume
finds them again. Quotes are data, not instructions: a user may well have typed "run
the tests", so the instruction check applies to the rest of the summary only.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from typing import TYPE_CHECKING

from hermes_tui.compaction.redaction import redact
from hermes_tui.core.tokens import TokenCounter, count_message
from hermes_tui.core.transcript import MARKER_FOOTER, MARKER_HEADER, Message

if TYPE_CHECKING:  # the store reads markers through this module: no config for that
    from hermes_tui.compaction.window import ContextWindow

# The default floor: this share of the compaction threshold (at 8K: ~980 tokens), at most
# Codex's 20K. Small windows keep most of their room for the work itself.
VERBATIM_SHARE = 0.15
MAX_VERBATIM_TOKENS = 20_000
# The quotes' section may hold this share of the floor: the context then carries at most
# 1.5 floors of what the user said verbatim, in messages and quotes together.
QUOTE_SHARE = 0.5

HEADING = "What the user said (quoted verbatim, oldest first):"
QUOTE = "> "

Quote = tuple[str, str]  # (message id, the message's text, redacted)


def verbatim_budget(window: ContextWindow, configured: int | None) -> int:
    if configured is not None:
        return configured
    return min(MAX_VERBATIM_TOKENS, int(VERBATIM_SHARE * window.threshold_tokens))


def quote_budget(verbatim_tokens: int) -> int:
    return int(QUOTE_SHARE * verbatim_tokens)


def foldable_users(messages: list[Message], head: int, tail: int, counter: TokenCounter, budget: int) -> list[int]:
    """Indices of the user messages between ``head`` and ``tail`` that fall outside the
    floor: older than the newest ``budget`` tokens of user messages. Never the last one."""
    users = [i for i in range(len(messages)) if messages[i].role == "user"]
    spent = 0
    newest_outside = None
    for position in range(len(users) - 1, -1, -1):
        spent += count_message(counter, messages[users[position]])
        if spent > budget and position < len(users) - 1:
            newest_outside = position
            break
    if newest_outside is None:
        return []
    return [i for i in users[: newest_outside + 1] if head <= i < tail]


def quotes_of(messages: Sequence[Message]) -> list[Quote]:
    return [(m.id, redact(m.content or "")) for m in messages if m.role == "user"]


def render_section(quotes: Sequence[Quote]) -> str:
    """The heading and each quote, every line of it prefixed with ``> ``; "" when none."""
    if not quotes:
        return ""
    lines = [HEADING]
    for _, text in quotes:
        lines.extend(QUOTE + line for line in (text.split("\n") or [""]))
    return "\n".join(lines)


def compose(quotes: Sequence[Quote], rest: str) -> str:
    """The whole summary: the quotes' section first, then the rest (the model's text and
    any Facts section, which must stay the summary's end)."""
    section = render_section(quotes)
    if not section:
        return rest
    return f"{section}\n\n{rest}" if rest else section


def without_section(summary: str, quotes: Sequence[Quote]) -> str:
    """The summary without the quotes' section the engine put at its top."""
    section = render_section(quotes)
    if section and summary.startswith(section):
        return summary[len(section):].lstrip("\n")
    return summary


# The section's count, per quotes tuple. A pass reads it several times, and the state keeps
# the same tuple from pass to pass (only a defrag or a batch changes the quotes), so it is
# counted once per change of the quotes, not once per read: a pass stays O(exchange) however
# many messages the summary quotes. Exact: it is the counter's count of the rendered section.
# Keyed by identity (the entry holds the tuple, so its id is not reused while cached).
_COUNTED: dict[int, tuple[tuple[Quote, ...], TokenCounter, int]] = {}
_COUNTED_MAX = 32
_counted_lock = threading.Lock()


def section_tokens(counter: TokenCounter, quotes: Sequence[Quote]) -> int:
    if not quotes:
        return 0
    if not isinstance(quotes, tuple):  # a list may change: counted every time
        return counter.count_text(render_section(quotes))
    with _counted_lock:
        hit = _COUNTED.get(id(quotes))
    if hit is not None and hit[0] is quotes and hit[1] is counter:
        return hit[2]
    tokens = counter.count_text(render_section(quotes))
    with _counted_lock:
        if len(_COUNTED) >= _COUNTED_MAX:
            del _COUNTED[next(iter(_COUNTED))]
        _COUNTED[id(quotes)] = (quotes, counter, tokens)
    return tokens


def fit(quotes: Sequence[Quote], budget: int, counter: TokenCounter) -> tuple[Quote, ...]:
    """The newest quotes whose section fits ``budget`` tokens, oldest first; a quote that
    alone is larger than the budget is not quoted (it is folded).

    The section's count grows with every quote added, so this is the longest run of newest
    quotes that fits. Each quote's lines are counted once, and their sum (with the
    heading's) picks the cut; the counter's count of the rendered section, the only exact
    one (its rounding is not additive), then confirms it, searching outwards from that cut:
    a few counts of the section, not one per quote.
    """
    quotes = tuple(quotes)
    n = len(quotes)
    if not n:
        return ()
    newest: dict[int, tuple[Quote, ...]] = {}

    def fits(k: int) -> bool:  # the newest ``k`` quotes' section, counted exactly
        if k == 0:
            return True
        newest[k] = quotes[n - k:]
        return section_tokens(counter, newest[k]) <= budget

    spent, guess = counter.count_text(HEADING), 0
    for _, text in reversed(quotes):
        spent += counter.count_text(_quoted_lines(text))
        if spent > budget:
            break
        guess += 1
    # ``low`` fits, ``high`` does not (n + 1 stands for "more than there are").
    if fits(guess):
        low, high, step = guess, n + 1, 1
        while low + step <= n and fits(low + step):
            low, step = low + step, step * 2
        high = min(high, low + step)
    else:
        low, high, step = guess - 1, guess, 1
        while low > 0 and not fits(low):
            high, low, step = low, max(0, low - step * 2), step * 2
    while high - low > 1:
        middle = (low + high) // 2
        low, high = (middle, high) if fits(middle) else (low, middle)
    return newest.get(low, quotes[n - low:]) if low else ()


def _quoted_lines(text: str) -> str:
    return "\n".join(QUOTE + line for line in text.split("\n"))


def read_quotes(raw: object, summary: str) -> tuple[Quote, ...] | None:
    """The quotes a marker's metadata lists, when they are well-formed and exactly the
    section that starts ``summary``; () when it lists none, None when they are not."""
    if raw is None or raw == []:
        return ()
    if not isinstance(raw, list):
        return None
    quotes: list[Quote] = []
    for item in raw:
        if not (isinstance(item, (list, tuple)) and len(item) == 2 and all(isinstance(x, str) for x in item)):
            return None
        quotes.append((item[0], item[1]))
    if not summary.startswith(render_section(quotes)):
        return None
    return tuple(quotes)


def checked_quotes(quotes: Sequence[Quote]) -> tuple[Quote, ...] | None:
    """The quotes redacted; None when one carries our marker scaffolding (it would fake
    the end of the marker)."""
    out = []
    for message_id, text in quotes:
        if MARKER_HEADER in text or MARKER_FOOTER in text:
            return None
        out.append((message_id, redact(text)))
    return tuple(out)
