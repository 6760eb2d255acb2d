"""Deterministic credential redaction.

Every text is passed through ``redact`` before a summarizer sees it, and the
summarizer's output is passed through it again: a small model told to drop secrets
will still copy one now and then, and a secret in the rolling summary would ride
along in every later request.

Rules run in a fixed order, each one a compiled regex: below, the shapes (what a
credential looks like), then the rules (what of a match to replace, with cheap gates that
skip most rules on most texts), then their application. They find a credential by what
gives it away, not by a list of examples:

* **Key names.** An assignment whose key names a secret (``password``, ``token``,
  ``api_key``, ``AccountKey``, ``credentials``, ``private_key_id`` ...) in shell, env
  files, YAML, JSON, connection strings, URL query strings (also ``sig=`` of a SAS
  URL) and CLI flags. Only the value is replaced. A value that reads as code rather
  than a literal (a call, an attribute access, a subscript, a keyword, a variable
  named after the key, or a bare word in ``key = word``) is left alone, so that
  ``password = getpass()`` or ``token = self._next()`` survive.
* **URL userinfo.** ``scheme://user:password@host``; the password runs to the last
  ``@`` before the host, so one holding ``@`` or ``#`` goes whole.
* **Command-line passwords.** ``--password X``, ``-u user:pass``, and the tools whose
  short flag takes one: ``mysql -pX``, ``sshpass -p X``, ``docker login -p X``; also
  ``.netrc`` lines and "the password is X" in prose (a value that reads as a word,
  "the token is expired", stays).
* **Known prefixes.** Provider keys that announce themselves (``sk-``, ``ghp_``,
  ``AKIA``, ``xoxb-``, ``dop_v1_``, ``SK`` + 32 hex ...), JWTs, PEM private keys,
  Slack and Discord webhooks, ``Bearer``/``Basic`` credentials. The shapes follow the
  default rule set of gitleaks (MIT licence, github.com/gitleaks/gitleaks,
  ``config/gitleaks.toml``), adapted to Python's ``re``; its keyword-near-value rules
  are covered by the key-name rules above.
* **Entropy.** A long run of token characters with no label at all (an AWS secret
  in a credentials CSV, a session token in a log) is redacted when it reads as
  generated: letters of both cases or digits scattered through it, not the words of
  an identifier, a path or English.

What is deliberately kept (false positives cost the summary its exact strings):
hexadecimal strings and UUIDs with no secret-naming key (git SHAs, hashes, request
ids), digests labelled with their algorithm (``sha512-...`` in lockfiles,
``sha256:...``), identifiers, paths, version strings and prose. A 32-hex Datadog key
or a UUID Heroku key is therefore caught only where a key names it
(``DD_API_KEY=...``), which is how such keys appear in practice.

Replacement text never matches a rule again, so ``redact`` is idempotent. Nothing
that could hold a backslash or a quote is ever swallowed, so redacting a JSON
string (a tool call's ``arguments``) keeps it valid JSON.
"""

from __future__ import annotations

import base64
import binascii
import math
import re
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

from hermes_tui.compaction.lazy_pattern import lazy_compile
from hermes_tui.core.transcript import Message

__all__ = [
    "REDACTED", "contains_secret", "count_secrets", "looks_generated", "redact", "redact_message", "redact_with_count",
]

REDACTED = "[REDACTED]"

# Characters of an opaque token (base64, base64url, hex, ...).
_TOKEN_CHARS = r"A-Za-z0-9\-._~+/"

# --- shapes -----------------------------------------------------------------------

_PEM = lazy_compile(
    r"(?P<begin>-----BEGIN [A-Z0-9 ]{0,40}PRIVATE KEY( BLOCK)?-----)"
    r"(?P<body>.*?)"
    r"(?P<end>-----END [A-Z0-9 ]{0,40}PRIVATE KEY( BLOCK)?-----)",
    re.DOTALL,
)
# A private key cut off before its END line (truncated tool output): the BEGIN line
# and the whole base64 lines that follow it (not the start of the next line).
_PEM_OPEN = lazy_compile(
    r"(?P<begin>-----BEGIN [A-Z0-9 ]{0,40}PRIVATE KEY( BLOCK)?-----)"
    r"(?P<body>(?:(?:\r?\n|\\n)(?:[A-Za-z0-9+/=]*|[A-Za-z\-]+: [^\n\\]*)(?=\r?\n|\\n|\Z))+)"
    r"(?!.*-----END)",
    re.DOTALL,
)
_PEM_LEAD = lazy_compile(r"(?:\s|\\[nr])*")
_PEM_TRAIL = lazy_compile(r"(?:\s|\\[nr])*\Z")

