"""Deterministic credential redaction.

Every text is passed through ``redact`` before a summarizer sees it, and the
summarizer's output is passed through it again: a small model told to drop secrets
will still copy one now and then, and a secret in the rolling summary would ride
along in every later request.

Rules run in a fixed order, each one a compiled regex (the shapes: ``secret_shapes``; the
ordered rules: ``secret_rules``; this module applies them). They find a credential by
what gives it away, not by a list of examples:

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

import re
from dataclasses import replace
from typing import Any

from hermes_tui.compaction.secret_rules import _HINT, _RULES, _redact_generated, _Rule
from hermes_tui.compaction.secret_shapes import REDACTED, looks_generated
from hermes_tui.core.transcript import Message

__all__ = [
    "REDACTED", "contains_secret", "count_secrets", "looks_generated", "redact", "redact_message", "redact_with_count",
]


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
