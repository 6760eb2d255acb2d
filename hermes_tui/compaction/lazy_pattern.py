"""Regular expressions compiled at their first use, not at import.

The redaction rules, the secret shapes, the fact patterns and the summary checks are over a
hundred expressions; compiling them all at import is paid before the app's first frame,
while the first pass needs them seconds later at the earliest.
"""

from __future__ import annotations

import re
from typing import Any

_PATTERN_ATTRIBUTES = ("search", "match", "fullmatch", "finditer", "findall", "sub", "subn", "split",
                       "scanner", "pattern", "flags", "groups", "groupindex")


class LazyPattern:
    """A ``re.Pattern`` for every use but ``re``'s own functions (pass ``compiled()`` there).

    The first attribute read compiles it and keeps the pattern's methods on the instance, so
    later calls cost what they cost on the pattern itself."""

    def __init__(self, pattern: str, flags: int | re.RegexFlag = 0) -> None:
        self._source = (pattern, flags)

    def compiled(self) -> re.Pattern[str]:
        compiled = re.compile(*self._source)  # re caches it: a second call is a lookup
        # Two threads may both get here: each stores the same pattern's methods.
        self.__dict__.update({name: getattr(compiled, name) for name in _PATTERN_ATTRIBUTES})
        return compiled

    def __getattr__(self, name: str) -> Any:
        if name not in _PATTERN_ATTRIBUTES:
            raise AttributeError(name)
        return getattr(self.compiled(), name)

    def __repr__(self) -> str:
        return f"LazyPattern({self._source[0]!r})"


def lazy_compile(pattern: str, flags: int | re.RegexFlag = 0) -> re.Pattern[str]:
    """``re.compile(pattern, flags)``, done at the pattern's first use."""
    return LazyPattern(pattern, flags)  # type: ignore[return-value]  # used as a Pattern
