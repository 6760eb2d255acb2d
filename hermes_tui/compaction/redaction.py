"""Deterministic credential redaction.

Every text is passed through ``redact`` before a summarizer sees it, and the
summarizer's output is passed through it again: a small model told to drop secrets
will still copy one now and then, and a secret in the rolling summary would ride
along in every later request.

Rules run in a fixed order, each one a compiled regex. Two kinds:

* **Shapes** that are secrets wherever they appear: provider keys with a known
  prefix (``sk-``, ``ghp_``, ``AKIA`` ...), JWTs, PEM private keys, ``user:pass@``
  in URLs, Slack webhooks, ``Bearer``/``Basic`` credentials.
* **Assignments** whose key names a secret (``password``, ``token``, ``api_key``
  ...) in shell, env files, YAML, JSON, URL query strings and CLI flags. Only the
  value is replaced. A value that reads as code rather than a literal (a call, an
  attribute access, a subscript, a keyword, a variable named after the key, or a
  bare word in ``key = word``) is left alone, so that ``password = getpass()`` or
  ``token = self._next()`` survive.

Replacement text never matches a rule again, so ``redact`` is idempotent. Nothing
that could hold a backslash or a quote is ever swallowed, so redacting a JSON
string (a tool call's ``arguments``) keeps it valid JSON.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace
from typing import Any, Callable

from hermes_tui.transcript import Message

REDACTED = "[REDACTED]"

# Characters of an opaque token (base64, base64url, hex, ...).
_TOKEN_CHARS = r"A-Za-z0-9\-._~+/"

# --- shapes -----------------------------------------------------------------------

_PEM = re.compile(
    r"(?P<begin>-----BEGIN [A-Z0-9 ]{0,40}PRIVATE KEY( BLOCK)?-----)"
    r"(?P<body>.*?)"
    r"(?P<end>-----END [A-Z0-9 ]{0,40}PRIVATE KEY( BLOCK)?-----)",
    re.DOTALL,
)
# A private key cut off before its END line (truncated tool output): the BEGIN line
# and the base64 lines that follow it.
_PEM_OPEN = re.compile(
    r"(?P<begin>-----BEGIN [A-Z0-9 ]{0,40}PRIVATE KEY( BLOCK)?-----)"
    r"(?P<body>(?:(?:\r?\n|\\n)(?:[A-Za-z0-9+/=]*|[A-Za-z\-]+: [^\n\\]*))+)"
    r"(?!.*-----END)",
    re.DOTALL,
)
_PEM_LEAD = re.compile(r"(?:\s|\\[nr])*")
_PEM_TRAIL = re.compile(r"(?:\s|\\[nr])*\Z")

# scheme://user:password@host  ->  scheme://[REDACTED]@host
_URL_USERINFO = re.compile(
    r"(?P<scheme>://)(?<=[A-Za-z0-9]://)"
    r"(?P<user>[^\s/@:\"'\\<>\[\]]*):(?P<password>[^\s/@\"'\\<>?#]+)@"
)

_SLACK_WEBHOOK = re.compile(
    r"(?P<prefix>\bhooks\.slack\.com/(?:services|workflows|triggers)/)[A-Za-z0-9/_\-]{8,}"
)
_DISCORD_WEBHOOK = re.compile(
    r"(?P<prefix>\bdiscord(?:app)?\.com/api/webhooks/\d{5,}/)[A-Za-z0-9_\-]{20,}"
)

# Keys and tokens with a recognisable prefix. The left guard keeps the prefix from
# matching in the middle of a longer word.
_PREFIXED = re.compile(
    r"(?<![A-Za-z0-9_\-])(?:"
    r"sk-ant-[A-Za-z0-9_\-]{20,}"                                  # Anthropic
    r"|sk-(?:proj-|svcacct-|admin-)?(?=[A-Za-z0-9_\-]*\d)[A-Za-z0-9_\-]{20,}"  # OpenAI
    r"|hf_[A-Za-z0-9]{30,}"                                        # Hugging Face
    r"|gh[pousr]_[A-Za-z0-9]{30,}"                                 # GitHub
    r"|github_pat_[A-Za-z0-9_]{22,}"
    r"|glpat-[A-Za-z0-9_\-]{20,}"                                  # GitLab
    r"|(?:AKIA|ASIA|ABIA|ACCA)[A-Z0-9]{16}(?![A-Za-z0-9])"         # AWS access key id
    r"|xox[abprse]-[A-Za-z0-9\-]{10,}"                             # Slack
    r"|xapp-[A-Za-z0-9\-]{10,}"
    r"|(?:sk|rk)_(?:live|test)_[A-Za-z0-9]{16,}"                   # Stripe
    r"|pk_live_[A-Za-z0-9]{16,}"
    r"|whsec_[A-Za-z0-9]{20,}"
    r"|AIza[0-9A-Za-z_\-]{35,}"                                    # Google API key
    r"|npm_[A-Za-z0-9]{36}"                                        # npm
    r"|pypi-AgE[A-Za-z0-9_\-]{50,}"                                # PyPI
    r"|SG\.[A-Za-z0-9_\-]{16,}\.[A-Za-z0-9_\-]{20,}"               # SendGrid
    r"|gsk_[A-Za-z0-9]{40,}"                                       # Groq
    r"|AGE-SECRET-KEY-1[A-Z0-9]{50,}"                              # age
    r")"
)

_JWT = re.compile(r"(?<![A-Za-z0-9_\-])eyJ[A-Za-z0-9_\-]{8,}\.[A-Za-z0-9_\-]{8,}\.[A-Za-z0-9_\-]*")

# "Bearer <token>", "Basic <base64>", and "Authorization: token <token>".
_AUTH_SCHEME = re.compile(
    r"(?P<prefix>\b(?:[Bb]earer|BEARER|Basic|BASIC)[ \t]+)(?P<value>[" + _TOKEN_CHARS + r"]+=*)"
)
_AUTH_HEADER = re.compile(
    r"(?P<prefix>\b(?i:(?:proxy-)?authorization)[\"']?[ \t]*[:=][ \t]*[\"']?"
    r"(?:(?i:token|bot|apikey|key|digest)[ \t]+)?)"
    r"(?P<value>[" + _TOKEN_CHARS + r"]+=*)"
)

# --- assignments ------------------------------------------------------------------

# A key names a secret when it ends with one of these words. Short, common words
# (pass, pwd, auth) only count as the whole key or after a separator ("DB_PASS").
_SECRET_WORD = (
    r"(?:password|passwd|passphrase|secret|token|api[_\-]?key|access[_\-]?key"
    r"|private[_\-]?key|secret[_\-]?key|client[_\-]?secret|key[_\-]?data|signing[_\-]?key"
    r"|encryption[_\-]?key|(?<![A-Za-z0-9])(?:pass|pwd|auth))"
)
_KEY = r"(?P<key>(?i:" + _SECRET_WORD + r"))(?![A-Za-z0-9_])"
# Quote around a key, possibly escaped (text that is itself inside a JSON string).
_KQ = r"(?:\\?[\"'])?"
_SEP = (
    r"(?P<sep>[ \t]*"
    r"(?::[ \t]*(?P<ann>[A-Za-z_][\w.\[\], |]{0,60}?)[ \t]*)?"   # a type annotation: `password: str = ...`
    r"(?:==?|:=|=>|(?(ann)(?!)|:))[ \t]*)"
)
_QUOTED = r"(?P<q>\\?[\"'])(?P<qv>(?:(?!(?P=q)).){0,2000}?)(?P=q)(?=[\s,;:})\]&#\"'\\]|$)"
_UNQUOTED = r"(?P<uv>[^\s\"'`\\<>(){}\[\],;]+)(?P<after>[(\[]?)"

_ASSIGNMENT = re.compile(_KEY + _KQ + _SEP + r"(?:" + _QUOTED + r"|" + _UNQUOTED + r")", re.MULTILINE)

# A URL query string or form body: `?code=x&api_key=abc&page=2`. The value ends at
# the next parameter, so this runs before the general assignment rule (whose
# values may hold a `&`).
_QUERY = re.compile(
    r"(?P<prefix>[?&][A-Za-z0-9_.\-]{0,40}?" + _KEY + r"=)(?P<value>[^&#\s\"'`<>\\\[\](){}]+)"
)

# An env-file or shell line `KEY=value`: the value runs to the next whitespace, so
# a password with a comma or semicolon in it is not half-kept.
_ENV_LINE = re.compile(_KEY + r"=(?P<value>[^\s\"'`\\$<(\[{][^\s\"'`\\]*)")
_ENV_LINE_HEAD = re.compile(r"[ \t]*(?:export[ \t]+)?[A-Za-z0-9_.\-]*")

# `--password hunter2`, `--api-key "abc"` (the `=` form is an assignment).
_CLI_FLAG = re.compile(
    r"(?P<prefix>-(?<![\w\-]-)-?(?!no-)(?:[A-Za-z0-9]+-)*(?i:password|passwd|pass|token|secret|api-?key|access-?key|auth-?token)"
    r"[ \t]+(?P<q>[\"']?))(?P<value>[^\s\"'`\\$<\-][^\s\"'`\\]*)(?P=q)"
)
# `curl -u user:pass`, `--user "user:pass"`.
_CLI_USER = re.compile(
    r"(?P<prefix>(?<![\w\-])(?:-u|--user)[ \t]+[\"']?[^\s:\"'$]+:)(?P<value>[^\s\"'`\\$<][^\s\"'`\\]*)"
)
# .netrc: `machine host login me password hunter2`.
_NETRC = re.compile(r"(?P<prefix>\blogin[ \t]+\S+[ \t]+password[ \t]+)(?P<value>[^\s\"'`\\$<]\S*)")

# Values that are not secrets but keywords, types or empty markers.
_NOT_A_VALUE = frozenset(
    """none null nil true false undefined yes no on off required optional empty unset
    str string int integer bytes bool boolean any object dict list secretstr secretbytes
    union callable type self cls os env redacted masked hidden omitted""".split()
)
_DOTTED = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z_][A-Za-z0-9_]*)+")
_WORD = re.compile(r"[A-Za-z_]+")
_CALL_OR_INDEX = re.compile(r"[A-Za-z_][\w.]*[(\[]")
_BASE64_RUN = re.compile(r"[A-Za-z0-9+/=]{8}")
_PLACEHOLDER = re.compile(r"\$|%\(|%s$|\{\{|<[^>]*>$|\*{3,}|x{3,}$|X{3,}$|\.{3}|\[REDACTED\]", re.IGNORECASE)
_PROSE_AFTER = re.compile(r"[ \t]+[A-Za-z]")
_ASSIGN_AFTER = re.compile(r"[ \t]*(?:==?|:=|=>)")


def _is_placeholder(value: str) -> bool:
    return not value or REDACTED in value or bool(_PLACEHOLDER.match(value)) or value.strip("*xX.-_ ") == ""


def _looks_random(value: str) -> bool:
    """Mixed digits and letters of both cases, or very long: generated, not written."""
    if len(value) >= 32:
        return True
    return any(c.isdigit() for c in value) and any(c.isupper() for c in value) and any(c.islower() for c in value)


def _looks_like_token(value: str) -> bool:
    """An opaque credential after Bearer/Basic: not an English word like "tokens"."""
    if len(value) < 8:
        return False
    if any(c.isdigit() for c in value):
        return True
    return len(value) >= 20 and (any(c in "-_.~+/=" for c in value) or not value[1:].islower())


def _names_key(value: str, key: str) -> bool:
    """``password=password`` or ``token=auth_token``: a variable, not a literal."""
    word = re.sub(r"[_\-]", "", key.lower())
    return bool(_WORD.fullmatch(value)) and word in value.lower().replace("_", "").replace("-", "")


# --- the rules --------------------------------------------------------------------

def _whole(m: re.Match[str]) -> str | None:
    return REDACTED


def _keep_prefix(m: re.Match[str]) -> str | None:
    return m.group("prefix") + REDACTED


def _pem(m: re.Match[str]) -> str | None:
    body = m.group("body")
    lead = _PEM_LEAD.match(body).group()
    if len(lead) == len(body):
        return None
    trail = _PEM_TRAIL.search(body, len(lead)).group()
    return m.group("begin") + lead + REDACTED + trail + m.group("end")


def _pem_open(m: re.Match[str]) -> str | None:
    body = m.group("body")
    if not _BASE64_RUN.search(body):
        return None
    lead = _PEM_LEAD.match(body).group()
    trail = _PEM_TRAIL.search(body, len(lead)).group()
    return m.group("begin") + lead + REDACTED + trail


def _url_userinfo(m: re.Match[str]) -> str | None:
    if _is_placeholder(m.group("password")):
        return None
    return m.group("scheme") + REDACTED + "@"


def _auth_token(m: re.Match[str]) -> str | None:
    value = m.group("value")
    if not _looks_like_token(value):
        return None
    return m.group("prefix") + REDACTED


def _assignment(m: re.Match[str]) -> str | None:
    head = m.group(0)[: (m.start("q") if m.group("q") is not None else m.start("uv")) - m.start()]
    if m.group("q") is not None:
        value = m.group("qv")
        if _is_placeholder(value.strip()) or value.strip().lower() in _NOT_A_VALUE:
            return None
        q = m.group("q")
        return head + q + REDACTED + q
    value = m.group("uv")
    sep = m.group("sep")
    text = m.string
    if _is_placeholder(value) or value.lower() in _NOT_A_VALUE:
        return None
    if m.group("after"):                      # getpass(), os.environ[...]
        return None
    bare = sep.strip()
    if bare == ":" and _ASSIGN_AFTER.match(text, m.end("uv")):
        return None                           # `password: Type = ...`: the value comes later
    if _DOTTED.fullmatch(value) and not _looks_random(value):
        return None                           # self._next, config.token
    if _names_key(value, m.group("key")):     # password=password, token=auth_token
        return None
    if value.isdigit() and len(value) < 4:    # token: 42
        return None
    if bare in ("=", "==") and sep != bare and _WORD.fullmatch(value):
        return None                           # `password = pw`: a variable in code
    if bare == ":" and _PROSE_AFTER.match(text, m.end("uv")) and _WORD.fullmatch(value):
        return None                           # `/etc/passwd: No such file`
    return head + REDACTED


def _query_value(m: re.Match[str]) -> str | None:
    return None if _is_placeholder(m.group("value")) else m.group("prefix") + REDACTED


def _env_line(m: re.Match[str]) -> str | None:
    line_start = m.string.rfind("\n", 0, m.start()) + 1
    if not _ENV_LINE_HEAD.fullmatch(m.string, line_start, m.start()):
        return None                           # not `KEY=value` on a line of its own
    value = m.group("value")
    if _is_placeholder(value) or value.lower() in _NOT_A_VALUE or _names_key(value, m.group("key")):
        return None
    if _CALL_OR_INDEX.match(value) or (_DOTTED.fullmatch(value) and not _looks_random(value)):
        return None
    return m.group("key") + "=" + REDACTED


def _flag_value(m: re.Match[str]) -> str | None:
    value = m.group("value")
    if _is_placeholder(value) or value.isdigit():
        return None                           # `docker run -u 1000:1000`
    if _WORD.fullmatch(value) and (value.isupper() or _PROSE_AFTER.match(m.string, m.end("value"))):
        return None                           # `--token TOKEN` in --help, "use --token to log in"
    q = m.groupdict().get("q") or ""
    return m.group("prefix") + REDACTED + q


@dataclass(frozen=True)
class _Rule:
    pattern: re.Pattern[str]
    replace: Callable[[re.Match[str]], str | None]
    # Substrings of the lower-cased text of which one must be present for the rule
    # to match at all: a fast `in` test skips most rules on most texts.
    gates: tuple[str, ...] = ()
    # For rules whose match starts with a secret word: finds candidate starts in
    # the lower-cased text with a case-sensitive scan, several times faster than
    # scanning the text with a case-insensitive pattern.
    finder: re.Pattern[str] | None = None


_KEY_FINDER = re.compile(
    r"(?:password|passwd|passphrase|secret|token|api[_\-]?key|access[_\-]?key|private[_\-]?key|secret[_\-]?key"
    r"|client[_\-]?secret|key[_\-]?data|signing[_\-]?key|encryption[_\-]?key|pass|pwd|auth)"
    r"(?=\\?[\"']?[ \t]*[:=])"
)

_RULES: tuple[_Rule, ...] = (
    _Rule(_PEM, _pem, ("private key",)),
    _Rule(_PEM_OPEN, _pem_open, ("private key",)),
    _Rule(_URL_USERINFO, _url_userinfo, ("://",)),
    _Rule(_SLACK_WEBHOOK, _keep_prefix, ("hooks.slack.com",)),
    _Rule(_DISCORD_WEBHOOK, _keep_prefix, ("/api/webhooks/",)),
    _Rule(_PREFIXED, _whole),
    _Rule(_JWT, _whole, ("eyj",)),
    _Rule(_AUTH_HEADER, _auth_token, ("authorization",)),
    _Rule(_AUTH_SCHEME, _auth_token, ("bearer", "basic")),
    _Rule(_QUERY, _query_value, ("?", "&")),
    _Rule(_ENV_LINE, _env_line, ("=",), _KEY_FINDER),
    _Rule(_ASSIGNMENT, _assignment, ("=", ":"), _KEY_FINDER),
    _Rule(_CLI_FLAG, _flag_value, ("-",)),
    _Rule(_CLI_USER, _flag_value, ("-u", "--user")),
    _Rule(_NETRC, _flag_value, ("login",)),
)

# Cheap pre-check on the lower-cased text: with none of these, no rule can match.
_HINT = re.compile(
    r"pass|pwd|secret|token|key|auth|bearer|basic|login|-u\b|--user|://|sk-|hf_|gh[pousr]_|github_pat_|glpat-"
    r"|akia|asia|abia|acca|xox|xapp-|_live_|_test_|whsec_|aiza|npm_|pypi-|sg\.|gsk_|eyj|hooks\.slack|/api/webhooks/"
)


def redact_with_count(text: str) -> tuple[str, int]:
    """``text`` with credentials replaced, and how many were replaced."""
    if not text:
        return text, 0
    low = text.lower()
    if not _HINT.search(low):
        return text, 0
    count = 0
    for rule in _RULES:
        # Gates are tested on the original text: a replacement only ever removes
        # text or inserts "[REDACTED]", so it cannot create a gate substring.
        if rule.gates and not any(gate in low for gate in rule.gates):
            continue
        text, n = _apply(rule, text)
        count += n
    return text, count


def _apply(rule: _Rule, text: str) -> tuple[str, int]:
    count = 0

    def sub(m: re.Match[str]) -> str:
        nonlocal count
        out = rule.replace(m)
        if out is None or out == m.group(0):
            return m.group(0)
        count += 1
        return out

    low = text.lower() if rule.finder is not None else ""
    if rule.finder is None or len(low) != len(text):
        return rule.pattern.sub(sub, text), count
    # Same as pattern.sub, trying the pattern only where the finder saw a key word.
    parts: list[str] = []
    last = 0
    for candidate in rule.finder.finditer(low):
        pos = candidate.start()
        if pos < last:
            continue
        m = rule.pattern.match(text, pos)
        if m is None:
            continue
        parts.append(text[last:pos])
        parts.append(sub(m))
        last = m.end()
    if not parts:
        return text, 0
    parts.append(text[last:])
    return "".join(parts), count


def redact(text: str) -> str:
    """Replace every credential in ``text`` with ``[REDACTED]``, keeping the text around it."""
    return redact_with_count(text)[0]


def count_secrets(text: str) -> int:
    """How many credentials ``redact`` would replace in ``text``."""
    return redact_with_count(text)[1]


def contains_secret(text: str) -> bool:
    return count_secrets(text) > 0


def redact_message(msg: Message) -> Message:
    """A copy of ``msg`` with its content and tool-call arguments redacted.

    Returns ``msg`` itself when nothing needed redacting, so callers can tell by
    identity and no token count is invalidated needlessly.
    """
    content = redact(msg.content) if msg.content else msg.content
    tool_calls = _redact_calls(msg.tool_calls)
    if content == msg.content and tool_calls is msg.tool_calls:
        return msg
    # The text changed, so a cached token count no longer holds.
    return replace(msg, content=content, tool_calls=tool_calls, meta=dict(msg.meta), token_count=None, token_counter=None)


def _redact_calls(calls: list[dict[str, Any]] | None) -> list[dict[str, Any]] | None:
    if not calls:
        return calls
    out: list[dict[str, Any]] = []
    changed = False
    for call in calls:
        function = call.get("function")
        if isinstance(function, dict) and isinstance(function.get("arguments"), str):
            arguments = redact(function["arguments"])
            if arguments != function["arguments"]:
                call = {**call, "function": {**function, "arguments": arguments}}
                changed = True
        out.append(call)
    return out if changed else calls
