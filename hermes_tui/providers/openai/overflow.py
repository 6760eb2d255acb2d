"""Recognising a request a server refused because it does not fit the model's context window.

Each server says it in its own words (HTTP 400 unless noted), and most give the figures:

* llama.cpp ``llama-server``: ``request (4476 tokens) exceeds the available context size
  (4096 tokens), try increasing it``, type ``exceed_context_size_error``, with
  ``n_prompt_tokens`` and ``n_ctx`` beside the message; older builds: ``the request exceeds
  the available context size, try increasing it``;
* vLLM: ``This model's maximum context length is 4096 tokens. However, you requested 5000
  tokens (4000 in the messages, 1000 in the completion)``, newer ``... and your request has
  2778 input tokens``, or ``The decoder prompt (length 12324) is longer than the maximum
  model length of 8192``;
* OpenAI (and hosted APIs that copy it): code ``context_length_exceeded``, ``This model's
  maximum context length is 16385 tokens. However, your messages resulted in 31228 tokens``;
* LM Studio: ``Trying to keep the first 10136 tokens when context the overflows. However,
  the model is loaded with context length of only 7866 tokens``, or ``Reached context
  length of 4096 tokens``; some versions send it with status 200 as an error object;
* Ollama: ``the input length exceeds the context length`` (no figures).

``recognise`` answers with the server's words and figures (an ``Overflow``, which the chat's
``ChatError`` carries), or None for anything else, so a 400 about a bad model name stays what it is.
"""

from __future__ import annotations

import re
from typing import Any

from hermes_tui.chat.client import Overflow

# Lower-case phrases, each specific enough not to match an unrelated 400.
WORDINGS = (
    "exceeds the available context size",      # llama.cpp
    "exceed_context_size_error",               # llama.cpp's error type
    "exceeds context size",                    # llama.cpp (some builds)
    "is larger than the max context size",     # llama.cpp (older builds)
    "maximum context length is",               # vLLM, OpenAI
    "context_length_exceeded",                 # OpenAI's code
    "is longer than the maximum model length",  # vLLM
    "context the overflows",                   # LM Studio (sic)
    "context length of only",                  # LM Studio
    "reached context length of",               # LM Studio
    "exceeds context length",                  # LM Studio (older)
    "exceeds the context length",              # Ollama
    "context length exceeded",
)

_PAIRS = (  # (prompt tokens, window) in one phrase
    re.compile(r"request \((\d+) tokens\) exceeds (?:the available )?context size \((\d+) tokens\)"),
    re.compile(r"input \((\d+) tokens\) is larger than the max context size \((\d+) tokens\)"),
    re.compile(r"\(length (\d+)\) is longer than the maximum model length of (\d+)"),
    re.compile(r"keep the first (\d+) tokens.*?context length of only (\d+) tokens", re.DOTALL),
    re.compile(r"input length (\d+) exceeds context length (\d+)"),
)
_WINDOW = (
    re.compile(r"maximum context length is (\d+) tokens"),
    re.compile(r"reached context length of (\d+) tokens"),
)
_PROMPT = (
    re.compile(r"\((\d+) in the messages"),
    re.compile(r"messages resulted in (\d+) tokens"),
    re.compile(r"your request has (\d+) input tokens"),
    re.compile(r"prompt contains at least (\d+) input tokens"),
)


def recognise(text: str, body: Any = None) -> Overflow | None:
    """The overflow ``text`` (a server's error message) describes; None when it is another error.

    ``body``: the error object, for llama.cpp's ``n_prompt_tokens`` / ``n_ctx`` fields.
    """
    fields = body if isinstance(body, dict) else {}
    lowered = " ".join((text or "").split()).lower()
    if not any(words in lowered for words in WORDINGS) and fields.get("type") != "exceed_context_size_error":
        return None
    prompt, window = _count(fields.get("n_prompt_tokens")), _count(fields.get("n_ctx"))
    for pattern in _PAIRS:
        match = pattern.search(lowered)
        if match:
            prompt, window = prompt or int(match.group(1)), window or int(match.group(2))
            break
    for pattern in _WINDOW:
        if window is None and (match := pattern.search(lowered)):
            window = int(match.group(1))
    for pattern in _PROMPT:
        if prompt is None and (match := pattern.search(lowered)):
            prompt = int(match.group(1))
    return Overflow(" ".join((text or "").split()), prompt, window)


def _count(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else None
