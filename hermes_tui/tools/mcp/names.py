"""Tool names the model sees: ``server__tool``, OpenAI-safe, at most 64 characters, unique.

MCP tool names may hold dots, slashes or spaces and run long; the model's API accepts
``^[A-Za-z0-9_-]{1,64}$`` only. Each character outside that set becomes ``_``; a name too
long is cut and given a short hash of the original, so two long names sharing a prefix
stay apart; a collision left over gets ``_2``, ``_3``...
"""

from __future__ import annotations

import hashlib
import re

MAX_NAME = 64
SEPARATOR = "__"
_UNSAFE = re.compile(r"[^A-Za-z0-9_-]")


def _digest(text: str) -> str:
    return hashlib.sha1(text.encode("utf-8")).hexdigest()[:6]


def namespaced(server: str, tool: str, taken: set[str]) -> str:
    """The name for ``tool`` of ``server``, not in ``taken`` (which it is then added to)."""
    base = f"{_UNSAFE.sub('_', server)}{SEPARATOR}{_UNSAFE.sub('_', tool) or _digest(tool)}"
    if len(base) > MAX_NAME:
        base = f"{base[: MAX_NAME - 7]}_{_digest(tool)}"
    name, n = base, 1
    while name in taken:
        n += 1
        suffix = f"_{n}"
        name = base[: MAX_NAME - len(suffix)] + suffix
    taken.add(name)
    return name
