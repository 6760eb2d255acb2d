"""Acceptance checks on what a summarizer returns.

Small instruct models wrap a summary in things that are not the summary (a
``<think>`` block, "Here is the updated summary:", a code fence); ``clean_summary``
strips those and nothing else. The ``*_problem`` functions then decide whether the
cleaned text may replace what it summarizes. A rejected summary counts as a failed
pass and the transcript stays as it was.
"""

from __future__ import annotations

import re

from hermes_tui.compaction.lazy_pattern import lazy_compile

# Why a summary was rejected (telemetry carries these, never the text).
EMPTY = "empty"                # nothing, or no words at all
CUT_OFF = "cut_off"            # generation stopped at the token limit: the summary is truncated
GROWN = "grown"                # larger than the exchange and summary it would replace
INSTRUCTIONS = "instructions"  # addresses the assistant or carries a prompt injection
NOT_SHRUNK = "not_shrunk"      # a defrag that did not get meaningfully smaller
REFUSED = "refused"            # the model declined ("I'm sorry, but I can't assist with that.")
COPIED = "copied"              # the exchange (or the summary) written back instead of notes about it
TOO_SHORT = "too_short"        # a scrap: too little to stand for what it replaces
MISSED = "missed"              # "nothing new" for an exchange whose facts the summary does not hold
# (append mode: GROWN means the new lines are larger than the exchange they replace)
# Every reason says the model misread the task or was cut short, and asking the same again
# gets the same answer: a retry changes the prompt (micro.py).

DEFRAG_MAX_RATIO = 0.6

# --- cleaning -------------------------------------------------------------------------

_THINK_BLOCK = lazy_compile(r"<think(?:ing)?>.*?</think(?:ing)?>", re.DOTALL | re.IGNORECASE)
_THINK_OPEN = lazy_compile(r"^\s*<think(?:ing)?>", re.IGNORECASE)
_THINK_CLOSE = lazy_compile(r"</think(?:ing)?>", re.IGNORECASE)

# A short line that only announces the summary: "Here is the updated summary:",
# "Sure! Here's the revised rolling summary:", "Updated summary:", "**Summary:**".
_INTERJECTION = r"(?:sure|certainly|okay|ok|of course|absolutely|got it|alright|great)[!.,]*"
_ADJECTIVES = r"(?:(?:updated|revised|new|merged|consolidated|compact|condensed|rolling|running|defragmented|final|current|complete)[ ,]+){0,3}"
_PREAMBLE = lazy_compile(
    r"(?:" + _INTERJECTION + r"\s*)?"
    r"[*_]{0,2}"
    r"(?:"
    r"(?:here(?:'s|’s| is| are)|below is|this is)\s+(?:the\s+|your\s+|an?\s+|my\s+)?" + _ADJECTIVES + r"summary\b[^\n:]{0,60}"
    r"|(?:the\s+)?" + _ADJECTIVES + r"summary"
    r")"
    r"[*_]{0,2}\s*[:.]?[*_]{0,2}\s*",
    re.IGNORECASE,
)
_INTERJECTION_LINE = lazy_compile(r"(?:" + _INTERJECTION + r")\s*", re.IGNORECASE)

_FENCE_OPEN = lazy_compile(r"\A```[ \t]*([A-Za-z0-9_+\-]*)[ \t]*\n")
_FENCE_CLOSE = lazy_compile(r"\n```[ \t]*\Z")
_FENCE_LINE = lazy_compile(r"^[ \t]*```", re.MULTILINE)
_DOCUMENT_LANGS = {"", "markdown", "md", "text", "txt", "plaintext", "plain"}

_SUMMARY_TAGS = lazy_compile(r"\A<summary>\s*(.*?)\s*</summary>\Z", re.DOTALL | re.IGNORECASE)


def clean_summary(text: str) -> str:
    """Strip the wrapping a small model puts around a summary; never touch the body."""
    text = _strip_thinking(text).strip()
    text = _strip_preamble(text)
    text = _strip_fence(text)
    text = _strip_summary_tags(text)
    # A preamble may sit inside the fence or the tags.
    text = _strip_preamble(text)
    return _strip_speaker_label(text.strip()).strip()