# scheme://user:password@host  ->  scheme://[REDACTED]@host. The password is greedy up
# to the last "@" before the host, so one holding an unescaped "@" or "#" goes whole.
_URL_USERINFO = lazy_compile(
    r"(?P<scheme>://)(?<=[A-Za-z0-9]://)"
    r"(?P<user>[^\s/@:\"'\\<>\[\]]*):(?P<password>[^\s/\"'\\<>?]+)@(?=[A-Za-z0-9\[])"
)

_SLACK_WEBHOOK = lazy_compile(
    r"(?P<prefix>\bhooks\.slack\.com/(?:services|workflows|triggers)/)[A-Za-z0-9/_\-]{8,}"
)
_DISCORD_WEBHOOK = lazy_compile(
    r"(?P<prefix>\bdiscord(?:app)?\.com/api/webhooks/\d{5,}/)[A-Za-z0-9_\-]{20,}"
)

# Keys and tokens with a recognisable prefix. The left guard keeps the prefix from
# matching in the middle of a longer word.
_PREFIXED = lazy_compile(
    r"(?<![A-Za-z0-9_\-])(?:"
    r"sk-ant-[A-Za-z0-9_\-]{20,}"                                  # Anthropic
    r"|sk-(?:proj-|svcacct-|admin-)?(?=[A-Za-z0-9_\-]*\d)[A-Za-z0-9_\-]{20,}"  # OpenAI
    r"|hf_[A-Za-z0-9]{30,}"                                        # Hugging Face
    r"|gh[pousr]_[A-Za-z0-9]{30,}"                                 # GitHub
    r"|github_pat_[A-Za-z0-9_]{22,}"
    r"|gl(?:pat|dt|rt|ptt|ft|imt|agent|oas|soat|cbt|ffct)-[A-Za-z0-9_\-]{20,}"  # GitLab
    r"|GR1348941[A-Za-z0-9_\-]{20,}"
    r"|(?:A3T[A-Z0-9]|AKIA|ASIA|ABIA|ACCA)[A-Z0-9]{16}(?![A-Za-z0-9])"  # AWS access key id
    r"|xox[abprse]-[A-Za-z0-9\-]{10,}"                             # Slack
    r"|xapp-[A-Za-z0-9\-]{10,}"
    r"|(?:sk|rk)_(?:live|test|prod)_[A-Za-z0-9]{16,}"              # Stripe
    r"|pk_live_[A-Za-z0-9]{16,}"
    r"|whsec_[A-Za-z0-9]{20,}"
    r"|AIza[0-9A-Za-z_\-]{35,}"                                    # Google API key
    r"|npm_[A-Za-z0-9]{36}"                                        # npm
    r"|pypi-AgE[A-Za-z0-9_\-]{50,}"                                # PyPI
    r"|SG\.[A-Za-z0-9_\-]{16,}\.[A-Za-z0-9_\-]{20,}"               # SendGrid
    r"|gsk_[A-Za-z0-9]{40,}"                                       # Groq
    r"|AGE-SECRET-KEY-1[A-Z0-9]{50,}"                              # age
    r"|do[opr]_v1_[a-f0-9]{64}"                                    # DigitalOcean
    r"|shp(?:at|ca|pa|ss)_[a-fA-F0-9]{32}"                         # Shopify
    r"|HRKU-AA[A-Za-z0-9_\-]{40,}"                                 # Heroku
    r"|SK[0-9a-fA-F]{32}(?![A-Za-z0-9])"                           # Twilio API key
    r"|key-[0-9a-f]{32}(?![A-Za-z0-9])"                            # Mailgun
    r"|\d{6,12}:AA[A-Za-z0-9_\-]{30,34}(?![A-Za-z0-9_\-])"          # Telegram bot
    r"|[MNO](?=[A-Za-z0-9_\-]{0,26}\d)[A-Za-z0-9_\-]{23,27}\.[A-Za-z0-9_\-]{6}\.[A-Za-z0-9_\-]{27,40}(?![A-Za-z0-9_\-])"  # Discord bot
    r"|[A-Za-z0-9_~.]{3}\dQ~[A-Za-z0-9_~.\-]{31,34}(?![A-Za-z0-9_~.\-])"  # Azure AD client secret
    r"|dapi[a-f0-9]{32}(?:-\d)?(?![A-Za-z0-9])"                    # Databricks
    r"|dp\.pt\.[A-Za-z0-9]{40,}"                                    # Doppler
    r"|lin_api_[A-Za-z0-9]{40}"                                    # Linear
    r"|PMAK-[a-f0-9]{24}-[a-f0-9]{34}"                             # Postman
    r"|pplx-[A-Za-z0-9]{48}"                                       # Perplexity
    r"|hv[sb]\.[A-Za-z0-9_\-]{24,}"                                 # Vault
    r"|glc_[A-Za-z0-9+/]{32,}={0,3}|glsa_[A-Za-z0-9]{32}_[A-Fa-f0-9]{8}"  # Grafana
    r"|sntry[us]_[A-Za-z0-9+/=_]{40,}"                             # Sentry
    r"|ntn_[0-9]{11}[A-Za-z0-9]{35}"                               # Notion
    r"|pul-[a-f0-9]{40}|rubygems_[a-f0-9]{48}"                     # Pulumi, RubyGems
    r"|ATATT3[A-Za-z0-9_\-=]{100,}"                                # Atlassian
    r"|sq0(?:atp|csp)-[A-Za-z0-9_\-]{22,}"                         # Square
    r"|xkeysib-[a-f0-9]{64}-[A-Za-z0-9]{16}"                       # Sendinblue
    r"|ops_eyJ[A-Za-z0-9+/]{100,}={0,3}"                           # 1Password
    r")"
)

