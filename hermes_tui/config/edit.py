"""Save settings into an existing config.yaml without rewriting it.

``save_config`` renders the whole file from the schema: our comments come back, a
user's own comments and layout do not. The settings screen changes a few values, so
this module edits only those values in the text the user already has: each changed
key's scalar is replaced where ``yaml.compose`` says it is (any comment after it on
the line stays), and a key the file lacks is added at the end of its section.

Named sections (``mcp_servers``) are edited entry by entry: a changed key of an entry
is replaced like any value, a new entry is added as a block at the end of its mapping,
and a removed one (``REMOVE``) loses exactly its own lines.

The edit is checked before it is written: the new text must parse and validate to
exactly the config we meant to save. Anything this cannot edit safely (flow style
``{a: 1}``, multi-line or block scalars, anchors, a file that does not load) falls
back to ``save_config``'s full rewrite, and a file that did not load is kept beside
it as ``config.yaml.<time>.bak`` first. A file that is not ours is never rewritten.
"""

from __future__ import annotations

import re
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

# Shared with save_config so both writers format values and replace files the same way.
from hermes_tui.config.problems import ConfigError, ConfigProblem, named_section_class, problems_in
from hermes_tui.config.schema import Section, ValidationError
from hermes_tui.config.settings import Config, apply_overrides, load_config
from hermes_tui.config.write import (
    refuse_foreign_config,
    save_config,
    write_atomically,
    yaml_scalar,
)

__all__ = ["REMOVE", "SaveResult", "apply_changes", "changed_values", "edit_config_text", "keep_backup",
           "save_changes"]

_INDENT = "  "


class _Remove:
    def __repr__(self) -> str:
        return "REMOVE"


REMOVE: Any = _Remove()  # the value of a change that removes a named section's entry


@dataclass(frozen=True)
class SaveResult:
    config: Config               # what is on disk now
    kept_layout: bool            # True: edited in place; False: rewritten from the template
    backup: Path | None = None   # the unreadable file we replaced, kept aside


def changed_values(old: Section, new: Section, prefix: str = "") -> dict[str, Any]:
    """Dotted leaf keys whose value differs between two configs, with the new value; for a
    named section, an entry added is one key (its non-default values), one removed is
    ``REMOVE``."""
    out: dict[str, Any] = {}
    for name, info in type(old).model_fields.items():
        a, b = getattr(old, name), getattr(new, name)
        if isinstance(a, Section):
            out.update(changed_values(a, b, f"{prefix}{name}."))
        elif named_section_class(info) is not None and a != b:
            for entry in [*a, *(e for e in b if e not in a)]:
                key = f"{prefix}{name}.{entry}"
                if entry not in b:
                    out[key] = REMOVE
                elif entry not in a:
                    out[key] = b[entry].model_dump(exclude_defaults=True)
                else:
                    out.update(changed_values(a[entry], b[entry], key + "."))
        elif a != b:
            out[prefix + name] = b
    return out


def _is_entry(dotted: str) -> bool:
    parts = dotted.split(".")
    info = Config.model_fields.get(parts[0])
    return len(parts) == 2 and info is not None and named_section_class(info) is not None


def apply_changes(config: Config, changes: Mapping[str, Any]) -> Config:
    """``apply_overrides``, and also whole entries of named sections added (a mapping) or
    removed (``REMOVE``), as ``"mcp_servers.docs"``. Raises ConfigError."""
    entries = {k: v for k, v in changes.items() if _is_entry(k) and (v is REMOVE or isinstance(v, Mapping))}
    if entries:
        data = config.model_dump(warnings=False)
        for dotted, value in entries.items():
            section, name = dotted.split(".")
            if value is REMOVE:
                data[section].pop(name, None)
            else:
                data[section][name] = dict(value)
        try:
            config = Config.model_validate(data)
        except ValidationError as exc:
            raise ConfigError(problems_in(Config, exc, None, None)) from None
    rest = {k: v for k, v in changes.items() if k not in entries}
    return apply_overrides(config, rest) if rest else config


