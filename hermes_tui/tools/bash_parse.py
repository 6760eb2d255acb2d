"""A bash command as the shell will read it: its simple commands and their words.

``run_shell`` runs ``bash -c COMMAND``, so the approval check must see what bash sees.
Splitting with ``shlex`` did not: it knows nothing of globs, braces, ``~+``, substitutions,
redirections or comments. This module parses with tree-sitter-bash (the grammar Codex's
command-safety check uses), and turns each word into its value when the grammar proves
the value is fixed text (quotes removed, escapes resolved), noting what bash would still
expand (an unquoted glob, a brace list, a tilde). A word holding any expansion
(``$x``, ``$(...)``, backticks, ``$'...'``, arithmetic) has no value: it is not judged.

tree-sitter is imported on first use: start-up does not pay for it.
"""

from __future__ import annotations

import re
import threading
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any

# Node types a statement may be made of for the command to count as one simple command.
_LITERAL_PARTS = frozenset({"word", "string", "raw_string", "concatenation", "number"})
# Bash's brace expansion needs an unquoted "{...,...}" or "{a..b}"; "HEAD@{1}" is plain text.
_BRACE = re.compile(r"\{[^{}]*(,|\.\.)[^{}]*\}")
_QUOTED = "\0"  # stands for a quoted character in ``Word.shape``


@dataclass(frozen=True)
class Word:
    """One word of a simple command. ``text`` is its value after quote removal, or None
    when it holds an expansion. ``shape`` is the same with every quoted character replaced
    by NUL, so what bash would still expand (globs, braces, ``~``) shows in it alone."""

    text: str | None
    shape: str = ""
    pattern: str = ""  # ``text`` as a glob pattern: quoted parts escaped

    @property
    def glob(self) -> bool:
        return any(c in self.shape for c in "*?[")

    @property
    def brace(self) -> bool:
        return bool(_BRACE.search(self.shape))

    @property
    def tilde(self) -> bool:
        return self.shape.startswith("~")

    @property
    def inner_tilde(self) -> bool:
        """``x=~/a`` and ``a:~/b``: bash expands these too, in words that look like assignments."""
        return "=~" in self.shape or ":~" in self.shape


@dataclass(frozen=True)
class SimpleCommand:
    """``assignments`` (``CI=1``) come before the command; ``words`` are its name and arguments."""

    assignments: tuple[Word, ...]
    words: tuple[Word, ...]

    @property
    def literal(self) -> bool:
        return all(w.text is not None for w in self.words)

    @property
    def texts(self) -> tuple[str, ...]:
        """The words' values; a word with an expansion stands as ``$?``."""
        return tuple(w.text if w.text is not None else "$?" for w in self.words)


@dataclass(frozen=True)
class Parsed:
    """``single``: the whole command is one simple command, no operator, redirection,
    substitution, subshell or control structure (then ``commands`` holds just it).
    ``commands``: every simple command anywhere in the tree, substitutions included."""

    ok: bool  # the grammar read it without error
    single: bool
    commands: tuple[SimpleCommand, ...] = ()
    redirects: bool = False
    why: str = ""  # why not single
    nodes: frozenset[str] = field(default_factory=frozenset)  # node types seen


@lru_cache(maxsize=1)
def _language() -> Any:
    import tree_sitter_bash
    from tree_sitter import Language

    return Language(tree_sitter_bash.language())


_local = threading.local()


def _parser() -> Any:
    # A parser is not shared between threads (the agent and a UI preview may parse at once).
    parser = getattr(_local, "parser", None)
    if parser is None:
        from tree_sitter import Parser

        parser = _local.parser = Parser(_language())
    return parser


def _unescape_unquoted(raw: str) -> tuple[str, str, str]:
    """An unquoted word's value, shape and glob pattern: ``\\x`` is a quoted ``x``."""
    text, shape, pattern = [], [], []
    i = 0
    while i < len(raw):
        c = raw[i]
        if c == "\\" and i + 1 < len(raw):
            nxt = raw[i + 1]
            i += 2
            if nxt == "\n":
                continue  # a line continuation
            text.append(nxt)
            shape.append(_QUOTED)
            pattern.append(_glob_escape(nxt))
            continue
        text.append(c)
        shape.append(c)
        pattern.append(c)
        i += 1
    return "".join(text), "".join(shape), "".join(pattern)


