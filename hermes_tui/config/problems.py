"""A config problem as one line naming the file, the line and the dotted key, and the words for
each kind of validation error (with a hint at the likely fix).

It walks whichever schema it is given (``config.Config``), so the schema module can use it
without an import circle.
"""

from __future__ import annotations

import difflib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, get_args, get_origin

import yaml

from hermes_tui.config.provider_registry import PROVIDERS, SECTIONS, provider
from hermes_tui.config.schema import Problem, Section, Setting, ValidationError
from hermes_tui.util.errors import AppError
from hermes_tui.util.untrusted import InputError, load_yaml

__all__ = [
    "ConfigError", "ConfigProblem", "all_keys", "config_error", "named_section_class", "problems_in", "section_class",
    "shown_value", "unknown_key_message",
]


# --------------------------------------------------------------------------- errors


@dataclass(frozen=True)
class ConfigProblem:
    """One problem; ``origin`` is the file (or a label such as ``--set``)."""

    origin: str | None
    line: int | None
    key: str | None
    message: str

    def __str__(self) -> str:
        parts = [self.origin] if self.origin else []
        if self.line is not None:
            parts.append(f"line {self.line}")
        if self.key:
            parts.append(self.key)
        parts.append(self.message)
        return ": ".join(parts)


class ConfigError(AppError):
    """Bad configuration. ``str()`` is one line: the first problem in file order; ``key``
    and ``path`` are that problem's."""

    kind = "config"

    def __init__(self, problems: Sequence[ConfigProblem]):
        if not problems:
            raise ValueError("ConfigError needs at least one problem")
        self.problems: list[ConfigProblem] = list(problems)
        first = self.problems[0]
        self.path, self.line, self.message = first.origin, first.line, first.message
        more = len(self.problems) - 1
        text = str(first) + (f" (and {more} more problem{'s' if more > 1 else ''})" if more else "")
        super().__init__(text, key=first.key)


def config_error(origin: Path | str | None, message: str, *, line: int | None = None, key: str | None = None) -> ConfigError:
    return ConfigError([ConfigProblem(str(origin) if origin else None, line, key, message)])

# --------------------------------------------------------------------------- schema walking


def section_class(info: Setting) -> type[Section] | None:
    ann = info.annotation
    return ann if isinstance(ann, type) and issubclass(ann, Section) else None


def named_section_class(info: Setting) -> type[Section] | None:
    """For a mapping of names to sections (``mcp_servers``), the section class."""
    args = get_args(info.annotation)
    if get_origin(info.annotation) is dict and len(args) == 2:
        cls = args[1]
        return cls if isinstance(cls, type) and issubclass(cls, Section) else None
    return None


def _model_at(schema: type[Section], loc: Sequence[Any]) -> type[Section] | None:
    """The section model reached by following ``loc`` from the root, if any."""
    model = schema
    parts = list(loc)
    while parts:
        part = parts.pop(0)
        info = model.model_fields.get(part) if isinstance(part, str) else None
        cls = section_class(info) if info else None
        if cls is None and info is not None and parts:
            cls = named_section_class(info)
            parts.pop(0)  # the entry's name
        if cls is None:
            return None
        model = cls
    return model


def _field_at(schema: type[Section], loc: Sequence[Any]) -> Setting | None:
    if not loc:
        return None
    model = _model_at(schema, loc[:-1])
    return model.model_fields.get(loc[-1]) if model and isinstance(loc[-1], str) else None


def all_keys(model: type[Section], prefix: str = "") -> list[str]:
    keys = []
    for name, info in model.model_fields.items():
        keys.append(prefix + name)
        cls = section_class(info)
        if cls:
            keys.extend(all_keys(cls, prefix + name + "."))
    return keys

# --------------------------------------------------------------------------- messages


def shown_value(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, Mapping):
        return "a section of keys"
    if isinstance(value, (list, tuple, set)):
        return "a list"
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def _bounds(info: Setting | None) -> str:
    words = {"gt": "greater than", "ge": "at least", "lt": "less than", "le": "at most"}
    parts = []
    for item in info.metadata if info else ():
        for attr, word in words.items():
            bound = getattr(item, attr, None)
            if bound is not None:
                parts.append(f"{word} {bound}")
    return " and ".join(parts)


def _unquote_hint(value: Any, wanted: type) -> str:
    if not isinstance(value, str):
        return ""
    if value.strip().endswith("%") and wanted is float:
        return " (write a fraction: 0.8 for 80%)"
    try:
        parsed, _ = load_yaml(value)
    except InputError:
        return ""
    ok = type(parsed) is wanted or (wanted is float and type(parsed) is int)
    return " (remove the quotes)" if ok else ""