def _strip_thinking(text: str) -> str:
    text = _THINK_BLOCK.sub("", text)
    if _THINK_OPEN.match(text):
        # A reasoning block that never closed: the model ran out of tokens before
        # writing any summary.
        return ""
    close = _THINK_CLOSE.search(text)
    if close:
        # Templates that open the reasoning block in the prompt leave only its end.
        text = text[close.end():]
    return text


def _strip_preamble(text: str) -> str:
    for _ in range(2):  # "Sure!" and "Here is the summary:" may be on separate lines
        first, newline, rest = text.partition("\n")
        if not newline or not rest.strip():
            break
        line = first.strip()
        if _INTERJECTION_LINE.fullmatch(line) or (len(line) <= 100 and _PREAMBLE.fullmatch(line) and _announces(line)):
            text = rest.lstrip("\n").lstrip()
        else:
            break
    return text


def _announces(line: str) -> bool:
    """A preamble line ends with a colon or is a bare "Summary"-style label."""
    bare = line.strip("*_ ").rstrip(":.").strip("*_ ")
    return line.rstrip("*_ ").endswith(":") or bare.lower().endswith("summary")


# A reply that opens with a speaker label, "Assistant: The assistant found that ...": the
# prompts show the exchange as labelled lines, and Qwen2.5-Coder 0.5B echoed the label in
# front of its notes (recorded in tests/compaction/fixtures/real_answers.json). In the third
# person that is a summary behind a label, and the label goes. In the first person
# ("Assistant: I made a mistake ... I will correct this") it is a turn of the dialogue, not
# notes about one: the label stays, and the instruction check rejects the reply for it.
_SPEAKER_LABEL = lazy_compile(r"\A(?:\*\*|__)?assistant(?:\*\*|__)?[ \t]*:(?:\*\*|__)?[ \t]*", re.IGNORECASE)
_FIRST_PERSON = lazy_compile(r"\b(?:I(?:'m|'ll|'ve|'d)?|(?i:my|me|we|we'll|we're|we've|let's|let me|our))\b")


def _strip_speaker_label(text: str) -> str:
    label = _SPEAKER_LABEL.match(text)
    if label is None or _FIRST_PERSON.search(text, label.end()):
        return text
    return text[label.end():]


def _strip_fence(text: str) -> str:
    opening = _FENCE_OPEN.match(text)
    closing = _FENCE_CLOSE.search(text)
    if not opening or not closing or closing.start() < opening.end() - 1:
        return text
    inner = text[opening.end(): closing.start()]
    # Fences inside mean the outer ones may open and close two separate blocks;
    # unwrap only a fence that announces a whole document.
    if _FENCE_LINE.search(inner) and opening.group(1).lower() not in _DOCUMENT_LANGS - {""}:
        return text
    return inner.strip("\n")


def _strip_summary_tags(text: str) -> str:
    # The prompts show the summary between <summary> tags; models echo them.
    match = _SUMMARY_TAGS.match(text)
    return match.group(1) if match else text


# --- acceptance -------------------------------------------------------------------------


def summary_problem(
    text: str, *, finish_reason: str | None, new_tokens: int, replaced_tokens: int, source: str = ""
) -> str | None:
    """Why an absorb summary is rejected, or None to accept it. ``text`` is cleaned; ``source``
    is the material it summarizes, as the model saw it (a copy of it is not a summary)."""
    problem = _basic_problem(text, finish_reason) or _misread(text, source)
    if problem:
        return problem
    if new_tokens > replaced_tokens:
        return GROWN
    if looks_like_instructions(text):
        return INSTRUCTIONS
    return None


def append_problem(
    text: str, *, added: str, finish_reason: str | None, new_tokens: int, exchange_tokens: int,
    source: str = "", facts_lacking: bool = False,
) -> str | None:
    """Why an append-mode reply is rejected, or None. ``text`` is the cleaned reply,
    ``added`` what it adds (``new_lines``) and ``new_tokens`` the size of that; ``source``
    the exchange as the model saw it.

    An empty reply is a failure (the model broke). "NOTHING NEW", or lines the summary
    already holds, is a valid answer only for an exchange that adds nothing: when the
    summary lacks facts of the exchange (``facts_lacking``) it is a miss.
    """
    # A copy is judged on what the reply adds: lines the summary already holds are dropped.
    problem = _basic_problem(text, finish_reason) or _misread(text, "") or _misread(added, source)
    if problem:
        return problem
    if not added.strip():
        return MISSED if facts_lacking else None
    if new_tokens > exchange_tokens:
        return GROWN
    if _scrap(added):
        return TOO_SHORT
    if looks_like_instructions(added):
        return INSTRUCTIONS
    return None


