"""Read ``config.yaml``: one bounded YAML parse, duplicate keys refused, then the schema.

Every problem becomes a :class:`~hermes_tui.config.problems.ConfigError` whose text is one line
naming the file, the line and the dotted key. It reads into the schema it is given, so the
schema module offers ``config.load_config`` without an import circle.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, TypeVar

import yaml

from hermes_tui.config.problems import (
    ConfigError,
    ConfigProblem,
    config_error,
    problems_in,
    shown_value,
)
from hermes_tui.config.schema import Section, ValidationError
from hermes_tui.util import paths
from hermes_tui.util.untrusted import InputError, load_yaml

__all__ = ["read_config"]

Schema = TypeVar("Schema", bound=Section)


def _duplicate_keys(root: yaml.Node, origin: str) -> list[ConfigProblem]:
    # PyYAML keeps the last of two equal keys and drops the first without a word;
    # that silently loses a setting, so it is an error here. An alias is the node it
    # names, shared: each node is checked once, or an alias bomb takes exponential time.
    found: list[ConfigProblem] = []
    visited: set[int] = set()
    pending: list[tuple[yaml.Node, str]] = [(root, "")]
    while pending:
        node, prefix = pending.pop()
        if id(node) in visited:
            continue
        visited.add(id(node))
        if isinstance(node, yaml.MappingNode):
            seen: dict[str, int] = {}
            for key_node, value_node in node.value:
                if not isinstance(key_node, yaml.ScalarNode) or key_node.tag == "tag:yaml.org,2002:merge":
                    continue
                line = key_node.start_mark.line + 1
                dotted = prefix + key_node.value
                if key_node.value in seen:
                    found.append(
                        ConfigProblem(origin, line, dotted, f"duplicate key (also set on line {seen[key_node.value]})")
                    )
                else:
                    seen[key_node.value] = line
                pending.append((value_node, dotted + "."))
        elif isinstance(node, yaml.SequenceNode):
            pending.extend((item, prefix) for item in node.value)
    return found


def _parse(text: str, origin: str) -> tuple[Any, yaml.Node | None]:
    """The document's data and its node tree (for line numbers), from one bounded parse."""
    try:
        return load_yaml(text)
    except InputError as exc:
        raise config_error(origin, str(exc)) from None


def read_config(schema: type[Schema], path: Path | None = None) -> Schema:
    """Read and validate ``path`` (default: :func:`paths.config_path`).

    A missing file, an empty file or one holding only comments gives the defaults.
    Loading never creates the file.
    """
    path = Path(path) if path is not None else paths.config_path()
    origin = str(path)
    try:
        text = path.read_text(encoding="utf-8-sig")
    except FileNotFoundError:
        return schema()
    except UnicodeDecodeError as exc:
        raise config_error(origin, f"not UTF-8 text (bad byte at offset {exc.start})") from None
    except OSError as exc:
        raise config_error(origin, f"cannot read: {exc.strerror or exc}") from None

    data, root = _parse(text, origin)
    if data is None:
        return schema()
    if not isinstance(data, dict):
        line = root.start_mark.line + 1 if root is not None else None
        raise config_error(
            origin, f"the top level must be sections of keys (model, compression, auxiliary), got {shown_value(data)}", line=line
        )
    problems = _duplicate_keys(root, origin) if root is not None else []
    try:
        config = schema.model_validate(data)
    except ValidationError as exc:
        problems += problems_in(schema, exc, origin, root)
    if problems:
        raise ConfigError(sorted(problems, key=lambda p: (p.line is None, p.line or 0)))
    return config