def unknown_key_message(schema: type[Section], loc: Sequence[Any]) -> str:
    name = str(loc[-1])
    here = ".".join(str(p) for p in loc[:-1])
    model = _model_at(schema, loc[:-1])
    choices = list(model.model_fields) if model else []
    close = difflib.get_close_matches(name, choices, n=1, cutoff=0.6)
    if close:
        return f"unknown key (did you mean {close[0]}?)"
    homes = [k.rpartition(".")[0] for k in all_keys(schema) if k.rpartition(".")[2] == name]
    homes = [h for h in homes if h != here]
    if homes:
        where = " or ".join(h or "the top level" for h in homes)
        return f"unknown key (it belongs under {where})"
    listing = ", ".join(choices)
    return f"unknown key (known keys here: {listing})" if listing else "unknown key"


def _message(schema: type[Section], err: Problem) -> str:
    kind, loc, value = err["type"], err["loc"], err.get("input")
    info = _field_at(schema, loc)
    got = shown_value(value)
    if kind in ("extra_forbidden", "invalid_key"):
        return unknown_key_message(schema, loc)
    if kind in ("float_type", "float_parsing"):
        return f"expected a number, got {got}{_unquote_hint(value, float)}"
    if kind in ("int_type", "int_parsing", "int_from_float"):
        return f"expected a whole number, got {got}{_unquote_hint(value, int)}"
    if kind in ("bool_type", "bool_parsing"):
        return f"expected true or false, got {got}{_unquote_hint(value, bool)}"
    if kind == "string_type":
        hint = f' (put it in quotes: "{value}")' if isinstance(value, (int, float, bool)) else ""
        return f"expected text, got {got}{hint}"
    if kind == "literal_error":
        choices = [str(c) for c in get_args(info.annotation)] if info else []
        message = f"expected one of {', '.join(choices)}; got {got}" if choices else f"{err['msg']}, got {got}"
        known = provider(value) if loc[-1] == "provider" and isinstance(value, str) else None
        if known is not None:  # a provider of the other role
            return message + f" ({value} is only for {' and '.join(f'{SECTIONS[r]}.provider' for r in known.roles)})"
        # What people write for a provider (a server's name, say): the registry says which one it is.
        alias = next((p for p in PROVIDERS if isinstance(value, str) and value.lower() in p.aliases), None)
        if alias is not None:
            return message + f" ({alias.alias_hint})"
        if isinstance(value, str):
            close = [c for c in choices if c.lower() == value.lower()] or difflib.get_close_matches(value, choices, 1)
            if close:
                return message + f" (did you mean {close[0]}?)"
        return message
    if kind in ("model_type", "model_attributes_type", "dict_type"):
        return f"expected a section of keys (key: value lines), got {got}"
    if kind in ("greater_than", "greater_than_equal", "less_than", "less_than_equal"):
        bounds = _bounds(info) or err["msg"].lower()
        nullable = " (or null)" if info is not None and info.default is None else ""
        return f"must be {bounds}{nullable}, got {got}"
    if kind == "finite_number":
        return f"must be a finite number, got {got}"
    if kind in ("env_var_name", "http_url", "env_reference", "mcp_transport", "mcp_server_name", "watermarks"):
        return err["msg"]
    message = err["msg"]
    return f"{message[:1].lower()}{message[1:]}, got {got}"


def problems_in(
    schema: type[Section], exc: ValidationError, origin: str | None, root: yaml.Node | None
) -> list[ConfigProblem]:
    found = []
    for err in exc.errors():
        loc = tuple(err["loc"])
        line = _line_of(root, loc, at_key=err["type"] in ("extra_forbidden", "invalid_key")) if root else None
        found.append(ConfigProblem(origin, line, ".".join(str(p) for p in loc) or None, _message(schema, err)))
    return sorted(found, key=lambda p: (p.line is None, p.line or 0))

# --------------------------------------------------------------------------- YAML nodes


def _line_of(root: yaml.Node, loc: Sequence[Any], *, at_key: bool) -> int:
    """1-based line of the node at ``loc`` (its key for unknown keys), or the nearest parent."""
    node, line = root, root.start_mark.line + 1
    for part in loc:
        if not isinstance(node, yaml.MappingNode):
            break
        pair = next(
            ((k, v) for k, v in node.value if isinstance(k, yaml.ScalarNode) and k.value == str(part)), None
        )
        if pair is None:
            break
        key_node, node = pair
        line = key_node.start_mark.line + 1
    else:
        if not at_key:
            line = node.start_mark.line + 1
    return line