_JWT = lazy_compile(r"(?<![A-Za-z0-9_\-])eyJ[A-Za-z0-9_\-]{8,}\.[A-Za-z0-9_\-]{8,}\.[A-Za-z0-9_\-]*")

# "Bearer <token>", "Basic <base64>", and "Authorization: token <token>".
_AUTH_SCHEME = lazy_compile(
    r"(?P<prefix>\b(?:[Bb]earer|BEARER|Basic|BASIC)[ \t]+)(?P<value>[" + _TOKEN_CHARS + r"]+=*)"
)
_AUTH_HEADER = lazy_compile(
    r"(?P<prefix>\b(?i:(?:proxy-)?authorization)[\"']?[ \t]*[:=][ \t]*[\"']?"
    r"(?:(?i:token|bot|apikey|key|digest)[ \t]+)?)"
    r"(?P<value>[" + _TOKEN_CHARS + r"]+=*)"
)

# --- assignments ------------------------------------------------------------------

# A key names a secret when it ends with one of these words. Short, common words
# (pass, pwd, auth, api) only count as the whole key, after a separator ("DB_PASS",
# "DD_API": a Datadog key assigned to a name that says API but not KEY) or where a capital
# starts them after a lower-case letter or a digit ("dbPass", "ddApi"; not "COMPASS").
_SECRET_WORD = (
    r"(?:password|passwd|passphrase|secret|token|api[_\-]?key|access[_\-]?key"
    r"|private[_\-]?key(?:[_\-]?id)?|secret[_\-]?key|client[_\-]?secret|key[_\-]?data|signing[_\-]?key"
    r"|encryption[_\-]?key|account[_\-]?key|app(?:lication)?[_\-]?key|master[_\-]?key|auth[_\-]?key"
    r"|credentials?|(?:(?<![A-Za-z0-9])|(?-i:(?<=[a-z0-9])(?=[A-Z])))(?:pass|pwd|auth|creds|api))"
)
# Query parameters that carry a credential without naming one: a SAS URL's signature,
# a pre-signed S3 or GCS URL's signature and session token.
_QUERY_WORD = r"(?:sig|signature|x-amz-signature|x-amz-security-token|x-goog-signature|x-goog-credential)"
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

_ASSIGNMENT = lazy_compile(_KEY + _KQ + _SEP + r"(?:" + _QUOTED + r"|" + _UNQUOTED + r")", re.MULTILINE)

