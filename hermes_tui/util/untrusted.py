"""Load JSON and YAML that come from outside: transcripts, config.yaml, log lines.

The standard loaders trust their input in ways a hand-edited or hostile file breaks:
``json`` raises ``RecursionError`` on deep brackets and a bare ``ValueError`` on an
integer of more than 4,300 digits; PyYAML recurses once per nesting level, raises
from its constructor before any ``try`` for a NUL byte, and turns ``"\\ud800"`` into
a string that no UTF-8 file, terminal or SQLite database accepts. What every caller
needs instead is one exception, :class:`InputError`, whose text is one line saying
where and what, and a result that is safe to walk, store and print:

- containers nested at most :data:`MAX_DEPTH` deep (YAML aliases count: an alias
  is as deep as what it names, so a chain of aliases cannot build a deep tree, and
  an alias inside its own anchor is refused);
- integers Python can print (``sys.get_int_max_str_digits()``);
- strings without lone surrogates. We refuse rather than replace them: a file is
  the user's data, and changing it silently is worse than saying which value is bad.

Aliases themselves are cheap here: a YAML alias is the node it names, never a copy,
so an "alias bomb" costs what its text costs as long as walkers of the node tree
visit each node once.
"""

from __future__ import annotations

import functools
import json
import re
import sys
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Any

from hermes_tui.util.errors import AppError

if TYPE_CHECKING:
    import yaml

__all__ = [
    "MAX_DEPTH", "NOT_JSON", "InputError", "decode_json_at", "is_high_surrogate", "load_json", "load_yaml", "model_text", "path_text",
]

# Far beyond any transcript, telemetry line or config (about 10 levels), far below
# the recursion limit of anything that later walks the result.
MAX_DEPTH = 100

# The kind of an InputError for text that is not JSON at all (others: it is, but unreadable).
NOT_JSON = "not valid JSON"

_LONE_SURROGATE = re.compile(r"[\ud800-\udfff]")
_SURROGATE_ESCAPE = re.compile(r"\\u[dD][89a-fA-F][0-9a-fA-F]{2}")
# Scanning JSON text for where a limit was crossed: strings are skipped whole, so
# brackets and digits inside them do not count.
_JSON_STRING = r'"(?:[^"\\]|\\.)*"'
_JSON_NESTING = re.compile(_JSON_STRING + r"|[\[\]{}]")


class InputError(AppError, ValueError):
    """Input that cannot be loaded. ``str()``: ``"<kind> at line L, column C: <detail>"``.

    ``line``/``column`` are 1-based when known; ``path`` is the keys and indexes
    leading to the value at fault inside the document (JSON values found after
    decoding have a path and no line).
    """

    def __init__(
        self, kind: str, detail: str, *, line: int | None = None, column: int | None = None,
        path: Sequence[Any] = (),
    ):
        self.kind, self.detail, self.line, self.column, self.path = kind, detail, line, column, tuple(path)
        super().__init__(f"{kind}{self.where}: {detail}")

    @property
    def where(self) -> str:
        if self.line is not None:
            return f" at line {self.line}" + (f", column {self.column}" if self.column is not None else "")
        return f" at {path_text(self.path)}" if self.path else ""


def path_text(path: Sequence[Any]) -> str:
    """``("tool_calls", 0, "function")`` -> ``tool_calls[0].function``."""
    return "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in path).lstrip(".")


def _max_int_digits() -> int:
    return sys.get_int_max_str_digits() or 4300


def _too_many_digits(value: int) -> bool:
    # Cheaper than len(str(value)), which is exactly what fails; a little strict near the edge.
    return value.bit_length() > _max_int_digits() * 3.3


def _surrogate_detail(text: str) -> str | None:
    found = _LONE_SURROGATE.search(text)
    if found is None:
        return None
    return f"{found.group()!r} is a lone surrogate (half of a UTF-16 pair): it cannot be stored or shown"


def _line_column(text: str, position: int, first_line: int = 1) -> tuple[int, int]:
    line_start = text.rfind("\n", 0, position) + 1
    return first_line + text.count("\n", 0, position), position - line_start + 1


# --------------------------------------------------------------------------- model output


def model_text(pieces: Iterable[str]) -> str:
    """Text a model sent, joined: a UTF-16 surrogate pair split between pieces (two stream
    chunks, each with half an escape) is rebuilt, and any other lone surrogate becomes
    U+FFFD. Model output, unlike a user's file, is ours to repair: refusing it would lose
    a whole reply or summary over one character no file, terminal or database accepts."""
    text = "".join(pieces)
    if _LONE_SURROGATE.search(text) is None:
        return text
    return text.encode("utf-16-le", "surrogatepass").decode("utf-16-le", "replace")