_NOTHING_NEW = lazy_compile(r"[\W_]*nothing new[\W_]*", re.IGNORECASE)


# Notes a step may add: the prompt asks for 1 to 4. Past that a small model repeats itself or
# invents (the 0.5B wrote "installed pytz" twelve times over, then ran out of tokens).
MAX_NEW_LINES = 4


def new_lines(text: str, summary: str) -> str:
    """What an append-mode reply adds to ``summary``: its first ``MAX_NEW_LINES`` lines that
    are not already there.

    The "NOTHING NEW" answer adds nothing. A model that echoes the summary before its
    new lines (a literal-minded one will) has the echo cut off, and a line the summary
    (or the reply itself, above it) already holds word for word is dropped, so the
    summary never repeats itself.
    """
    if summary and text.startswith(summary):
        text = text[len(summary):]
    held = {line.strip() for line in summary.splitlines() if line.strip()}
    kept: list[str] = []
    for line in text.split("\n"):
        stripped = line.strip()
        if stripped and (stripped in held or _NOTHING_NEW.fullmatch(line)):
            continue
        if stripped and sum(1 for k in kept if k.strip()) == MAX_NEW_LINES:
            break
        held.add(stripped)
        kept.append(line)
    added = "\n".join(kept).strip("\n")
    return added if added.strip() else ""


def defrag_problem(
    text: str, *, finish_reason: str | None, new_tokens: int, input_tokens: int, max_ratio: float = DEFRAG_MAX_RATIO,
    source: str = "", judge_scraps: bool = True,
) -> str | None:
    """Why a defrag result is rejected, or None. It must shrink to ``max_ratio`` of its input,
    and keep at least ``DEFRAG_MIN_SHARE`` of it: a few words cannot stand for a summary."""
    problem = _basic_problem(text, finish_reason) or _misread(text, "")
    if problem:
        return problem
    if new_tokens > max_ratio * input_tokens:
        return NOT_SHRUNK
    if judge_scraps and new_tokens < min(DEFRAG_MIN_TOKENS, DEFRAG_MIN_SHARE * input_tokens):
        return TOO_SHORT
    if looks_like_instructions(text):
        return INSTRUCTIONS
    return None


# A defrag keeps at least this share of its input, up to this many tokens: 13 tokens for a
# 5,891-token summary is a scrap, not a consolidation.
DEFRAG_MIN_SHARE = 0.02
DEFRAG_MIN_TOKENS = 100


def _misread(text: str, source: str) -> str | None:
    if is_refusal(text):
        return REFUSED
    if source and is_copy(text, source):
        return COPIED
    return None


def _scrap(added: str) -> bool:
    """New lines with fewer than ``MIN_WORDS`` words: "- The", "Summary", a lone path."""
    return len(_WORD.findall(added)) < MIN_WORDS


def _basic_problem(text: str, finish_reason: str | None) -> str | None:
    if not text or not text.strip() or not any(c.isalpha() for c in text):
        return EMPTY
    if finish_reason == "length":
        return CUT_OFF
    return None


# --- instructions -----------------------------------------------------------------------
#
# A summary describes what happened, in the third person ("The assistant ran the
# tests", "User requirement: do not add a new helper"). Output that talks *to* the
# assistant ("You must ...", "Ignore previous instructions") or imitates a chat
# transcript would be read by the main model as instructions, so it is rejected.
# Patterns anchored at a line start allow a list bullet, a heading mark or bold.

_LINE_START = r"(?:^|(?<=[.!?])[ \t]+)[ \t]*(?:[-*•+>]|\d+[.)]|#+)?[ \t]*(?:\*\*|__)?[ \t]*"
_ALERT = r"(?:(?:important|note to (?:the )?(?:assistant|ai|model)|attention|system|override|reminder)[ \t]*[:!-][ \t]*)?"