def save_changes(path: Path, changes: Mapping[str, Any], *, base: Config | None = None) -> SaveResult:
    """Apply dotted ``changes`` to the config file at ``path`` and write it atomically.

    The changes are applied to what is on disk *now* (someone may have edited the file
    since it was read), validated first (raises :class:`ConfigError`, nothing written).
    A file that is not ours (another program's config, unknown top-level sections) is
    refused and left byte for byte as it is. ``base`` is used instead when a file of
    ours does not load; that file is then kept in a backup of its own and replaced by a
    full rewrite.
    """
    path = Path(path)
    refuse_foreign_config(path)
    try:
        current = load_config(path)
    except ConfigError:
        config = apply_changes(base or Config(), changes)
        backup = keep_backup(path)
        save_config(config, path)
        return SaveResult(config, kept_layout=False, backup=backup)

    config = apply_changes(current, changes)
    try:
        text = path.read_text(encoding="utf-8-sig")
    except FileNotFoundError:
        save_config(config, path)
        return SaveResult(config, kept_layout=False)
    except OSError as exc:
        raise _cannot(path, f"cannot read: {exc.strerror or exc}") from None

    edited = edit_config_text(text, changed_values(current, config))
    if edited is None or not _means(edited, config):
        save_config(config, path)
        return SaveResult(config, kept_layout=False)
    if edited != text:
        try:
            write_atomically(path, edited, overwrite=True)
        except OSError as exc:
            raise _cannot(path, f"cannot write: {exc.strerror or exc}") from None
    return SaveResult(config, kept_layout=True)


def keep_backup(path: Path) -> Path:
    """Copy ``path`` byte for byte to a new ``<name>.<time>.bak`` beside it; returns the copy.

    Every backup gets a name of its own and is never overwritten: one fixed ``.bak``
    would either be replaced by the next rewrite (losing the older file) or be kept
    stale (losing the newer one). Backups are made only when a file that does not load
    is replaced, which is rare, so they do not pile up.
    """
    try:
        raw = path.read_bytes()
    except OSError as exc:
        raise _cannot(path, f"cannot read it to keep a backup: {exc.strerror or exc}") from None
    stamp = time.strftime("%Y%m%d-%H%M%S")
    for attempt in range(1, 1000):
        backup = path.with_name(f"{path.name}.{stamp}{'' if attempt == 1 else f'-{attempt}'}.bak")
        try:
            if write_atomically(backup, raw, overwrite=False):
                return backup
        except OSError as exc:
            raise _cannot(path, f"cannot keep a backup at {backup}: {exc.strerror or exc}") from None
    raise _cannot(path, f"cannot keep a backup: too many backups named {path.name}.{stamp}*.bak")


def edit_config_text(text: str, changes: Mapping[str, Any]) -> str | None:
    """``text`` with each dotted key set to its new value, or None if it cannot be done safely."""
    if text and not text.endswith("\n"):
        text += "\n"
    for dotted, value in changes.items():
        try:
            root = yaml.compose(text, Loader=yaml.SafeLoader)
        except yaml.YAMLError:
            return None
        parts = dotted.split(".")
        if value is REMOVE:
            result = _remove(text, root, parts)
        elif isinstance(value, Mapping):
            result = _set(text, root, parts, _block_body(value))
        else:
            result = _set(text, root, parts, yaml_scalar(value))
        if result is None:
            return None
        text = result
    return text


# --------------------------------------------------------------------------- internals


def _cannot(path: Path, message: str) -> ConfigError:
    return ConfigError([ConfigProblem(str(path), None, None, message)])


def _means(text: str, config: Config) -> bool:
    """Does ``text`` load as exactly ``config``?"""
    try:
        data = yaml.safe_load(text)
        loaded = Config.model_validate(data if data is not None else {})
    except (yaml.YAMLError, ValidationError):
        return False
    return loaded.model_dump() == config.model_dump()


def _set(text: str, root: yaml.Node | None, parts: list[str], scalar: str | list[str]) -> str | None:
    """``scalar``: the value's text, or the lines of a block mapping (a new entry)."""
    if root is None:  # empty, or comments only: append the whole path at the end
        return text + "".join(_block(parts, scalar, indent=""))
    node: yaml.Node = root
    for depth, part in enumerate(parts):
        if not isinstance(node, yaml.MappingNode) or node.flow_style:
            return None
        pair = next(
            ((k, v) for k, v in node.value if isinstance(k, yaml.ScalarNode) and k.value == part), None
        )
        if pair is None:
            if not node.value:
                return None
            column = node.value[0][0].start_mark.column
            after = _last_line(node.value[-1][1])
            return _insert(text, after + 1, _block(parts[depth:], scalar, indent=" " * column))
        key, value = pair
        last = depth == len(parts) - 1
        if (isinstance(value, yaml.MappingNode) and value.flow_style and not value.value and not last
                and value.start_mark.line == key.start_mark.line):
            # `mcp_servers: {}` (as the template writes it): the first entry makes it a block.
            text = _splice(text, value.start_mark.index, value.end_mark.index, "")
            indent = " " * (key.start_mark.column + len(_INDENT))
            return _insert(text, key.start_mark.line + 1, _block(parts[depth + 1 :], scalar, indent=indent))
        if isinstance(value, yaml.ScalarNode) and value.tag == "tag:yaml.org,2002:null" and _empty(value, key):
            # `key:` with nothing after it (an empty section, or a null leaf).
            if last and isinstance(scalar, str):
                return _splice(text, value.start_mark.index, value.end_mark.index, " " + scalar)
            if last:
                return None
            indent = " " * (key.start_mark.column + len(_INDENT))
            return _insert(text, key.start_mark.line + 1, _block(parts[depth + 1 :], scalar, indent=indent))
        if last:
            if not isinstance(scalar, str):
                return None  # an entry that is there already: replaced key by key, not whole
            if not isinstance(value, yaml.ScalarNode) or value.style not in (None, "'", '"'):
                return None
            if value.start_mark.line != value.end_mark.line or value.start_mark.line != key.start_mark.line:
                return None
            return _replace_value(text, value.start_mark.index, value.end_mark.index, scalar)
        node = value
    return None


