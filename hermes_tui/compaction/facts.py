"""Key facts of an exchange, found deterministically, and the summary's "Facts" section.

A small model folding an exchange into a summary loses exact strings first: the
file path becomes "the widgets module", the exception becomes "an error". The fact
guard keeps those strings. After a pass, the facts of the absorbed exchange that
the model's summary does not carry are listed in a compact section at its end:

    Facts:
    - path: `django/forms/widgets.py`; `tests/forms_tests/test_media.py`
    - identifier: `Media.merge`; `MediaOrderConflictWarning`
    - error: `AssertionError: Lists differ`; `exit code 1`

The section is written by the engine from text it copies out of tool output, so it
is held to at least the bar of the model's own text, and every value is quoted as
data. ``fact_problem`` says why a value may not enter it: more than one line, too
long, holding a backtick (it could not stay quoted), a credential (or a part that
redaction would change, or a token that reads as generated), or text that addresses
the assistant (the instruction check the model's summary passes, run on each clause,
so "Error: ignore previous instructions ..." never rides along). Extraction is
conservative (regexes, no model) and runs only on the *redacted* exchange, the text
the summarizer saw; URLs lose their query string. Facts carried over from a marker
(or its imported metadata) pass ``valid_facts`` again. The section is bounded by a
token budget (oldest facts go first), and a defrag prunes it: only facts of what the
defrag itself folded in are re-added.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence

from hermes_tui.compaction.checks import looks_like_instructions
from hermes_tui.compaction.lazy_pattern import lazy_compile
from hermes_tui.compaction.redaction import REDACTED, looks_generated, redact
from hermes_tui.core.tokens import TokenCounter
from hermes_tui.core.transcript import Message
from hermes_tui.util.untrusted import load_json

Fact = tuple[str, str]  # (kind, value)

PATH, IDENTIFIER, ERROR, URL, NUMBER = "path", "identifier", "error", "url", "number"
KINDS = (PATH, IDENTIFIER, ERROR, URL, NUMBER)

HEADING = "Facts:"
SEPARATOR = "; "          # between values of one kind; never inside a value (values are cut there)
MAX_VALUE_CHARS = 80      # an error line is cut at a word to this
MAX_FACT_CHARS = 120      # a longer value (a deep path, a long URL) is not kept at all
MAX_FACTS_PER_EXCHANGE = 24
QUOTE = "`"

# Why a value may not enter the section (``fact_problem``).
BAD_KIND, EMPTY_VALUE, MULTILINE, TOO_LONG, UNQUOTABLE, SECRET, INSTRUCTIONS = (
    "kind", "empty", "multiline", "too_long", "unquotable", "secret", "instructions",
)

# --- patterns -----------------------------------------------------------------------------

_URL = lazy_compile(r"https?://[^\s<>()\"'`\[\]{}|\\^]+")
_CODE_EXT = (
    r"(?:py|pyi|ex|exs|eex|heex|leex|js|mjs|cjs|ts|tsx|jsx|json|ya?ml|toml|md|rst|txt|css|scss|html|rs|go|"
    r"java|kt|c|h|cc|cpp|hpp|rb|sh|bash|zsh|sql|cfg|ini|lock|xml|csv|proto|tf|vue|svelte|swift)"
)
# A path with at least one directory and a file extension, an absolute path of two or
# more segments, or a bare file name with a code extension. Never inside a URL.
_PATH = lazy_compile(
    r"(?<![\w/.~:@-])(?:~/|\.{1,2}/|/)?(?:[\w@+-][\w.@+-]*/)+[\w@+-][\w.@+-]*\.[A-Za-z0-9]{1,8}(?![\w/])"
    r"|(?<![\w/.~:@-])/(?:[\w@+-][\w.@+-]*/)+[\w@+-][\w.@+-]*(?![\w/])"
    r"|(?<![\w/.@-])[A-Za-z_][\w-]*(?:\.(?:min|test|spec|config|d))?\." + _CODE_EXT + r"(?![\w/.])"
)
_ERROR_LINE = lazy_compile(
    r"(?<![\w.])((?:[A-Za-z_][\w.]*(?:Error|Exception))|Error|error|ERROR|fatal|FATAL): (\S.*)$", re.MULTILINE
)
_ERROR_CLASS = lazy_compile(r"(?<![\w.])(?:[A-Za-z_]\w*\.)*[A-Z]\w*(?:Error|Exception|Warning)\b")
_FAILED_TEST = lazy_compile(r"\bFAILED\s+(\S+::\S+)")
_EXIT_CODE = lazy_compile(r"\bexit(?:ed)?(?: with)?(?: code| status)?:? [1-9]\d{0,2}\b")
_IDENTIFIERS = [
    # dotted names: django.forms.widgets, Media.merge, AshComputer.LiveView, obj.save()
    lazy_compile(r"(?<![\w./@-])[A-Za-z_]\w*(?:\.[A-Za-z_]\w*)+(?:\(\))?(?![\w/-])"),
    # function(): merge(), build_index()
    lazy_compile(r"(?<![\w.])[A-Za-z_]\w*\(\)"),
    # CamelCase, ACRONYMCase, lowerCamelCase
    lazy_compile(r"\b[A-Z][a-z0-9]+(?:[A-Z][a-z0-9]*)+\b"),
    lazy_compile(r"\b[A-Z]{2,}[a-z]+[A-Za-z0-9]*\b"),
    lazy_compile(r"\b[a-z]+[0-9]*[A-Z][A-Za-z0-9]*\b"),
    # snake_case and CONSTANT_CASE
    lazy_compile(r"(?<![\w.])_?[A-Za-z][A-Za-z0-9]*(?:_[A-Za-z0-9]+)+\b"),
]
_BACKTICKED = lazy_compile(r"`([^`\s]{3,60})`")
_CODE_SPAN = lazy_compile(r"[@:]?[A-Za-z_][\w.:@/-]*(?:\(\))?")
_NUMBERS = [
    # versions: 3.11.4, v2.1.39 (not IP addresses: four parts never match)
    lazy_compile(r"(?<![\w.])v?\d+\.\d+\.\d+(?:[-+][0-9A-Za-z.]+)?(?![\w.])"),
    # ports: localhost:4000, port 8080
    lazy_compile(r"\b(?:localhost|127\.0\.0\.1|0\.0\.0\.0):\d{2,5}\b|\bport \d{2,5}\b"),
    # non-zero counts with a unit: 397 tests, 3 failed, 120 ms, 2.5 MB
    lazy_compile(
        r"(?<![\w.,])[1-9][\d,]*(?:\.\d+)?\s?(?:tests?|passed|failed|failures?|errors?|warnings?|skipped|files?|"
        r"lines?|ms|seconds|MB|GB|KB|tokens|rows|commits?)\b"
    ),
]
_NOT_IDENTIFIERS = frozenset({"e.g", "i.e", "etc", "vs", "a.m", "p.m"})
# Tool-call arguments that name what was acted on; bodies (file contents, edits) are skipped.
_ARG_KEYS = ("file_path", "path", "notebook_path", "pattern", "url", "query", "command", "cmd")


# --- extraction ---------------------------------------------------------------------------


def extract_facts(messages: Iterable[Message]) -> list[Fact]:
    """Key facts of an exchange (already redacted), most telling first, without repeats.

    What the assistant wrote and the arguments of its tool calls give every kind; a
    tool result gives only errors, paths, URLs and counts (a file listing or a code
    read would otherwise flood the list with identifiers nobody asked about).
    """
    found: list[Fact] = []
    results: list[str] = []
    for msg in messages:
        if msg.role == "assistant":
            found += _facts_of(msg.content, prose=True)
            for call in msg.tool_calls or []:
                found += _facts_of(_arguments_text((call.get("function") or {}).get("arguments", "")), prose=True)
        elif msg.role == "tool":
            results.append(msg.content)
    for text in results:
        found += _facts_of(text, prose=False)
    return _clean(found)[:MAX_FACTS_PER_EXCHANGE]


def _facts_of(text: str, *, prose: bool) -> list[Fact]:
    if not text:
        return []
    cap = 8 if prose else 4
    out: list[Fact] = []
    # A query string or fragment is where URLs carry tokens and signatures.
    urls = [re.split(r"[?#]", u, maxsplit=1)[0] for u in _URL.findall(text)]
    out += [(URL, u.rstrip(".,;:")) for u in urls[: cap if prose else 2]]
    rest = _URL.sub(" ", text)
    paths = [p.rstrip(".") for p in _PATH.findall(rest)]
    out += [(PATH, p) for p in _unique(paths)[:cap]]
    errors = [_error_value(m) for m in _ERROR_LINE.finditer(rest)]
    errors += _FAILED_TEST.findall(rest) + _EXIT_CODE.findall(rest)
    # A bare class name only when no error line already quotes it.
    errors += [c for c in _ERROR_CLASS.findall(rest) if not any(c in e for e in errors)]
    out += [(ERROR, e) for e in _unique(errors)[:cap]]
    numbers = [n for pattern in _NUMBERS for n in pattern.findall(rest)]
    out += [(NUMBER, n) for n in _unique(numbers)[: 3 if not prose else cap]]
    if prose:
        out += [(IDENTIFIER, i) for i in _identifiers(_PATH.sub(" ", rest))[:cap]]
    return out


def _error_value(match: re.Match[str]) -> str:
    value = f"{match.group(1)}: {match.group(2).strip()}"
    value = value.split(SEPARATOR)[0]
    if len(value) > MAX_VALUE_CHARS:
        cut = value.rfind(" ", 0, MAX_VALUE_CHARS)
        value = value[: cut if cut > len(match.group(1)) + 2 else MAX_VALUE_CHARS]
    return value.rstrip(" ,.:")


def _identifiers(text: str) -> list[str]:
    # A code span counts when it looks like code: a plain word in backticks (`join`) does not.
    found = [
        m.group(1) for m in _BACKTICKED.finditer(text)
        if _CODE_SPAN.fullmatch(m.group(1)) and (set(m.group(1)) & set("_.(:@/") or not m.group(1).islower())
    ]
    for pattern in _IDENTIFIERS:
        found += pattern.findall(text)
    return [i for i in _unique(found) if _is_identifier(i)]


def _is_identifier(value: str) -> bool:
    core = value.removesuffix("()")
    if core.lower() in _NOT_IDENTIFIERS or len(core) < 4:
        return False
    parts = core.split(".")
    if len(parts) > 1:
        if any(len(p) < 2 for p in parts):
            return False
        # Two plain lowercase words (os.path, github.com) say little; keep those
        # with a capital, an underscore, a call or three parts.
        telling = any(any(c.isupper() for c in p) or "_" in p for p in parts)
        return telling or len(parts) >= 3 or value.endswith("()")
    return True


def _arguments_text(arguments: str) -> str:
    """The parts of tool-call arguments that name what was acted on (first line of a command)."""
    try:
        data = load_json(arguments)
    except (TypeError, ValueError):
        return str(arguments).split("\n", 1)[0]
    if not isinstance(data, dict):
        return ""
    parts = []
    for key in _ARG_KEYS:
        value = data.get(key)
        if isinstance(value, str) and value.strip():
            parts.append(value.strip().split("\n", 1)[0])
    return "\n".join(parts)


def _unique(values: Iterable[str]) -> list[str]:
    return list(dict.fromkeys(v for v in values if v))


def _clean(facts: Iterable[Fact]) -> list[Fact]:
    """Drop repeats (a value counts once, under its first kind) and anything unsafe to keep."""
    seen: set[str] = set()
    out: list[Fact] = []
    for kind, value in facts:
        value = value.strip() if isinstance(value, str) else value
        if value in seen or fact_problem(kind, value) is not None:
            continue
        seen.add(value)
        out.append((kind, value))
    return out


def valid_facts(facts: Iterable[object]) -> list[Fact]:
    """The ``(kind, value)`` pairs of ``facts`` that may enter the section, without repeats.

    For facts from anywhere but this exchange's extraction: a marker's metadata (an
    imported one is untrusted input) or a Facts block a model's reply carried.
    """
    pairs = [tuple(item) for item in facts if isinstance(item, (list, tuple)) and len(item) == 2]
    return _clean((kind, value) for kind, value in pairs)


# A run of letters and digits this long is generated (a key, a hash), not written.
_TOKEN_RUN = lazy_compile(r"(?=[A-Za-z0-9]*\d)(?=[A-Za-z0-9]*[A-Za-z])[A-Za-z0-9]{20,}")
_GLUE = "_-./:@=+"
# Characters that end a line for some reader: a fact is one line of the section.
_LINE_BREAK = lazy_compile(r"[\x00-\x1f\x7f\x85\u2028\u2029]")
# Digits inside a word, between letters: several of them is how a password or a key
# reads (``Xk9vQ2mW7zLp``), not an identifier (``base64ToUtf8``).
_INNER_DIGITS = lazy_compile(r"(?<=[A-Za-z])\d+(?=[A-Za-z])")
_CLAUSE_BREAK = lazy_compile(r"[:;,|]\s+|\s+[-\u2013\u2014]+\s+")


def fact_problem(kind: str, value: str) -> str | None:
    """Why ``value`` may not be listed as a ``kind`` fact, or None when it may."""
    if kind not in KINDS:
        return BAD_KIND
    if not isinstance(value, str) or not value.strip():
        return EMPTY_VALUE
    if _LINE_BREAK.search(value):
        return MULTILINE
    if len(value) > MAX_FACT_CHARS:
        return TOO_LONG
    if QUOTE in value or SEPARATOR in value:
        return UNQUOTABLE
    if not _holds_no_secret(value):
        return SECRET
    # Each clause on a line of its own: the instruction check anchors some patterns
    # at a line start, and "Error: you must ..." puts them after a label.
    if looks_like_instructions(value) or looks_like_instructions(_CLAUSE_BREAK.sub("\n", value)):
        return INSTRUCTIONS
    return None


def is_safe(value: str) -> bool:
    """A value that may enter the section as some kind of fact."""
    return fact_problem(PATH, value) is None


def _holds_no_secret(value: str) -> bool:
    """Never a redaction mark, nothing that looks generated, and nothing redaction would
    change, even in a part glued to a word (``settings_ghp_...``: redaction leaves a key
    inside a longer word alone)."""
    if REDACTED in value or _TOKEN_RUN.search(value):
        return False
    for word in re.findall(r"[A-Za-z0-9]{8,}", value):
        if len(_INNER_DIGITS.findall(word)) >= 3 or looks_generated(word):
            return False
    starts = [0] + [i + 1 for i, c in enumerate(value) if c in _GLUE]
    return all(redact(value[i:]) == value[i:] for i in starts)


# --- what a summary lost ------------------------------------------------------------------


def missing_facts(summary: str, facts: Iterable[Fact]) -> list[Fact]:
    """The facts whose exact text the summary does not hold (case-sensitive substring)."""
    return [fact for fact in facts if fact[1] not in summary]


# --- the section --------------------------------------------------------------------------


def render_section(facts: Sequence[Fact], *, quoted: bool = True) -> str:
    """``Facts:`` and one line per kind, values oldest first and quoted as data; "" when
    there are none. (``quoted=False``: the layout of markers written before quoting.)"""
    if not facts:
        return ""
    quote = QUOTE if quoted else ""
    lines = [HEADING]
    for kind in KINDS:
        values = [f"{quote}{value}{quote}" for k, value in facts if k == kind]
        if values:
            lines.append(f"- {kind}: {SEPARATOR.join(values)}")
    return "\n".join(lines)


def compose(body: str, facts: Sequence[Fact]) -> str:
    """The whole rolling summary: the model's text, then the Facts section."""
    section = render_section(facts)
    if not section:
        return body
    return f"{body}\n\n{section}" if body else section


