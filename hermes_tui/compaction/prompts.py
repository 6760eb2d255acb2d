"""Prompts for the summarizer: a static system part (prefilled once and cached by
backends that can) and a short user part holding what changed.

The summary is written as notes about what happened, never as instructions, and it
describes only the assistant's work: user messages stay verbatim in the transcript.
"""

from __future__ import annotations

import json

from hermes_tui.core.transcript import Message
from hermes_tui.util.untrusted import load_json

# A single tool output can be tens of KB; the summarizer needs its gist, not all of it.
# The original stays archived in the store, so eliding the middle here loses nothing.
MAX_RENDERED_CHARS = 12_000

_RULES = """Rules:
- Keep exact file paths, identifiers, commands, numbers, URLs and error messages as written.
- Keep decisions and their reasons, requirements the user stated, results, and open questions.
- Drop what no longer matters: superseded attempts, long raw output, repetition.
- Write short factual notes in the past tense about what happened. Never address the assistant and never give instructions.
- Replace any credential (API key, token, password) with [REDACTED].
- Output only the summary text: no preamble, no code fences."""

ABSORB_SYSTEM = f"""You maintain the running summary of a long working session in which an AI assistant uses tools for a user. The user's own messages are kept separately and verbatim; your summary covers the assistant's work: what it said, did and found.

You receive the current summary and one new exchange (an assistant message and the results of its tool calls). Reply with the updated summary: the current summary with the new exchange folded in, keeping its structure.

{_RULES}"""

# What a model answers in append mode when an exchange adds nothing worth keeping.
NOTHING_NEW = "NOTHING NEW"

# Append mode asks for notes about one step, in the shape small local models follow: the
# material first, the instruction after it, a fixed note shape, and nothing to continue or
# copy (given the running summary and told to "reply with the new lines", Qwen2.5-Coder
# 0.5B and 1.5B wrote the exchange back; asked for 1-4 notes in the past tense they wrote
# notes). The summary stays out of the prompt: the engine appends the notes and drops
# lines it already holds.
NOTES_SYSTEM = (
    "You keep the work log of an AI coding assistant. You read one step of its work and write short notes "
    "about what happened. You never copy the step and never address anyone."
)

# "and any decision ... or open question it stated": the decisions and open questions the
# assistant wrote were the part of a step the notes lost (0.20 kept at the end of a 1.5B
# replay). On the 12 planted ones of the first two bundled sessions, Qwen2.5-Coder-1.5B's
# notes kept 9 with this sentence and 7 without (3 gained, 1 lost), none copying the step.
NOTES_TASK = (
    "Write 1 to 4 notes about this step, one per line, each starting with \"- \". Past tense. Say what the "
    "assistant did and what it found, and any decision (with its reason) or open question it stated; keep "
    "file paths, names, commands, numbers and error messages exactly. "
    "Do not copy the step. Replace any password, token or key with [REDACTED]."
)

NOTES_TASK_STRICT = (
    "Write at most 3 notes about this step, one per line, each starting with \"- \" and under 25 words. Past "
    "tense: what the assistant did and what it found, with exact file names, commands and errors. Do not copy "
    "the step, do not continue it, do not refuse: it is a log entry."
)

# Notes need a step's gist, and a small model on a CPU reads ~50-180 tokens a second: a step
# is shown up to this many characters per part (the middle of a longer one elided; the whole
# stays archived), and the second try shows less of it (the strict prompt's smaller slice).
NOTES_RENDERED_CHARS = 6_000
STRICT_RENDERED_CHARS = 3_000

DEFRAG_SYSTEM = f"""You maintain the running summary of a long working session in which an AI assistant uses tools for a user. The user's own messages are kept separately and verbatim; your summary covers the assistant's work.

The summary has grown too long. You receive it, possibly with a few more exchanges to fold in. Reply with a consolidated summary at most half as long: merge duplicates, drop detail that no longer matters, keep every fact that still does.

{_RULES}"""

BATCH_SYSTEM = f"""You summarize the middle of a long working session in which an AI assistant uses tools for a user, so the session can continue in a smaller context. The user's own messages are kept separately and verbatim; your summary covers the assistant's work: what it said, did and found.

You receive the previous summary (if any) and the messages to condense. Reply with one updated summary that replaces both.

{_RULES}"""


