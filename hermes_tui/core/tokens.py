"""Token counting: a real tokenizer when one is known, else a calibrated estimate.

Counts are cached on each message (``Message.token_count``, tagged with the
counter's name), so a pass counts only what it creates: the new marker. A
transcript's total is kept by ``Transcript`` from these cached counts.
"""

from __future__ import annotations

import math
import re
from pathlib import Path
from typing import Protocol

from hermes_tui.core import content_parts
from hermes_tui.core.transcript import Message

# Chat-template scaffolding per message (ChatML: "<|im_start|>role\n" ... "<|im_end|>\n").
MESSAGE_OVERHEAD = 4
# Per tool call: the wrapper a template puts around name and arguments.
TOOL_CALL_OVERHEAD = 6
# Per image part, whatever its size: OpenAI's vision cost, 85 tokens at ``detail: low``,
# and 765 otherwise (high detail of a 1024x1024 image: 85 + 4 tiles x 170). The real cost
# depends on the model and the picture; a fixed figure keeps occupancy sane where
# counting the base64 as text would make one screenshot look like a whole transcript.
IMAGE_TOKENS_LOW = 85
IMAGE_TOKENS = 765


class TokenCounter(Protocol):
    name: str

    def count_text(self, text: str) -> int: ...


def count_message(counter: TokenCounter, msg: Message) -> int:
    """Tokens of one message as a model sees it, cached on the message."""
    if msg.token_count is not None and msg.token_counter == counter.name:
        return msg.token_count
    total = MESSAGE_OVERHEAD + count_content(counter, msg)
    for call in msg.tool_calls or []:
        function = call.get("function") or {}
        total += TOOL_CALL_OVERHEAD + counter.count_text(str(function.get("name", "")))
        total += counter.count_text(str(function.get("arguments", "")))
    msg.token_count = total
    msg.token_counter = counter.name
    return total


def count_content(counter: TokenCounter, msg: Message) -> int:
    """The content's tokens: its text, and for a list of parts each part by its kind.

    Images count ``IMAGE_TOKENS`` (``IMAGE_TOKENS_LOW`` at low detail); any other part
    that is not text (audio, files, unknown types) counts as its placeholder, which is
    what a text-only model reads. A payload is never counted as text.
    """
    if msg.parts is None:
        return counter.count_text(msg.content)
    total = counter.count_text(content_parts.text_only(msg.parts))
    for part in msg.parts:
        if content_parts.part_text(part) is not None:
            continue
        if content_parts.part_type(part) == "image_url":
            image = part.get("image_url")
            low = isinstance(image, dict) and image.get("detail") == "low"
            total += IMAGE_TOKENS_LOW if low else IMAGE_TOKENS
        else:
            total += counter.count_text(content_parts.describe(part).placeholder())
    return total


def count_messages(counter: TokenCounter, messages: list[Message]) -> int:
    return sum(count_message(counter, m) for m in messages)


class TokenizerCounter:
    """Exact counts from a Hugging Face ``tokenizer.json`` (the ``tokenizers`` library)."""

    def __init__(self, path: Path):
        from tokenizers import Tokenizer  # deferred: keeps start-up light when unused

        self.path = path
        self._tokenizer = Tokenizer.from_file(str(path))
        self.name = f"tokenizer:{path}"

    def count_text(self, text: str) -> int:
        if not text:
            return 0
        return len(self._tokenizer.encode(text, add_special_tokens=False).ids)


# The estimate splits text the way byte-level BPE pre-tokenizers do and charges
# each piece by its kind. Coefficients were fitted by least squares against a
# 65K-vocabulary byte-level BPE tokenizer on the bundled agent sessions
# (benchmarks/calibrate_estimate.py reproduces the fit and prints its error).
_PIECES = re.compile(r"[A-Za-z]+|\d+|\s+|[^\sA-Za-z\d]+")
ESTIMATE_COEFFICIENTS = {
    "word": 0.97,        # per run of letters
    "word_char": 0.075,  # per letter (long identifiers split into several tokens)
    "digit": 0.512,      # per digit (numbers split into short groups)
    "space_run": 1.385,  # per whitespace run other than a single space (newlines, indents)
    "symbol": 0.502,     # per ASCII punctuation character (common pairs merge)
    "other": 0.556,      # per non-ASCII character
}


class EstimateCounter:
    """A calibrated estimate for when no tokenizer is known. Fast and dependency-free."""

    name = "estimate:v1"

    def __init__(self, coefficients: dict[str, float] | None = None):
        self.k = dict(ESTIMATE_COEFFICIENTS if coefficients is None else coefficients)

    def features(self, text: str) -> dict[str, float]:
        f = dict.fromkeys(self.k, 0.0)
        for piece in _PIECES.findall(text):
            first = piece[0]
            if first.isascii() and first.isalpha():
                f["word"] += 1
                f["word_char"] += len(piece)
            elif first.isdigit() and first.isascii():
                f["digit"] += len(piece)
            elif first.isspace():
                if piece != " ":
                    f["space_run"] += 1
            else:
                ascii_part = sum(1 for ch in piece if ch.isascii())
                f["symbol"] += ascii_part
                f["other"] += len(piece) - ascii_part
        return f

    def count_text(self, text: str) -> int:
        if not text:
            return 0
        f = self.features(text)
        return max(1, math.ceil(sum(self.k[key] * value for key, value in f.items())))


def find_tokenizer_file(path: str | Path) -> Path | None:
    """A ``tokenizer.json`` given directly or inside a model folder, if there is one."""
    candidate = Path(path).expanduser()
    if candidate.is_dir():
        candidate = candidate / "tokenizer.json"
    return candidate if candidate.is_file() and candidate.suffix == ".json" else None
