"""The trim stage: bulky old tool results cut to head + tail + a one-line digest, no model.

The cheapest stage (docs/architecture.md, "Compaction stages, cheapest first"). Between the
protected head and the tail, every tool result over ``compression.trim_threshold_tokens``
is replaced in place by a new message with the same role, ``tool_call_id`` and ``name``
(so pairing and order are untouched) whose content is

    <its first lines, about HEAD_TOKENS>
    [trimmed; full output archived; tokens: 4,210; lines: 180]
    [not shown: error `AssertionError: Lists differ`; path `tests/test_media.py`]
    <its last lines, about TAIL_TOKENS>

(Counts written "tokens: N", not "N tokens": the fact guard would list "N tokens" as a
fact of the exchange when a pass folds it.) The second bracket line is there only when
the text not shown holds errors or paths
(``facts.extract_facts``: deterministic, each value held to the Facts section's checks).
The original is archived by the store in the same transaction (``Store.archive_and_compact``),
so it stays searchable and a resume loads the trimmed version.

Why these numbers: a tool result is capped at ``agent.max_output_bytes`` (32,000 bytes,
about 8K tokens) before it enters the transcript; on the five real agent sessions in
``shared/data/sessions`` the median result is 40-140 tokens (never touched) and a few
results over 600 tokens hold most of the tool tokens. A trimmed result is at most about
HEAD_TOKENS + TAIL_TOKENS + the digest (~250 tokens), so the default threshold of 600
makes every trim save well over half of what it cuts, and a result is trimmed only when
that pays for the cache break it causes.

Credentials: the kept text is cut from the *redacted* result (``redaction.redact`` runs
on the whole text first, so a cut never leaves half a secret that redaction no longer
recognises) and redacted again after cutting. The trimmed version therefore shows no
credential the original did not, and fewer of those it did.

What is never trimmed: anything but a tool result (user, assistant, system messages,
markers), a result inside the head, a result already trimmed (``meta["trimmed"]``),
a result whose content is a list of parts (an image is not lines), and one whose trimmed
version would not save at least a third of it.

The tail under pressure: a result inside the tail is trimmed only when the window cannot
hold otherwise. Passes absorb only what lies between head and tail, so when the transcript
is over the threshold and head + tail alone cost more than the threshold less the tail's
own budget (the room the rolling summary and the next exchanges need), no pass can bring it
back: one step whose parallel reads return 14K tokens at a 16K window (a real session in
``shared/data/sessions`` does this). Then bulky results in the tail are trimmed, largest
first (the fewest trims that reach the mark), until head + tail fit that mark. Some of them
the model may not have answered yet: the next request could not carry them whole anyway,
and the model sees the trim line and can read again the part it needs.

Pure planning: ``plan_trim`` changes nothing; the compactor publishes its ``TrimResult``.
"""

from __future__ import annotations

from dataclasses import dataclass

from hermes_tui.compaction import facts
from hermes_tui.compaction.redaction import redact
from hermes_tui.compaction.state import MicroState, PassResult
from hermes_tui.compaction.window import head_end, tail_start
from hermes_tui.config import COMPRESSION_DEFAULTS as _DEFAULTS
from hermes_tui.core.conversation import Replacement
from hermes_tui.core.tokens import TokenCounter, count_message, count_messages
from hermes_tui.core.transcript import Message, new_message_id

TRIM = "trim"                        # the kind of the result and its report
TRIMMED = "trimmed"                  # outcome: results were trimmed
META_KEY = "trimmed"                 # meta of a trimmed result: what it was
HEAD_TOKENS = 150
TAIL_TOKENS = 70
MAX_DIGEST_FACTS = 4
# A trim that keeps more than this share of a result is not worth its cache break.
MAX_KEPT_SHARE = 2 / 3
DEFAULT_THRESHOLD_TOKENS = _DEFAULTS.trim_threshold_tokens


@dataclass
class TrimResult(PassResult):
    """A trim stage's plan: ``replacement`` swaps each bulky result for its trimmed version."""

    replacement: Replacement | None = None


def is_trimmed(msg: Message) -> bool:
    return isinstance(msg.meta, dict) and META_KEY in msg.meta


def original_of(msg: Message) -> str | None:
    """The id of the result ``msg`` is the trimmed version of, or None."""
    meta = msg.meta.get(META_KEY) if isinstance(msg.meta, dict) else None
    original = meta.get("original") if isinstance(meta, dict) else None
    return original if isinstance(original, str) else None


def trimmable(msg: Message, counter: TokenCounter, threshold_tokens: int) -> bool:
    """A tool result over the threshold, never trimmed before, with plain text content."""
    return (
        msg.role == "tool"
        and msg.parts is None
        and not is_trimmed(msg)
        and count_message(counter, msg) > threshold_tokens
    )


