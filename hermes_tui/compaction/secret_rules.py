"""The redaction rules in their fixed order: each a shape from ``secret_shapes`` and what to
replace of a match (the value only, a prefix kept, or the whole), with cheap gates that skip
most rules on most texts.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass

from hermes_tui.compaction.lazy_pattern import lazy_compile
from hermes_tui.compaction.secret_shapes import (
    _ASSIGN_AFTER,
    _ASSIGNMENT,
    _AUTH_HEADER,
    _AUTH_SCHEME,
    _BASE64_RUN,
    _CALL_OR_INDEX,
    _CLI_FLAG,
    _CLI_USER,
    _DIGEST_LABEL,
    _DISCORD_WEBHOOK,
    _DOTTED,
    _ENV_LINE,
    _ENV_LINE_HEAD,
    _JWT,
    _NETRC,
    _NOT_A_VALUE,
    _PEM,
    _PEM_LEAD,
    _PEM_OPEN,
    _PEM_TRAIL,
    _PREFIXED,
    _PROSE_AFTER,
    _PROSE_SECRET,
    _PUBLIC_PEM,
    _QUERY,
    _RUN,
    _SLACK_WEBHOOK,
    _TOOL_PASSWORD,
    _URL_USERINFO,
    _WORD,
    REDACTED,
    _is_placeholder,
    _looks_like_token,
    _looks_random,
    _names_key,
    looks_generated,
)

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


# "api" names a credential only with a value as long as a key: `DD_API=<32 hex>` is one,
# `api: v1` and `API = "rest"` are settings.
_API_WORD = "api"
MIN_API_VALUE_CHARS = 16


def _too_short_for(key: str, value: str) -> bool:
    return key.lower() == _API_WORD and len(value) < MIN_API_VALUE_CHARS


def _assignment(m: re.Match[str]) -> str | None:
    head = m.group(0)[: (m.start("q") if m.group("q") is not None else m.start("uv")) - m.start()]
    if _too_short_for(m.group("key"), m.group("qv") if m.group("q") is not None else m.group("uv")):
        return None
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
    if _too_short_for(m.group("key"), value):
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


_PROSE_TRAIL = lazy_compile(r"[.,;:!?)\]]+\Z")
_WORDS = lazy_compile(r"[A-Za-z][a-z]*(?:['\-][A-Za-z][a-z]*)*")
_NOT_PROSE_VALUE = frozenset({"e.g", "i.e", "etc", "n/a"})


def _prose_value(m: re.Match[str]) -> str | None:
    """ "the password is X": X is a secret when quoted, or when it does not read as words."""
    value, q = m.group("value"), m.group("q") or ""
    if REDACTED in value:
        return None
    if q:
        if m.string[m.end("value"): m.end("value") + 1] != q:
            return None
        core, trail = value, ""
    else:
        core = _PROSE_TRAIL.sub("", value)
        trail = value[len(core):]
    if len(core) < 4 or _is_placeholder(core) or core.lower() in _NOT_A_VALUE or core.lower() in _NOT_PROSE_VALUE:
        return None
    if core[0] in "/~.$%{<[":
        return None                           # a path, a variable: where it is, not what it is
    word = (m.group("word") or m.group("word2") or "").lower()
    if core.isdigit():
        if word not in ("pin", "passcode", "password", "passwd"):
            return None                       # "the token is 4096 tokens long"
    elif not q and (_WORDS.fullmatch(core) or not any(not c.isalpha() for c in core) and not any(c.isupper() for c in core[1:])):
        return None                           # "the token is expired", "the password is Incorrect"
    return m.group("prefix") + REDACTED + trail


def _candidate(text: str, start: int, end: int) -> int | None:
    """Where the token in the run ``text[start:end]`` starts, or None if it is no candidate.

    It may start right after a JSON escape (``\\n``), never inside one. A run touching a
    bracket is none: "[REDACTED]" next to it would otherwise change the run on a second
    pass; nor is one holding "--" (PEM armour, CLI flags).
    """
    before = text[start - 1] if start else ""
    if before == "\\":
        if text[start] not in "nrt":
            return None
        start += 1
    if before == "]" or text[end:end + 1] in ("=", "[") or "--" in text[start:end]:
        return None
    return start


def _redact_generated(text: str) -> tuple[str, int]:
    """Replace long tokens that read as generated (the entropy rule)."""
    public = [m.span() for m in _PUBLIC_PEM.finditer(text)] if "-----BEGIN" in text else []
    parts: list[str] = []
    last = count = 0
    for run in _RUN.finditer(text):
        start = _candidate(text, *run.span())
        if start is None or not looks_generated(text[start:run.end()]):
            continue
        if _DIGEST_LABEL.search(text, max(0, start - 10), start) or any(a <= start < b for a, b in public):
            continue
        parts += [text[last:start], REDACTED]
        last = run.end()
        count += 1
    if not count:
        return text, 0
    parts.append(text[last:])
    return "".join(parts), count


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


_KEY_FINDER = lazy_compile(
    r"(?:password|passwd|passphrase|secret|token|api[_\-]?key|access[_\-]?key|private[_\-]?key(?:[_\-]?id)?"
    r"|secret[_\-]?key|client[_\-]?secret|key[_\-]?data|signing[_\-]?key|encryption[_\-]?key|account[_\-]?key"
    r"|app(?:lication)?[_\-]?key|master[_\-]?key|auth[_\-]?key|credentials?|creds|pass|pwd|auth|api)"
    r"(?=\\?[\"']?[ \t]*[:=])"
)

_PROSE_FINDER = lazy_compile(
    r"\b(?:password|passphrase|passcode|passwd|pin|secret|token|api[ _\-]?key|access[ _\-]?key|secret[ _\-]?key"
    r"|with|using)[ \t]"
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
    _Rule(_TOOL_PASSWORD, _flag_value, ("mysql", "mariadb", "sshpass", "docker", "redis-cli")),
    _Rule(_PROSE_SECRET, _prose_value, (" is ", " was ", " equals ", " will be ", "with ", "using "), _PROSE_FINDER),
)

# Cheap pre-check on the lower-cased text: with none of these, no rule can match.
_HINT = lazy_compile(
    r"pass|pwd|secret|token|key|auth|cred|bearer|basic|login|-u\b|--user|://|sk|hf_|gh[pousr]_|github_pat_|gl[a-z]+-"
    r"|gr1348941|akia|asia|abia|acca|a3t|xox|xapp-|_live_|_test_|_prod_|whsec_|aiza|npm_|pypi-|sg\.|gsk_|eyj"
    r"|hooks\.slack|/api/webhooks/|sig|mysql|mariadb|docker|redis-cli|pin |do[opr]_v1_|shp|hrku-|\d:aa|q~"
    r"|dapi|dp\.pt\.|lin_api_|pmak-|pplx-|hv[sb]\.|glc_|glsa_|sntry|ntn_|pul-|rubygems_|atatt3|sq0|xkeysib-|ops_"
    r"|\.[a-z0-9_\-]{6}\."
    r"|api\\?[\"']?[ \t]*[:=]"  # `DD_API=...`: a key that says API but not KEY
)