def _empty(value: yaml.ScalarNode, key: yaml.Node) -> bool:
    return value.value == "" and value.style is None and value.start_mark.line == key.start_mark.line


def _block(parts: list[str], scalar: str | list[str], *, indent: str) -> list[str]:
    """Lines that set ``parts`` (nested sections, then the key) at ``indent``."""
    lines = []
    for depth, part in enumerate(parts):
        pad = indent + _INDENT * depth
        if depth < len(parts) - 1:
            lines.append(f"{pad}{part}:\n")
        elif isinstance(scalar, str):
            lines.append(f"{pad}{part}: {scalar}\n")
        else:
            lines += [f"{pad}{part}:\n", *(pad + _INDENT + line for line in scalar)]
    return lines


def _block_body(value: Mapping[str, Any]) -> list[str]:
    """A mapping as block lines (each key on a line of its own, nested mappings indented;
    lists and other values in flow style), so a later edit of one key stays in place."""
    lines = []
    for key, item in value.items():
        if isinstance(item, Mapping) and item:
            lines += [f"{key}:\n", *(_INDENT + line for line in _block_body(item))]
        else:
            lines.append(f"{key}: {yaml_scalar(item)}\n")
    return lines


def _remove(text: str, root: yaml.Node | None, parts: list[str]) -> str | None:
    """``text`` without the key ``parts`` and its value (a block entry, its own lines only)."""
    node = root
    for depth, part in enumerate(parts):
        if not isinstance(node, yaml.MappingNode) or node.flow_style:
            return None
        pair = next(((k, v) for k, v in node.value if isinstance(k, yaml.ScalarNode) and k.value == part), None)
        if pair is None:
            return text  # not there: nothing to remove
        key, value = pair
        if depth < len(parts) - 1:
            node = value
            continue
        lines = text.splitlines(keepends=True)
        if lines[key.start_mark.line][: key.start_mark.column].strip():
            return None  # something else on the key's line
        end = max(_last_line(value), key.start_mark.line)
        return "".join(lines[: key.start_mark.line] + lines[end + 1 :])
    return None


def _last_line(node: yaml.Node) -> int:
    """0-based line where a (block) node's content ends."""
    if isinstance(node, yaml.MappingNode) and node.value:
        return _last_line(node.value[-1][1])
    if isinstance(node, yaml.SequenceNode) and node.value:
        return _last_line(node.value[-1])
    end = node.end_mark
    # Block scalars end at column 0 of the next line.
    return end.line - 1 if end.column == 0 and end.line > node.start_mark.line else end.line


def _insert(text: str, line: int, new_lines: list[str]) -> str:
    lines = text.splitlines(keepends=True)
    return "".join(lines[:line] + new_lines + lines[line:])


def _splice(text: str, start: int, end: int, replacement: str) -> str:
    return text[:start] + replacement + text[end:]


def _replace_value(text: str, start: int, end: int, replacement: str) -> str:
    """Replace a one-line scalar, keeping a comment after it in its column where it fits."""
    line_start = text.rfind("\n", 0, start) + 1
    line_end = text.find("\n", end)
    rest = text[end : line_end if line_end >= 0 else len(text)]
    gap = re.match(r"( +)#", rest)
    if not gap:
        return _splice(text, start, end, replacement)
    comment_column = end - line_start + len(gap.group(1))
    new_end_column = start - line_start + len(replacement)
    pad = max(comment_column - new_end_column, min(len(gap.group(1)), 2))
    return _splice(text, start, end + len(gap.group(1)), replacement + " " * pad)