def plan_trim(
    messages: list[Message],
    counter: TokenCounter,
    *,
    protect_first_n: int,
    tail_budget: int,
    threshold_tokens: int = DEFAULT_THRESHOLD_TOKENS,
    state: MicroState | None = None,
    window_tokens: int | None = None,
    total_tokens: int | None = None,
) -> TrimResult | None:
    """The trim of ``messages`` now, or None when nothing is bulky where it may be trimmed.

    ``window_tokens`` (the compaction threshold) turns on the tail under pressure (module
    docstring); ``total_tokens`` is the transcript's total when the caller keeps it."""
    head = head_end(messages, protect_first_n)
    tail = tail_start(messages, counter, tail_budget)
    cuts: dict[int, tuple[Message, int, int]] = {}  # index -> (trimmed version, tokens, kept)

    def cut_at(index: int) -> int:
        """Trim ``messages[index]`` when it pays; the tokens it saves (0: left whole)."""
        msg = messages[index]
        if not trimmable(msg, counter, threshold_tokens):
            return 0
        new = trimmed(msg, counter)
        tokens, kept = count_message(counter, msg), count_message(counter, new)
        if kept > tokens * MAX_KEPT_SHARE:
            return 0
        cuts[index] = (new, tokens, kept)
        return tokens - kept

    saved = sum(cut_at(index) for index in range(head, tail))
    in_tail = 0
    if window_tokens is not None:
        total = (count_messages(counter, messages) if total_tokens is None else total_tokens) - saved
        pinned = count_messages(counter, messages[:head]) + count_messages(counter, messages[tail:])
        mark = window_tokens - tail_budget
        if total > window_tokens:
            for index in _largest_first(messages, max(head, tail), counter):
                if pinned <= mark:
                    break
                cut = cut_at(index)
                pinned, in_tail = pinned - cut, in_tail + (cut > 0)
    if not cuts:
        return None
    order = sorted(cuts)
    before = sum(cuts[i][1] for i in order)
    after = sum(cuts[i][2] for i in order)
    stats = {"results_trimmed": len(order), "trimmed_tokens_before": before, "trimmed_tokens_after": after}
    if in_tail:
        stats["tail_results_trimmed"] = in_tail
    return TrimResult(
        TRIM, TRIMMED, state or MicroState(),
        replacement=Replacement(
            tuple((i, messages[i].id) for i in order), tuple(cuts[i][0] for i in order),
            tuple(messages[i] for i in order),
        ),
        stats=stats,
    )


def _largest_first(messages: list[Message], tail: int, counter: TokenCounter) -> list[int]:
    """The tail's tool results, largest first (the oldest first among equals)."""
    results = [i for i in range(tail, len(messages)) if messages[i].role == "tool"]
    return sorted(results, key=lambda i: -count_message(counter, messages[i]))


def trimmed(msg: Message, counter: TokenCounter) -> Message:
    """``msg`` (a tool result) as its first and last lines around a digest, under a new id."""
    tokens = count_message(counter, msg)
    text = redact(msg.content)
    head, middle, tail = cut(text, counter, HEAD_TOKENS, TAIL_TOKENS)
    lines = text.count("\n") + 1
    parts = [redact(head.removesuffix("\n")), f"[trimmed; full output archived; tokens: {tokens:,}; lines: {lines:,}]"]
    mentioned = _mentions(middle)
    if mentioned:
        parts.append(f"[not shown: {mentioned}]")
    if tail:
        parts.append(redact(tail))
    meta = {**msg.meta, META_KEY: {"original": msg.id, "tokens": tokens, "lines": lines}}
    return Message(
        role=msg.role, content="\n".join(parts), tool_call_id=msg.tool_call_id, name=msg.name,
        meta=meta, id=new_message_id(),
    )


def cut(text: str, counter: TokenCounter, head_tokens: int, tail_tokens: int) -> tuple[str, str, str]:
    """``text`` as (head, middle, tail), in that order the whole of it.

    Whole lines while each budget lasts. A first (last) line longer than its whole
    budget is cut to a prefix (suffix) of itself, so a minified file or a one-line JSON
    blob still shows its start and its end. The head and the tail never overlap.
    """
    lines = text.split("\n")
    lines = [line + "\n" for line in lines[:-1]] + [lines[-1]]
    a, spent = 0, 0
    for line in lines:
        cost = counter.count_text(line) + 1
        if spent + cost > head_tokens:
            break
        spent, a = spent + cost, a + len(line)
    if a == 0:
        a = len(_prefix(lines[0], counter, head_tokens))
    b, spent = len(text), 0
    for line in reversed(lines):
        cost = counter.count_text(line) + 1
        if spent + cost > tail_tokens or b - len(line) < a:
            break
        spent, b = spent + cost, b - len(line)
    if b == len(text):  # the last line alone is over the budget (trailing newlines aside): its end
        body = text[a:].rstrip("\n")
        end = _suffix(body.rsplit("\n", 1)[-1], counter, tail_tokens)
        b = max(a, a + len(body) - len(end))
    return text[:a], text[a:b], text[b:]


def _prefix(line: str, counter: TokenCounter, budget: int) -> str:
    piece = line[: budget * 4]
    while len(piece) > 16 and counter.count_text(piece) > budget:
        piece = piece[: int(len(piece) * 0.8)]
    return piece


def _suffix(line: str, counter: TokenCounter, budget: int) -> str:
    piece = line[-budget * 4:] if len(line) > budget * 4 else line
    while len(piece) > 16 and counter.count_text(piece) > budget:
        piece = piece[len(piece) - int(len(piece) * 0.8):]
    return piece


def _mentions(text: str) -> str:
    """Errors and paths in the text not shown, quoted as data ("" when none)."""
    if not text.strip():
        return ""
    found = facts.extract_facts([Message(role="tool", content=text, tool_call_id="x")])
    kept = [(kind, value) for kind, value in found if kind in (facts.ERROR, facts.PATH)][:MAX_DIGEST_FACTS]
    return "; ".join(f"{kind} {facts.QUOTE}{value}{facts.QUOTE}" for kind, value in kept)