def is_high_surrogate(char: str) -> bool:
    """The first half of a UTF-16 pair: a stream may carry its second half in the next chunk."""
    return "\ud800" <= char <= "\udbff"


# --------------------------------------------------------------------------- JSON


def load_json(text: str, *, first_line: int = 1, model_output: bool = False) -> Any:
    """``json.loads(text)``, bounded. ``first_line``: the line ``text`` starts on in its file.

    ``model_output``: lone surrogates are let through, for the caller to repair with
    :func:`model_text` (a stream may split a pair between two chunks)."""
    return _decode(text, 0, first_line, whole=True, surrogates_checked=not model_output)[0]


def decode_json_at(text: str, start: int) -> tuple[Any, int]:
    """The JSON value that starts at ``text[start]`` and where it ends (``raw_decode``), bounded."""
    return _decode(text, start, 1, whole=False)


def _decode(
    text: str, start: int, first_line: int, *, whole: bool, surrogates_checked: bool = True
) -> tuple[Any, int]:
    try:
        if whole:
            value, end = json.loads(text), len(text)
        else:
            value, end = json.JSONDecoder().raw_decode(text, start)
    except json.JSONDecodeError as exc:
        line, column = _line_column(text, exc.pos, first_line)
        raise InputError(NOT_JSON, exc.msg, line=line, column=column) from None
    except RecursionError:
        raise _too_deep_json(text, start, first_line) from None
    except ValueError as exc:  # int() refusing a literal of too many digits
        raise _long_number_json(text, start, first_line, exc) from None
    _check_json_tree(value, text, start, first_line, surrogates_checked)
    return value, end


def _check_json_tree(value: Any, text: str, start: int, first_line: int, surrogates_checked: bool) -> None:
    # Level by level and without recursion, so the check itself has no depth limit.
    level = [value] if isinstance(value, (dict, list)) else []
    depth = 0
    while level:
        depth += 1
        if depth > MAX_DEPTH:
            raise _too_deep_json(text, start, first_line)
        below: list[Any] = []
        for item in level:
            below.extend(v for v in (item.values() if isinstance(item, dict) else item) if isinstance(v, (dict, list)))
        level = below
    # A decoded string holds a lone surrogate only if the text has one or spells one
    # as an escape: look for the value (and its path) only then.
    if surrogates_checked and (_SURROGATE_ESCAPE.search(text, start) or _LONE_SURROGATE.search(text, start)):
        _check_strings(value)


def _check_strings(value: Any) -> None:
    # Children are pushed in reverse, so the first bad value in document order is reported.
    stack: list[tuple[Any, tuple[Any, ...]]] = [(value, ())]
    while stack:
        item, path = stack.pop()
        if isinstance(item, str):
            if detail := _surrogate_detail(item):
                raise InputError("not valid text", detail, path=path)
        elif isinstance(item, (dict, list)):
            if isinstance(item, dict):
                for key in item:
                    if detail := _surrogate_detail(key):
                        raise InputError("not valid text", f"a key: {detail}", path=path)
            pairs = list(item.items() if isinstance(item, dict) else enumerate(item))
            stack.extend((child, (*path, key)) for key, child in reversed(pairs))


def _too_deep_json(text: str, start: int, first_line: int) -> InputError:
    depth = 0
    position = start
    for token in _JSON_NESTING.finditer(text, start):
        char = token.group()
        if char in "[{":
            depth += 1
            if depth > MAX_DEPTH:
                position = token.start()
                break
        elif char in "]}":
            depth -= 1
    line, column = _line_column(text, position, first_line)
    return InputError("too deeply nested", f"more than {MAX_DEPTH} levels of [ ] or {{ }}", line=line, column=column)


def _long_number_json(text: str, start: int, first_line: int, exc: ValueError) -> InputError:
    limit = _max_int_digits()
    pattern = re.compile(_JSON_STRING + rf"|-?\d{{{limit + 1},}}")
    for token in pattern.finditer(text, start):
        if not token.group().startswith('"'):
            line, column = _line_column(text, token.start(), first_line)
            digits = len(token.group().lstrip("-"))
            return InputError(
                "number too long", f"an integer of {digits:,} digits (at most {limit:,} are read)",
                line=line, column=column,
            )
    return InputError(NOT_JSON, str(exc))


# --------------------------------------------------------------------------- YAML


