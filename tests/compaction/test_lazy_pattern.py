"""The redaction, fact and check tables compile their expressions at first use, not at import."""

from __future__ import annotations

import re
import subprocess
import sys

from hermes_tui.compaction.lazy_pattern import LazyPattern, lazy_compile


def test_a_lazy_pattern_matches_as_the_compiled_one():
    lazy = lazy_compile(r"(?P<key>token)=(\w+)", re.IGNORECASE)
    plain = re.compile(r"(?P<key>token)=(\w+)", re.IGNORECASE)
    text = "a TOKEN=abc and token=def"
    assert lazy.search(text).group(2) == plain.search(text).group(2) == "abc"
    assert lazy.sub("<x>", text) == plain.sub("<x>", text)
    assert [m.span() for m in lazy.finditer(text)] == [m.span() for m in plain.finditer(text)]
    assert lazy.match(text, 2).group("key") == "TOKEN"
    assert (lazy.pattern, lazy.flags, lazy.groups, lazy.groupindex) == (
        plain.pattern, plain.flags, plain.groups, plain.groupindex)


def test_it_compiles_at_first_use_only():
    lazy = LazyPattern(r"\d+")
    assert "search" not in vars(lazy)
    assert lazy.search("ab12").group() == "12"
    assert vars(lazy)["search"].__self__ is re.compile(r"\d+")  # the pattern's own method from now on


def test_a_bad_expression_fails_at_first_use():
    lazy = lazy_compile(r"(unclosed")
    try:
        lazy.search("x")
    except re.error:
        pass
    else:
        raise AssertionError("expected re.error")


def test_importing_the_tables_compiles_none_of_them():
    code = (
        "import re, hermes_tui.compaction.lazy_pattern as lp\n"
        "compiled = []\n"
        "real = re.compile\n"
        "lp.re = type('R', (), {'compile': staticmethod(lambda *a: compiled.append(a) or real(*a))})\n"
        "import hermes_tui.compaction.redaction, hermes_tui.compaction.facts, hermes_tui.compaction.checks\n"
        "print(len(compiled))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "0"