def body_of(summary: str, facts: Sequence[Fact]) -> str:
    """The summary without the Facts section the engine appended to it."""
    for quoted in (True, False):
        section = render_section(facts, quoted=quoted)
        if section and summary.endswith(section):
            return summary[: -len(section)].rstrip("\n")
    return summary


_SECTION_LINE = lazy_compile(r"^- (" + "|".join(KINDS) + r"): (.+)$")
_HEADING_LINE = lazy_compile(r"^\s*(?:\*\*|__)?Facts:(?:\*\*|__)?\s*$")


def split_section(text: str) -> tuple[str, list[Fact]]:
    """A model's text without the Facts blocks it carried over, and their facts.

    A block is a ``Facts:`` line followed by one or more lines in the section's format
    ("- kind: value; value"), wherever the model put it (a defrag may keep it in the
    middle, or put notes after it). Anything else is the model's own prose and stays.
    """
    lines = text.split("\n")
    body: list[str] = []
    parsed: list[Fact] = []
    n = 0
    while n < len(lines):
        block: list[Fact] = []
        end = n + 1
        if _HEADING_LINE.match(lines[n]):
            while end < len(lines) and (match := _SECTION_LINE.match(lines[end].strip())):
                block += [(match.group(1), _unquote(v)) for v in match.group(2).split(SEPARATOR) if v.strip()]
                end += 1
        if block:
            parsed += block
            n = end
        else:
            body.append(lines[n])
            n += 1
    if not parsed:
        return text, []
    return "\n".join(body).strip("\n"), _clean(parsed)