# A key that says a secret word in the middle of its name: `API_KEY_PROD`, `GITHUB_TOKEN_2`,
# `dbPassword2`, `MY_TOKEN_VALUE`. Such names also hold settings (`token_count = 5000`,
# `password_file: /etc/pw`), so only a value that reads as a key is a credential here
# (``_key_like``); these rules run after the ones for names that end with the word.
# The rest of the name starts at a separator, a capital or a digit: "authority" is not "auth".
_NAME_TAIL = r"(?:[_\-][A-Za-z0-9]{1,16}|[A-Z0-9][a-z0-9]{0,15})(?:[_\-]?[A-Za-z0-9]{1,16}){0,3}?"
_KEY_MID = r"(?P<key>(?i:" + _SECRET_WORD + r"))(?P<tail>" + _NAME_TAIL + r")(?![A-Za-z0-9_])"
_ASSIGNMENT_MID = lazy_compile(_KEY_MID + _KQ + _SEP + r"(?:" + _QUOTED + r"|" + _UNQUOTED + r")", re.MULTILINE)

# A URL query string or form body: `?code=x&api_key=abc&page=2`. The value ends at
# the next parameter, so this runs before the general assignment rule (whose
# values may hold a `&`).
_QUERY = lazy_compile(
    r"(?P<prefix>[?&][A-Za-z0-9_.\-]{0,40}?(?P<key>(?i:" + _SECRET_WORD + r"|" + _QUERY_WORD + r"))(?![A-Za-z0-9_])=)"
    r"(?P<value>[^&#\s\"'`<>\\\[\](){}]+)"
)

# An env-file or shell line `KEY=value`: the value runs to the next whitespace, so
# a password with a comma or semicolon in it is not half-kept.
_ENV_LINE = lazy_compile(_KEY + r"=(?P<value>[^\s\"'`\\$<(\[{][^\s\"'`\\]*)")
_ENV_LINE_MID = lazy_compile(_KEY_MID + r"=(?P<value>[^\s\"'`\\$<(\[{][^\s\"'`\\]*)")
_ENV_LINE_HEAD = lazy_compile(r"[ \t]*(?:export[ \t]+)?[A-Za-z0-9_.\-]*")

# `--password hunter2`, `--api-key "abc"` (the `=` form is an assignment).
_CLI_FLAG = lazy_compile(
    r"(?P<prefix>-(?<![\w\-]-)-?(?!no-)(?:[A-Za-z0-9]+-)*(?i:password|passwd|pass|token|secret|api-?key|access-?key|auth-?token)"
    r"[ \t]+(?P<q>[\"']?))(?P<value>[^\s\"'`\\$<\-][^\s\"'`\\]*)(?P=q)"
)
# `curl -u user:pass`, `--user "user:pass"`.
_CLI_USER = lazy_compile(
    r"(?P<prefix>(?<![\w\-])(?:-u|--user)[ \t]+[\"']?[^\s:\"'$]+:)(?P<value>[^\s\"'`\\$<][^\s\"'`\\]*)"
)
# .netrc: `machine host login me password hunter2`.
# The entry names its machine (or is the default one), so prose like "login the
# password reset" is not one.
_NETRC = lazy_compile(
    r"(?P<prefix>(?:\bmachine[ \t]+\S+|^[ \t]*default)[ \t]+login[ \t]+\S+[ \t]+password[ \t]+)"
    r"(?P<value>[^\s\"'`\\$<][^\s\"'`\\]*)",
    re.MULTILINE,
)
# Tools whose short flag takes the password itself: `mysql -pPASS` (attached: `-p PASS`
# asks for one and PASS is the database), `sshpass -p PASS`, `docker login -p PASS`,
# `redis-cli -a PASS`. Only within the same command (no pipe, `;` or `&` between).
_TOOL_PASSWORD = lazy_compile(
    r"(?P<prefix>(?:"
    r"\b(?:mysql|mysqldump|mysqladmin|mysqlimport|mysqlshow|mysqlcheck|mariadb(?:-dump|-admin)?)\b[^\n|;&]*?[ \t]-p"
    r"|\bsshpass\b[^\n|;&]*?[ \t]-p[ \t]*"
    r"|\bdocker[ \t]+login\b[^\n|;&]*?[ \t]-p[ \t]+"
    r"|\bredis-cli\b[^\n|;&]*?[ \t]-a[ \t]+"
    r")(?P<q>[\"']?))(?P<value>[^\s\"'`\\$<\-][^\s\"'`\\]*)(?P=q)"
)
# Prose: "the admin password is X", "the token for staging was `X`", "with password X".
_PROSE_SECRET = lazy_compile(
    r"(?P<prefix>(?:"
    r"\b(?P<word>(?i:password|passphrase|passcode|passwd|pin|secret|token|api[ _\-]?key|access[ _\-]?key|secret[ _\-]?key))"
    r"(?:[ \t]+(?i:for|of|to|on)[ \t]+[\w.@:/\-]{1,60})?"
    r"[ \t]+(?i:is|was|is now|is still|has been set to|was set to|is set to|equals|will be)[ \t]+"
    r"|\b(?i:with|using)[ \t]+(?i:the[ \t]+)?(?P<word2>(?i:password|passphrase))[ \t]+"
    r")(?P<q>[`\"']?))(?P<value>[^\s`\"'\\]{4,200})"
)

