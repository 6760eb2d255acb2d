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

from collections.abc import Sequence
from typing import TYPE_CHECKING

from hermes_tui.compaction.redaction import redact
from hermes_tui.tokens import TokenCounter, count_message
from hermes_tui.transcript import MARKER_FOOTER, MARKER_HEADER, Message

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


def section_tokens(counter: TokenCounter, quotes: Sequence[Quote]) -> int:
    return counter.count_text(render_section(quotes)) if quotes else 0


def fit(quotes: Sequence[Quote], budget: int, counter: TokenCounter) -> tuple[Quote, ...]:
    """The newest quotes whose section fits ``budget`` tokens, oldest first; a quote that
    alone is larger than the budget is not quoted (it is folded)."""
    kept: list[Quote] = []
    for quote in reversed(quotes):
        if section_tokens(counter, [quote, *kept]) > budget:
            break
        kept.insert(0, quote)
    return tuple(kept)


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