_INSTRUCTION_PATTERNS = [
    # "You must ...", "You should now ...", "You need to ...", "You are required to ...",
    # "You will now ...", "IMPORTANT: you must ..."
    _LINE_START + _ALERT + r"you(?:"
    r"[ \t]+(?:must|should|shall|need[ \t]+to|have[ \t]+to|may[ \t]+not|cannot|can(?:no|')t)"
    r"|[ \t]+are[ \t]+(?:now|required|instructed|expected|supposed|not[ \t]+(?:allowed|permitted)|to)"
    r"|(?:[ \t]+will|'ll)[ \t]+(?:now|always|never|only)"
    r"|[ \t]+now[ \t]+(?:must|have|need|are)"
    r")\b",
    # "You are a helpful assistant", "You are ChatGPT", "You are an AI"
    _LINE_START + r"you[ \t]+are[ \t]+(?:an?[ \t]+)?(?:[\w-]+[ \t]+){0,3}(?:assistant|ai|chatbot|bot|language[ \t]+model|llm|gpt[\w.-]*|chatgpt|claude)\b",
    # "Ignore all previous instructions", "disregard the above", "forget your rules"
    r"\b(?:ignore|disregard|forget|override)[ \t]+(?:all[ \t]+)?(?:of[ \t]+)?(?:the[ \t]+|your[ \t]+|any[ \t]+|these[ \t]+)?"
    r"(?:previous|prior|above|earlier|preceding|system|original|initial)[ \t]+(?:instructions?|prompts?|rules|directives|guidelines|messages|context)\b",
    r"\b(?:ignore|disregard|forget)[ \t]+(?:all[ \t]+)?(?:of[ \t]+)?(?:your[ \t]+(?:instructions|rules|guidelines|system[ \t]+prompt)|(?:the|everything)[ \t]+above)\b",
    # "Your task is ...", "Your new instructions are ...", "Your role: ..."
    _LINE_START + _ALERT + r"your[ \t]+(?:new[ \t]+|next[ \t]+|real[ \t]+|only[ \t]+|actual[ \t]+)?(?:task|job|role|goal|purpose|instructions?|mission|objective)s?[ \t]*(?:is|are|:|now|will)(?![\w-])",
    # "As an AI ...", "As a large language model ..."
    r"\bas[ \t]+an?[ \t]+(?:ai|artificial[ \t]+intelligence|(?:large[ \t]+)?language[ \t]+model|llm)\b",
    # "Respond with ...", "Respond only in JSON", "Reply only with", "Answer with only", "Output only ..."
    _LINE_START + _ALERT + r"(?:always[ \t]+|only[ \t]+|now[ \t]+)?(?:(?:respond|reply|answer)[ \t]+(?:with|only|in|using|as|to[ \t]+(?:the[ \t]+)?user)|output[ \t]+only)\b",
    # "Do not tell the user", "never reveal this to the user", "without telling the user"
    r"\b(?:do[ \t]+not|don't|never|without)[ \t]+(?:tell|telling|reveal|revealing|mention|mentioning|inform|informing|disclose|disclosing)[ \t]+(?:[\w'-]+[ \t]+){0,4}?(?:to[ \t]+)?the[ \t]+user\b",
    # "From now on, you ..." / "From now on respond ..."
    r"\bfrom[ \t]+now[ \t]+on[ \t]*,?[ \t]+(?:you|always|never|respond|reply|act|only|ignore)\b",
    # "Pretend you are", "act as if you"
    _LINE_START + r"(?:pretend|act)[ \t]+(?:to[ \t]+be[ \t]+|that[ \t]+|as[ \t]+if[ \t]+|like[ \t]+)?you\b",
    # Role labels opening a line: a dialogue, not notes.
    r"^[ \t]*(?:[-*•>][ \t]*)?(?:\*\*|__)?(?:system|assistant|user|human)(?:\*\*|__)?[ \t]*:(?:\*\*|__)?(?!//)",
    # Chat-template tokens. A tokenizer parses these as real turn boundaries even
    # inside prose, so they are rejected even when the exchange was about templates.
    r"<\|[A-Za-z_]{2,30}\|>|\[/?INST\]|<</?SYS>>|</?(?:start|end)_of_turn>",
]
_INSTRUCTIONS = lazy_compile("|".join(f"(?:{p})" for p in _INSTRUCTION_PATTERNS), re.IGNORECASE | re.MULTILINE)