# Values that are not secrets but keywords, types or empty markers.
_NOT_A_VALUE = frozenset(
    ["none", "null", "nil", "true", "false", "undefined", "yes", "no", "on", "off", "required", "optional", "empty", "unset", "str", "string", "int", "integer", "bytes", "bool", "boolean", "any", "object", "dict", "list", "secretstr", "secretbytes", "union", "callable", "type", "self", "cls", "os", "env", "redacted", "masked", "hidden", "omitted", "include", "omit", "same-origin"]
)
_DOTTED = lazy_compile(r"[A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z_][A-Za-z0-9_]*)+")
_WORD = lazy_compile(r"[A-Za-z_]+")
_CALL_OR_INDEX = lazy_compile(r"[A-Za-z_][\w.]*[(\[]")
_BASE64_RUN = lazy_compile(r"[A-Za-z0-9+/=]{8}")
_PLACEHOLDER = lazy_compile(r"\$|%\(|%s$|\{\{|<[^>]*>$|\*{3,}|x{3,}$|X{3,}$|\.{3}|\[REDACTED\]", re.IGNORECASE)
_PROSE_AFTER = lazy_compile(r"[ \t]+[A-Za-z]")
_ASSIGN_AFTER = lazy_compile(r"[ \t]*(?:==?|:=|=>)")


# --- entropy -----------------------------------------------------------------------

# A run of token characters long enough to be a generated credential (see ``_candidate``).
_RUN = lazy_compile(r"[A-Za-z0-9+/_\-]{20,}={0,3}")
_HEXISH = lazy_compile(r"[0-9a-fA-F]+")
# A word of an identifier or a path: lower, Capitalized, ACRONYM, camelCase, then a number.
_PLAIN_PART = lazy_compile(r"(?:[a-z]+|[A-Z][a-z]+|[A-Z]+(?![a-z]))(?:[A-Z][a-z]+)*\d{0,4}|\d+")
_SEGMENT = lazy_compile(r"[A-Z]?[a-z]+|[A-Z]+(?![a-z])|\d+")
# Digests say which algorithm made them (lockfiles, image digests): not secrets.
_DIGEST_LABEL = lazy_compile(r"(?i)(?:sha\d{1,3}|sha3-\d{3}|md5|blake2[bs]?|xxh\d*|base64)[-:=,]\Z")
_DIGEST_START = lazy_compile(r"(?i)(?:sha\d{1,3}|md5)-")
_PUBLIC_PEM = lazy_compile(r"-----BEGIN (?:CERTIFICATE|PUBLIC KEY|[A-Z ]{0,20}CERTIFICATE REQUEST)-----.*?-----END [A-Z ]+-----", re.DOTALL)
_PEM_BASE64 = "LS0tLS1CRUdJTi"  # base64 of "-----BEGIN "


def looks_generated(value: str) -> bool:
    """True for a token that reads as machine-made (a key, a secret, a session token):
    long, not a hex string or UUID (hashes and ids are kept), letters broken up by
    digits and case changes rather than forming the words of an identifier or a path."""
    core = value.rstrip("=")
    if len(core) < 20 or _DIGEST_START.match(core):
        return False
    parts = [part for part in re.split(r"[/_\-.+]", core) if part]
    odd = sum(len(part) for part in parts if not (_HEXISH.fullmatch(part) or _PLAIN_PART.fullmatch(part)))
    if odd < 16:
        return False                          # words of a path or an identifier, hex, numbers
    digits = sum(c.isdigit() for c in core)
    letters = sum(c.isalpha() for c in core)
    if not digits or letters < 10:
        return False
    if core.startswith(_PEM_BASE64):
        return _encodes_private_key(core)
    segments = _SEGMENT.findall(core)
    words = [seg for seg in segments if seg[0].isalpha()]
    return len(segments) >= 8 and letters / len(words) < 4.0 and _entropy(core) >= 3.0