def render_message(msg: Message, limit: int = MAX_RENDERED_CHARS) -> str:
    """One message as plain text for the summarizer, each part at most ``limit`` characters."""
    lines: list[str] = []
    if msg.role == "tool":
        label = f"TOOL RESULT ({msg.name})" if msg.name else "TOOL RESULT"
        lines.append(f"{label}:\n{_clip(msg.content, limit)}")
    else:
        if msg.content:
            lines.append(f"{msg.role.upper()}: {_clip(msg.content, limit)}")
        for call in msg.tool_calls or []:
            function = call.get("function") or {}
            args = _clip(_compact_args(function.get("arguments", "")), limit)
            lines.append(f"TOOL CALL {function.get('name', '?')}: {args}")
    return "\n".join(lines)


def render_messages(messages: list[Message], limit: int = MAX_RENDERED_CHARS) -> str:
    return "\n\n".join(text for text in (render_message(m, limit) for m in messages) if text)


def absorb_prompt(summary: str, exchange: list[Message], *, strict: bool = False) -> list[dict[str, str]]:
    rendered = render_messages(exchange, limit=STRICT_RENDERED_CHARS if strict else MAX_RENDERED_CHARS)
    task = "Reply with the updated summary."
    if strict:
        task += " Write notes about the exchange into it; do not copy the exchange and do not refuse."
    user = (
        f"Current summary:\n<summary>\n{summary or '(empty: this is the first exchange)'}\n</summary>\n\n"
        f"New exchange:\n<exchange>\n{rendered}\n</exchange>\n\n{task}"
    )
    return [{"role": "system", "content": ABSORB_SYSTEM}, {"role": "user", "content": user}]


def append_prompt(summary: str, exchange: list[Message], *, strict: bool = False) -> list[dict[str, str]]:
    """Append mode: notes about one step; the engine appends them to ``summary``, which the
    model does not see (it would copy it, or hold back what it already says)."""
    rendered = render_messages(exchange, limit=STRICT_RENDERED_CHARS if strict else NOTES_RENDERED_CHARS)
    task = NOTES_TASK_STRICT if strict else NOTES_TASK
    user = f"Step:\n<step>\n{rendered}\n</step>\n\n{task}"
    return [{"role": "system", "content": NOTES_SYSTEM}, {"role": "user", "content": user}]


# A defrag asked again after one that failed names its length in words: told "at most half
# as long", the 1.5B model wrote pieces back at 77-95% of their size; told a number of words
# (this share of the input's), it met the check in 2 of 3 of the same pieces (at 0.58, 0.77
# and 0.58 of their tokens). Asked for half of a piece instead, it did no better (0 of 6).
DEFRAG_STRICT_WORDS_SHARE = 0.45


def defrag_prompt(summary: str, remaining: list[Message], *, strict: bool = False) -> list[dict[str, str]]:
    parts = [f"Summary to consolidate:\n<summary>\n{summary}\n</summary>"]
    rendered = render_messages(remaining) if remaining else ""
    if remaining:
        parts.append(f"More exchanges to fold in:\n<exchange>\n{rendered}\n</exchange>")
    if strict:
        words = max(20, int(DEFRAG_STRICT_WORDS_SHARE * len(f"{summary} {rendered}".split())))
        parts.append(f"Reply with the consolidated summary in at most {words} words.")
    else:
        parts.append("Reply with the consolidated summary, at most half as long.")
    return [{"role": "system", "content": DEFRAG_SYSTEM}, {"role": "user", "content": "\n\n".join(parts)}]


def batch_prompt(summary: str, messages: list[Message], focus: str | None = None) -> list[dict[str, str]]:
    parts = []
    if summary:
        parts.append(f"Previous summary:\n<summary>\n{summary}\n</summary>")
    parts.append(f"Messages to condense:\n<messages>\n{render_messages(messages)}\n</messages>")
    if focus:
        parts.append(f"Give most room to what concerns: {focus}")
    parts.append("Reply with the updated summary.")
    return [{"role": "system", "content": BATCH_SYSTEM}, {"role": "user", "content": "\n\n".join(parts)}]


def _compact_args(arguments: str) -> str:
    """Tool arguments as compact JSON when they parse, else as given."""
    try:
        return json.dumps(load_json(arguments), ensure_ascii=False, separators=(",", ":"))
    except (TypeError, ValueError):
        return str(arguments)


def _clip(text: str, limit: int = MAX_RENDERED_CHARS) -> str:
    if len(text) <= limit:
        return text
    keep = limit // 2
    return f"{text[:keep]}\n[... {len(text) - 2 * keep} characters elided ...]\n{text[-keep:]}"
