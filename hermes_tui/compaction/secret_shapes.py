"""What a credential looks like: the compiled shapes (known prefixes, PEM blocks, webhooks, auth
headers), the secret-naming key assignments, and the entropy tests that tell a generated token
from an identifier, a path or prose. ``secret_rules`` turns them into replacements; the
policy and its reasons are in ``redaction``'s docstring.
"""

from __future__ import annotations

import base64
import binascii
import math
import re
from collections import Counter

from hermes_tui.compaction.lazy_pattern import lazy_compile

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
