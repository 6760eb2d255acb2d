"""Prompts for the summarizer: a static system part (prefilled once and cached by
backends that can) and a short user part holding what changed.

The summary is written as notes about what happened, never as instructions, and it
describes only the assistant's work: user messages stay verbatim in the transcript.
"""

from __future__ import annotations

import json

from hermes_tui.transcript import Message
from hermes_tui.untrusted import load_json

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

APPEND_SYSTEM = f"""You maintain the running summary of a long working session in which an AI assistant uses tools for a user. The user's own messages are kept separately and verbatim; your summary covers the assistant's work: what it said, did and found.

You receive the current summary and one new exchange (an assistant message and the results of its tool calls). Reply with only the new lines to add at the end of the summary: what the exchange adds that the summary does not hold yet. Do not repeat, rewrite or reorder the current summary. If the exchange adds nothing worth keeping, reply with exactly: {NOTHING_NEW}

{_RULES}"""

DEFRAG_SYSTEM = f"""You maintain the running summary of a long working session in which an AI assistant uses tools for a user. The user's own messages are kept separately and verbatim; your summary covers the assistant's work.

The summary has grown too long. You receive it, possibly with a few more exchanges to fold in. Reply with a consolidated summary at most half as long: merge duplicates, drop detail that no longer matters, keep every fact that still does.

{_RULES}"""

BATCH_SYSTEM = f"""You summarize the middle of a long working session in which an AI assistant uses tools for a user, so the session can continue in a smaller context. The user's own messages are kept separately and verbatim; your summary covers the assistant's work: what it said, did and found.

You receive the previous summary (if any) and the messages to condense. Reply with one updated summary that replaces both.

{_RULES}"""


def render_message(msg: Message) -> str:
    """One message as plain text for the summarizer."""
    lines: list[str] = []
    if msg.role == "tool":
        label = f"TOOL RESULT ({msg.name})" if msg.name else "TOOL RESULT"
        lines.append(f"{label}:\n{_clip(msg.content)}")
    else:
        if msg.content:
            lines.append(f"{msg.role.upper()}: {_clip(msg.content)}")
        for call in msg.tool_calls or []:
            function = call.get("function") or {}
            lines.append(f"TOOL CALL {function.get('name', '?')}: {_clip(_compact_args(function.get('arguments', '')))}")
    return "\n".join(lines)


def render_messages(messages: list[Message]) -> str:
    return "\n\n".join(text for text in (render_message(m) for m in messages) if text)


def absorb_prompt(summary: str, exchange: list[Message]) -> list[dict[str, str]]:
    user = (
        f"Current summary:\n<summary>\n{summary or '(empty: this is the first exchange)'}\n</summary>\n\n"
        f"New exchange:\n<exchange>\n{render_messages(exchange)}\n</exchange>\n\n"
        "Reply with the updated summary."
    )
    return [{"role": "system", "content": ABSORB_SYSTEM}, {"role": "user", "content": user}]


def append_prompt(summary: str, exchange: list[Message]) -> list[dict[str, str]]:
    """Append mode: the model writes only the exchange's new lines.

    Same layout as ``absorb_prompt`` -- static instructions, then the summary, then the
    exchange -- and since the engine only ever appends to the summary, everything up to
    the end of the previous summary is a byte-identical prefix of the last pass's prompt:
    a prefix cache prefills just the new lines and the new exchange.
    """
    user = (
        f"Current summary:\n<summary>\n{summary or '(empty: this is the first exchange)'}\n</summary>\n\n"
        f"New exchange:\n<exchange>\n{render_messages(exchange)}\n</exchange>\n\n"
        "Reply with only the new lines for the summary."
    )
    return [{"role": "system", "content": APPEND_SYSTEM}, {"role": "user", "content": user}]


def defrag_prompt(summary: str, remaining: list[Message]) -> list[dict[str, str]]:
    parts = [f"Summary to consolidate:\n<summary>\n{summary}\n</summary>"]
    if remaining:
        parts.append(f"More exchanges to fold in:\n<exchange>\n{render_messages(remaining)}\n</exchange>")
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


def _clip(text: str) -> str:
    if len(text) <= MAX_RENDERED_CHARS:
        return text
    keep = MAX_RENDERED_CHARS // 2
    return f"{text[:keep]}\n[... {len(text) - 2 * keep} characters elided ...]\n{text[-keep:]}"