def _entropy(text: str) -> float:
    """Shannon entropy in bits per character."""
    total = len(text)
    return -sum(n / total * math.log2(n / total) for n in Counter(text).values())


def _encodes_private_key(core: str) -> bool:
    """Base64 of a PEM block (a kubeconfig's ``*-data``): a secret only if it is a private key."""
    head = core[:64]
    try:
        decoded = base64.b64decode(head[: len(head) // 4 * 4], validate=False)
    except (binascii.Error, ValueError):
        return True
    return b"PRIVATE" in decoded


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


def _found(match: re.Match[str] | None) -> str:
    """The text of a match that cannot miss (_PEM_LEAD and _PEM_TRAIL match the empty string too)."""
    assert match is not None
    return match.group()


def _pem(m: re.Match[str]) -> str | None:
    body = m.group("body")
    lead = _found(_PEM_LEAD.match(body))
    if len(lead) == len(body):
        return None
    trail = _found(_PEM_TRAIL.search(body, len(lead)))
    return m.group("begin") + lead + REDACTED + trail + m.group("end")


def _pem_open(m: re.Match[str]) -> str | None:
    body = m.group("body")
    if not _BASE64_RUN.search(body):
        return None
    lead = _found(_PEM_LEAD.match(body))
    trail = _found(_PEM_TRAIL.search(body, len(lead)))
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


def _key_like(value: str) -> bool:
    """A value that reads as a key or token, not a setting: as long as a key, letters and
    digits mixed as in a generated string, and not a path, a URL or a number."""
    value = value.strip()
    if len(value) < MIN_API_VALUE_CHARS or value.startswith(("/", "~", "./", "../")) or "://" in value:
        return False
    if value.replace(".", "").replace(",", "").replace("_", "").isdigit():
        return False  # a count or an id: `tokens_used: 123456789012345678`
    return _looks_random(value) or (any(c.isdigit() for c in value) and any(c.isalpha() for c in value))


def _assignment_mid(m: re.Match[str]) -> str | None:
    value = m.group("qv") if m.group("q") is not None else m.group("uv")
    return _assignment(m) if _key_like(value) else None


def _env_line_mid(m: re.Match[str]) -> str | None:
    return _env_line(m) if _key_like(m.group("value")) else None


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
    return m.string[m.start():m.start("value")] + REDACTED


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

# The same words with the rest of a name after them (the rules for ``_KEY_MID``).
_KEY_MID_FINDER = lazy_compile(
    r"(?:password|passwd|passphrase|secret|token|api[_\-]?key|access[_\-]?key|private[_\-]?key(?:[_\-]?id)?"
    r"|secret[_\-]?key|client[_\-]?secret|key[_\-]?data|signing[_\-]?key|encryption[_\-]?key|account[_\-]?key"
    r"|app(?:lication)?[_\-]?key|master[_\-]?key|auth[_\-]?key|credentials?|creds|pass|pwd|auth|api)"
    r"(?=(?:[_\-]?[a-z0-9]{1,16}){1,4}\\?[\"']?[ \t]*[:=])"
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
    _Rule(_ENV_LINE_MID, _env_line_mid, ("=",), _KEY_MID_FINDER),
    _Rule(_ASSIGNMENT_MID, _assignment_mid, ("=", ":"), _KEY_MID_FINDER),
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


# --- applying the rules ---------------------------------------------------------------

def redact_with_count(text: str) -> tuple[str, int]:
    """``text`` with credentials replaced, and how many were replaced."""
    if not text:
        return text, 0
    low = text.lower()
    count = 0
    if _HINT.search(low):
        for rule in _RULES:
            # Gates are tested on the original text: a replacement only ever removes
            # text or inserts "[REDACTED]", so it cannot create a gate substring.
            if rule.gates and not any(gate in low for gate in rule.gates):
                continue
            text, n = _apply(rule, text)
            count += n
    # Last: what no rule named but reads as generated.
    text, n = _redact_generated(text)
    return text, count + n


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