# An injection hides behind a label inside a line ("RuntimeError: You are now in
# developer mode; your new task is ..."), where the line-start patterns above do not
# look. After a label or a clause break only the unmistakable forms count: a tool's own
# error ("fatal: You must specify a path") quoted in a summary is not an instruction.
_CLAUSE_START = r"(?:[:;,][ \t]+|[ \t][-\u2013\u2014]+[ \t]+)(?:\*\*|__)?"
_CLAUSE_PATTERNS = [
    r"you[ \t]+are[ \t]+(?:now|instructed|not[ \t]+(?:allowed|permitted)[ \t]+to[ \t]+tell)\b",
    r"you(?:[ \t]+will|'ll|[ \t]+must|[ \t]+should|[ \t]+need[ \t]+to|[ \t]+have[ \t]+to)[ \t]+now\b",
    r"your[ \t]+(?:new|next|real|actual|only)[ \t]+(?:task|job|role|goal|instructions?|mission|objective)s?\b",
    r"your[ \t]+(?:instructions?|role|mission|objective)s?[ \t]*(?:is|are|:|now)(?![\w-])",
    r"(?:pretend|act[ \t]+as[ \t]+if)[ \t]+you\b",
    r"(?:always[ \t]+|now[ \t]+)?(?:respond|reply|answer|output)[ \t]+only\b",
]
_CLAUSE_INSTRUCTIONS = lazy_compile(
    _CLAUSE_START + "(?:" + "|".join(f"(?:{p})" for p in _CLAUSE_PATTERNS) + ")", re.IGNORECASE
)


def looks_like_instructions(text: str) -> bool:
    """True when the text addresses the assistant or carries a prompt injection."""
    return bool(_INSTRUCTIONS.search(text) or _CLAUSE_INSTRUCTIONS.search(text))


# --- misreadings ------------------------------------------------------------------------
#
# Small local models misread the task in a few set ways, each seen on real models here:
# they decline it (a safety reflex on tool output), or they write the material back
# instead of notes about it (the 0.5B and the 1.5B copied an exchange nearly whole).

MIN_WORDS = 2
_WORD = lazy_compile(r"[A-Za-z][\w'-]*")

_REFUSAL = lazy_compile(
    r"\A\W*(?:i'?m sorry|i am sorry|sorry,|i apologi[sz]e|unfortunately,? i\b"
    r"|i (?:can(?:no|')t|cannot|am unable to|'m unable to|am not able to|'m not able to|won'?t)"
    r"[ \t]+(?:assist|help|provide|comply|do that|fulfil|summari[sz]e|complete|process|continue))",
    re.IGNORECASE,
)
# The whole of a short reply that only declines.
_REFUSAL_ANYWHERE = lazy_compile(
    r"\bi (?:can(?:no|')t|cannot|am unable to|'m unable to) (?:assist|help) with (?:that|this)\b", re.IGNORECASE
)
REFUSAL_MAX_WORDS = 40

COPY_GRAM = 5           # runs of this many words
COPY_SHARE = 0.6        # a reply with this share of its runs found in the material copied it
MIN_COPY_RUNS = 8       # shorter replies are judged by the other checks


def is_refusal(text: str) -> bool:
    """The reply declines the task instead of doing it."""
    head = text.lstrip()[:300]
    if _REFUSAL.match(head):
        return True
    return len(text.split()) <= REFUSAL_MAX_WORDS and bool(_REFUSAL_ANYWHERE.search(text))


def _runs(text: str) -> set[tuple[str, ...]]:
    words = text.lower().split()
    return {tuple(words[i:i + COPY_GRAM]) for i in range(len(words) - COPY_GRAM + 1)}


def copied_share(text: str, source: str) -> float:
    """The share of the reply's runs of ``COPY_GRAM`` words that occur in ``source``."""
    runs = _runs(text)
    return len(runs & _runs(source)) / len(runs) if runs else 0.0


def is_copy(text: str, source: str) -> bool:
    """The reply is mostly the material written back: notes quote a path or an error line,
    a copy carries whole runs of it."""
    runs = _runs(text)
    return len(runs) >= MIN_COPY_RUNS and len(runs & _runs(source)) >= COPY_SHARE * len(runs)
