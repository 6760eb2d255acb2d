"""Write ``config.yaml``: the commented default file rendered from the schema (each field's
``description`` is its comment, so file and schema cannot drift apart), whole-file saves,
atomic replacement, and the refusal to overwrite another program's config.
"""

from __future__ import annotations

import json
import os
import re
import tempfile
from pathlib import Path
from typing import Any

import yaml

from hermes_tui.config.problems import (
    ConfigError,
    config_error,
    named_section_class,
    problems_in,
    section_class,
    shown_value,
)
from hermes_tui.config.schema import Section, ValidationError
from hermes_tui.config.settings import Config
from hermes_tui.util import paths
from hermes_tui.util.untrusted import InputError, load_yaml

__all__ = [
    "default_config_text",
    "write_atomically",
    "yaml_scalar",
    "foreign_config_problem",
    "refuse_foreign_config",
    "render_config_text",
    "save_config",
    "write_default_config",
]


_HEADER = """\
# hermes-tui configuration.
# Every key is shown with its default; delete a key (or this file) to get the default back.
# HERMES_TUI_HOME, when set, moves this file and every other hermes-tui file.
# The settings screen edits values in place and keeps your comments where it can.
"""
_COMMENT_COLUMN = 40


def yaml_scalar(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        return str(int(value)) if value.is_integer() else repr(value)
    if isinstance(value, int):
        return str(value)
    if value == "":
        return '""'
    dumped = yaml.safe_dump(value, default_flow_style=True, width=10**9)
    dumped = dumped.removesuffix("\n").removesuffix("\n...").strip()
    return dumped if "\n" not in dumped else json.dumps(value)


def _render(model: Section, indent: str, lines: list[str]) -> None:
    for name, info in type(model).model_fields.items():
        value = getattr(model, name)
        note = (info.json_schema_extra or {}).get("note") if isinstance(info.json_schema_extra, dict) else None
        for note_line in (note or "").splitlines():
            lines.append(f"{indent}# {note_line}")
        block = section_class(info) or (named_section_class(info) and value)
        text = f"{indent}{name}:" if block else f"{indent}{name}: {yaml_scalar(value)}"
        if info.description:
            text = f"{text.ljust(_COMMENT_COLUMN - 2)}  # {info.description}"
        lines.append(text)
        if section_class(info):
            _render(value, indent + "  ", lines)
        elif named_section_class(info):
            for entry, section in value.items():
                lines.append(f"{indent}  {yaml_scalar(entry)}:")
                _render(section, indent + "    ", lines)


def render_config_text(config: Config) -> str:
    """``config`` as a commented config.yaml (every key, with its comment)."""
    lines: list[str] = []
    _render(config, "", lines)
    return _HEADER + "\n".join(lines) + "\n"


def default_config_text() -> str:
    return render_config_text(Config())


def foreign_config_problem(text: str) -> str | None:
    """Why ``text`` is not a hermes-tui config.yaml (then it is never rewritten), or None.

    Ours has only our top-level sections. Another program's config in the same place
    (Hermes Agent's has ``terminal``, ``toolsets`` and more) must survive byte for byte,
    so it is refused before anything is written. A file that is not valid YAML counts as
    ours only while every unindented line is one of our section keys (or a comment).
    """
    ours = set(Config.model_fields)
    try:
        data, _ = load_yaml(text)  # bounded: this runs on files that are not ours
    except InputError:
        for line in text.splitlines():
            if not line.strip() or line[0] in " \t#" or line.rstrip() in ("---", "..."):
                continue
            match = _TOP_LEVEL_KEY.match(line)
            if match is None or match.group(1) not in ours:
                return f"not valid YAML, and its line {line[:40]!r} is not a hermes-tui section"
        return None
    if data is None:
        return None
    if not isinstance(data, dict):
        return f"the top level is {shown_value(data)}, not sections of keys"
    foreign = [str(key) for key in data if key not in ours]
    if foreign:
        listed = ", ".join(foreign[:6]) + (", ..." if len(foreign) > 6 else "")
        return f"top-level section{'s' if len(foreign) > 1 else ''} {listed} {'are' if len(foreign) > 1 else 'is'} not hermes-tui's"
    return None


_TOP_LEVEL_KEY = re.compile(r"""["']?([A-Za-z_][\w.-]*)["']?\s*:(?:\s|$)""")


def refuse_foreign_config(path: Path) -> None:
    """Raise ConfigError, naming ``path``, if a file is there that is not ours to rewrite."""
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        return
    except OSError as exc:
        raise config_error(path, f"cannot read: {exc.strerror or exc}") from None
    try:
        problem = foreign_config_problem(raw.decode("utf-8-sig"))
    except UnicodeDecodeError as exc:
        problem = f"not UTF-8 text (bad byte at offset {exc.start})"
    if problem:
        raise config_error(
            path,
            f"not a hermes-tui config ({problem}); it was left untouched: "
            f"point --config or {paths.HOME_ENV} at a config.yaml of hermes-tui's own",
        )


def write_atomically(path: Path, text: str | bytes, *, overwrite: bool) -> bool:
    """Write via a temp file in the same directory, so a crash never leaves half a file.

    With ``overwrite=False`` an existing file wins (returns False) even in a race.
    """
    paths.ensure_dir(path.parent)
    fd, tmp_name = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    tmp = Path(tmp_name)
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(text.encode("utf-8") if isinstance(text, str) else text)
            handle.flush()
            os.fsync(handle.fileno())
        if overwrite:
            try:
                os.chmod(tmp, path.stat().st_mode & 0o7777)
            except FileNotFoundError:
                pass  # new file: keep mkstemp's private 0o600
            os.replace(tmp, path)
            return True
        try:
            os.link(tmp, path)  # fails if the file exists: never clobbers it
        except FileExistsError:
            return False
        except OSError:  # a filesystem without hard links
            if path.exists():
                return False
            os.replace(tmp, path)
        return True
    finally:
        tmp.unlink(missing_ok=True)


def write_default_config(path: Path | None = None) -> None:
    """Write the commented default config.yaml unless a file is already there."""
    path = Path(path) if path is not None else paths.config_path()
    try:
        write_atomically(path, default_config_text(), overwrite=False)
    except OSError as exc:
        raise config_error(path, f"cannot write: {exc.strerror or exc}") from None


def save_config(config: Config, path: Path | None = None) -> None:
    """Validate ``config`` and write it to ``path`` atomically (replacing the file).

    A file there that is not ours (:func:`foreign_config_problem`) is refused with a
    ConfigError and left as it is.
    """
    path = Path(path) if path is not None else paths.config_path()
    refuse_foreign_config(path)
    try:
        # Fields may have been assigned after construction; check them all again.
        config = Config.model_validate(config.model_dump(warnings=False))
    except ValidationError as exc:
        raise ConfigError(problems_in(Config, exc, str(path), None)) from None
    try:
        write_atomically(path, render_config_text(config), overwrite=True)
    except OSError as exc:
        raise config_error(path, f"cannot write: {exc.strerror or exc}") from None