def load_yaml(text: str) -> tuple[Any, yaml.Node | None]:
    """The single document in ``text`` (safe tags only) and its node tree, for line numbers.

    The tree holds aliases as shared nodes: walk it with a visited set.
    """
    import yaml  # here, not at the top: report.py uses the JSON half and is stdlib only

    try:
        loader = _bounded_loader()(text)  # the reader checks every character here already
    except yaml.reader.ReaderError as exc:
        raise _reader_error(text, exc) from None
    try:
        node = loader.get_single_node()
        data = loader.construct_document(node) if node is not None else None
    except yaml.MarkedYAMLError as exc:
        raise _marked_error(exc) from None
    except yaml.reader.ReaderError as exc:
        raise _reader_error(text, exc) from None
    except yaml.YAMLError as exc:
        raise InputError("not valid YAML", " ".join(str(exc).split())) from None
    finally:
        loader.dispose()
    return data, node


def _reader_error(text: str, exc: yaml.reader.ReaderError) -> InputError:
    line, column = _line_column(text, exc.position)
    if isinstance(exc.character, int):
        detail = f"unacceptable character #x{exc.character:04x}: {exc.reason}"
    else:
        detail = str(exc.reason)
    return InputError("not valid YAML", detail, line=line, column=column)


def _marked_error(exc: yaml.MarkedYAMLError) -> InputError:
    mark = exc.problem_mark or exc.context_mark
    problem = " ".join(str(exc.problem or "syntax error").split())
    if exc.context:
        started = exc.context_mark
        since = f" started on line {started.line + 1}" if started and mark and started.line != mark.line else ""
        context = " ".join(str(exc.context).split())
        # PyYAML splits some sentences in two ("expected X" / "but found Y").
        problem = f"{context}, {problem}" if problem.startswith("but ") else f"{problem} ({context}{since})"
    if mark is None:
        return InputError("not valid YAML", problem)
    return InputError("not valid YAML", problem, line=mark.line + 1, column=mark.column + 1)


def _at(mark: yaml.Mark, kind: str, detail: str) -> InputError:
    return InputError(kind, detail, line=mark.line + 1, column=mark.column + 1)


@functools.cache
def _bounded_loader() -> type[yaml.SafeLoader]:
    """SafeLoader that bounds nesting (aliases included) and refuses unprintable values."""
    import yaml
    from yaml.events import AliasEvent
    from yaml.nodes import MappingNode, Node, ScalarNode, SequenceNode

    class BoundedLoader(yaml.SafeLoader):
        def __init__(self, stream: str):
            super().__init__(stream)
            self._depth = 0  # collections open around the node being composed
            self._heights: dict[int, int] = {}  # id(node) -> levels at and below it, once composed

        def compose_node(self, parent: Node | None, index: Any) -> Node | None:
            if self.check_event(AliasEvent):
                mark = self.peek_event().start_mark  # type: ignore[no-untyped-call]  # unannotated in PyYAML's stubs
                node = super().compose_node(parent, index)
                height = self._heights.get(id(node))
                if height is None:
                    raise _at(mark, "not valid YAML", "an alias inside the collection it names (a loop)")
                if self._depth + height > MAX_DEPTH:
                    raise _at(mark, "too deeply nested", f"through aliases, more than {MAX_DEPTH} levels")
                return node
            self._depth += 1
            if self._depth > MAX_DEPTH:
                mark = self.peek_event().start_mark  # type: ignore[no-untyped-call]  # unannotated in PyYAML's stubs
                raise _at(mark, "too deeply nested", f"more than {MAX_DEPTH} levels")
            node = super().compose_node(parent, index)
            self._depth -= 1
            if isinstance(node, SequenceNode):
                children: list[Node] = node.value
            elif isinstance(node, MappingNode):
                children = [part for pair in node.value for part in pair]
            else:
                children = []
            self._heights[id(node)] = 1 + max((self._heights.get(id(c), 1) for c in children), default=0)
            return node

        def construct_scalar(self, node: ScalarNode | MappingNode) -> Any:
            value = super().construct_scalar(node)
            if isinstance(value, str) and (detail := _surrogate_detail(value)):
                raise _at(node.start_mark, "not valid text", detail)
            return value

        def construct_yaml_int(self, node: ScalarNode) -> int:
            try:
                value = super().construct_yaml_int(node)
            except ValueError:
                value = None  # int() refused a literal of more digits than it reads
            if value is None or _too_many_digits(value):
                raise _at(node.start_mark, "number too long", f"an integer of more than {_max_int_digits():,} digits")
            return value

    BoundedLoader.add_constructor("tag:yaml.org,2002:int", BoundedLoader.construct_yaml_int)
    return BoundedLoader
