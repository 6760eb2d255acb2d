"""Reading a marker back from a transcript: what its metadata may be trusted to say.

A marker's metadata comes from a file or the store as often as from this process,
and whatever it says would be copied into every later marker, at the top of every
request. So it is untrusted input: every read goes through ``read_marker``, which
checks its shape, redacts it and runs the instruction check on it.

- Only an assistant message without tool calls can be a marker: one with calls has
  results that answer it, so it must stay (or be absorbed) with them.
- The summary comes from the metadata when that is well-formed and passes the
  checks, else from the marker's content (our header and end lines stripped), so
  compacted history is never dropped because the metadata is missing or damaged.
- When neither passes (instructions, spoofed header or end lines, absurd size), the
  message is not taken as a marker at all: it stays an ordinary assistant message,
  verbatim, and a later pass absorbs it like any other. Its text then reaches the
  rolling summary only through the summarizer, redacted on the way in and checked
  on the way out, rather than being promoted to a trusted summary as it is.
- The Facts list is kept only when every fact is well-formed and safe and together
  they are exactly the section that ends the summary; otherwise the section, if
  any, stays in the summary as plain (redacted, checked) text.
- An assistant message that is a Hermes Agent summary (its preamble, summary and
  end line, with no text of its own besides) is a micro marker too: Hermes' micro
  passes write exactly that, and its summary is recovered from the text and
  checked the same way, so a transcript from Hermes goes on from its summary
  instead of feeding the summary to the summarizer as if it were an exchange.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from hermes_tui.compaction import facts, hermes_markers, user_floor
from hermes_tui.compaction.checks import looks_like_instructions
from hermes_tui.compaction.redaction import redact
from hermes_tui.core.transcript import MARKER_FOOTER, MARKER_HEADER, MARKER_KINDS, MICRO, Message

KINDS = MARKER_KINDS
# Far past any summary worth keeping (a whole context window of text); beyond it the
# text is not a summary and stays an ordinary message.
MAX_SUMMARY_CHARS = 200_000

META, CONTENT = "meta", "content"


@dataclass(frozen=True)
class MarkerSummary:
    """What a marker says, once checked."""

    kind: str
    summary: str                              # redacted, instruction-checked
    facts: tuple[facts.Fact, ...] = ()        # the summary's closing Facts section, when it is one
    summary_tokens: int | None = None         # as the metadata says (an estimate: passes recount)
    passes_total: int | None = None           # the session's counters, when the metadata holds valid ones
    tokens_saved_total: int | None = None
    source: str = META                        # where the summary came from: META or CONTENT
    quotes: tuple[user_floor.Quote, ...] = ()  # the user messages the summary's top section quotes
    users_folded_total: int | None = None     # user messages the floor policy has folded so far


def read_marker(msg: Message) -> MarkerSummary | None:
    """The checked summary of a marker; None when ``msg`` is not to be taken as one."""
    if not msg.has_marker_shape:
        return None
    kind = msg.marker_kind
    if kind is None:
        return _hermes_marker(msg)
    meta = msg.meta
    raw = meta.get("summary")
    if isinstance(raw, str) and _is_list_of_strings(meta.get("covers")):
        quotes, summary = _quoted(meta.get("user_quotes"), raw)
        if summary is not None:
            return MarkerSummary(
                kind, summary,
                quotes=quotes,
                users_folded_total=_count(meta.get("users_folded_total")),
                facts=_facts_section(meta.get("facts"), summary),
                summary_tokens=_count(meta.get("summary_tokens")),
                passes_total=_count(meta.get("passes_total")),
                tokens_saved_total=_count(meta.get("tokens_saved_total")),
                source=META,
            )
    summary = _checked(summary_from_content(msg.content or ""))
    if summary is None:
        return None
    return MarkerSummary(
        kind, summary,
        passes_total=_count(meta.get("passes_total")),
        tokens_saved_total=_count(meta.get("tokens_saved_total")),
        source=CONTENT,
    )


def is_marker(msg: Message) -> bool:
    """A marker compaction may treat as one (supersede, fold, step over)."""
    return read_marker(msg) is not None


def _hermes_marker(msg: Message) -> MarkerSummary | None:
    parsed = hermes_markers.parse_summary(msg.content or "")
    if parsed is None or parsed.before or parsed.after:
        return None  # not one, or it holds a message of its own that must stay verbatim
    summary = _checked(parsed.summary)
    return None if summary is None else MarkerSummary(MICRO, summary, source=CONTENT)


def summary_from_content(content: str) -> str:
    """The summary part of a marker's text: without our header and end lines."""
    lines = content.strip("\n").split("\n")
    if lines and lines[0].strip() == MARKER_HEADER:
        lines = lines[1:]
    if lines and lines[-1].strip() == MARKER_FOOTER:
        lines = lines[:-1]
    return "\n".join(lines)


def _quoted(raw_quotes: Any, raw: str) -> tuple[tuple[user_floor.Quote, ...], str | None]:
    """The quotes' section and the checked summary. What the user said is quoted as data:
    the instruction check reads the rest of the summary. Quotes the metadata does not
    list exactly are no section: the whole text is then checked as it is."""
    quotes = user_floor.read_quotes(raw_quotes, raw)
    checked = user_floor.checked_quotes(quotes) if quotes else None
    if not quotes or not checked or len(raw) > MAX_SUMMARY_CHARS:
        return (), _checked(raw)
    rest = _checked(user_floor.without_section(raw, quotes))
    return (checked, None) if rest is None else (checked, user_floor.compose(checked, rest))


def _checked(text: str) -> str | None:
    """``text`` redacted, or None when it may not stand as a summary."""
    if len(text) > MAX_SUMMARY_CHARS:
        return None
    text = redact(text)
    # Our scaffolding inside a summary would fake the end of the marker in the next one.
    if MARKER_HEADER in text or MARKER_FOOTER in text or looks_like_instructions(text):
        return None
    return text


def _facts_section(raw: Any, summary: str) -> tuple[facts.Fact, ...]:
    if not isinstance(raw, list) or not raw:
        return ()
    parsed: list[facts.Fact] = []
    for item in raw:
        if not (isinstance(item, (list, tuple)) and len(item) == 2):
            return ()
        kind, value = item
        if kind not in facts.KINDS or not isinstance(value, str) or facts.fact_problem(kind, value) is not None:
            return ()
        parsed.append((kind, value))
    return tuple(parsed) if summary.endswith(facts.render_section(parsed)) else ()


def _count(value: Any) -> int | None:
    """A non-negative integer counter, or None."""
    if isinstance(value, int) and not isinstance(value, bool) and value >= 0:
        return value
    return None


def _is_list_of_strings(value: Any) -> bool:
    return isinstance(value, list) and all(isinstance(item, str) for item in value)