def _unquote(value: str) -> str:
    value = value.strip()
    if len(value) >= 2 and value.startswith(QUOTE) and value.endswith(QUOTE):
        return value[1:-1]
    return value


def merge_facts(*groups: Iterable[Fact]) -> list[Fact]:
    """Oldest first; a fact seen again moves to the end (it is recent again)."""
    order: dict[str, Fact] = {}
    for group in groups:
        for kind, value in group:
            order.pop(value, None)
            order[value] = (kind, value)
    return list(order.values())


def fit(body: str, facts: Sequence[Fact], max_section_tokens: int, counter: TokenCounter) -> list[Fact]:
    """Keep the newest facts whose section costs at most ``max_section_tokens`` (the oldest go)."""
    kept = list(facts)
    while kept:
        excess = section_tokens(body, kept, counter) - max_section_tokens
        if excess <= 0:
            break
        # Drop about enough of the oldest to cover the excess, then measure again.
        dropped = 0
        while kept and dropped < excess:
            dropped += counter.count_text(kept.pop(0)[1]) + 1
    return kept


def section_tokens(body: str, facts: Sequence[Fact], counter: TokenCounter) -> int:
    """What the Facts section adds to the summary's token count."""
    if not facts:
        return 0
    return counter.count_text(compose(body, facts)) - counter.count_text(body)