def _glob_escape(s: str) -> str:
    return "".join(f"[{c}]" if c in "*?[" else c for c in s)


def _double_quoted(raw: str) -> str:
    # Inside "...", a backslash escapes only $ ` " \ and newline.
    return re.sub(r'\\([$`"\\\n])', lambda m: "" if m.group(1) == "\n" else m.group(1), raw)


def _word(node: Any) -> Word:
    t = node.type
    raw = node.text.decode("utf-8", "surrogateescape")
    if t == "word":
        return Word(*_unescape_unquoted(raw))
    if t == "number":
        return Word(raw, raw, raw)
    if t == "raw_string":
        value = raw[1:-1]
        return Word(value, _QUOTED * len(value), _glob_escape(value))
    if t == "string":
        parts = []
        for child in node.children:
            if child.type == '"':
                continue
            if child.type != "string_content":
                return Word(None)
            parts.append(_double_quoted(child.text.decode("utf-8", "surrogateescape")))
        value = "".join(parts)
        return Word(value, _QUOTED * len(value), _glob_escape(value))
    if t == "concatenation":
        words = [_word(c) for c in node.children]
        if any(w.text is None for w in words):
            return Word(None)
        return Word("".join(w.text for w in words),  # type: ignore[misc]
                    "".join(w.shape for w in words), "".join(w.pattern for w in words))
    return Word(None)  # an expansion, substitution, $'...', $"..." or anything newer


def _simple(node: Any) -> SimpleCommand:
    assignments: list[Word] = []
    words: list[Word] = []
    for child in node.children:
        if child.type == "variable_assignment":
            assignments.append(Word(child.text.decode("utf-8", "surrogateescape")))
        elif child.type == "command_name":
            words.extend(_word(c) for c in child.children)
        elif child.is_named and "redirect" not in child.type and child.type != "comment":
            words.append(_word(child))
    return SimpleCommand(tuple(assignments), tuple(words))


def _walk(node: Any, commands: list[SimpleCommand], seen: set[str]) -> None:
    seen.add(node.type)
    if node.type == "command":
        commands.append(_simple(node))
    for child in node.children:
        _walk(child, commands, seen)


def parse(command: str) -> Parsed:
    tree = _parser().parse(command.encode("utf-8", "surrogateescape"))
    root = tree.root_node
    commands: list[SimpleCommand] = []
    seen: set[str] = set()
    _walk(root, commands, seen)
    nodes = frozenset(seen)
    redirects = any("redirect" in t for t in nodes)
    if root.has_error:
        return Parsed(False, False, tuple(commands), redirects, "a command that does not parse", nodes)
    statements = [c for c in root.children if c.type != "comment"]
    if not statements:
        return Parsed(True, False, (), False, "an empty command", nodes)
    if len(statements) > 1 or statements[0].type != "command":
        return Parsed(True, False, tuple(commands), redirects,
                      "a compound command (operators, redirection or expansion)", nodes)
    stmt = statements[0]
    for child in stmt.children:
        if child.type in ("variable_assignment", "comment"):
            continue
        if child.type == "command_name":
            parts = child.children
        elif "redirect" in child.type:
            return Parsed(True, False, tuple(commands), True,
                          "a compound command (operators, redirection or expansion)", nodes)
        else:
            parts = [child]
        if any(not _is_literal(p) for p in parts):
            return Parsed(True, False, tuple(commands), redirects,
                          "a compound command (operators, redirection or expansion)", nodes)
    return Parsed(True, True, tuple(commands), False, "", nodes)


def _is_literal(node: Any) -> bool:
    if node.type not in _LITERAL_PARTS:
        return False
    if node.type == "string":
        return all(c.type in ('"', "string_content") for c in node.children)
    return all(_is_literal(c) for c in node.children) if node.type == "concatenation" else True
