"""The model catalog: curated MLX models (``assets/catalog.yaml``), checked as it is read."""

from __future__ import annotations

import re
from dataclasses import dataclass
from importlib import resources
from importlib.resources.abc import Traversable
from pathlib import Path
from typing import Any, Literal

import yaml

from hermes_tui.hub.errors import CatalogError

# Read as package data, so an installed wheel has it as much as the source tree does.
CATALOG_PATH: Traversable = resources.files("hermes_tui") / "assets" / "catalog.yaml"
ROLES = ("compression", "chat")
Role = Literal["compression", "chat"]


@dataclass(frozen=True)
class CatalogModel:
    repo: str
    family: str
    parameters_b: float
    disk_gb: float
    memory_gb: float
    context_length: int
    license: str
    roles: tuple[str, ...]
    reasoning: bool = False
    default_compression: bool = False
    default_chat: bool = False
    notes: str = ""

    @property
    def disk_bytes(self) -> int:
        return int(self.disk_gb * 1e9)

    @property
    def memory_bytes(self) -> int:
        return int(self.memory_gb * 1e9)


REPO_ID = re.compile(r"[A-Za-z0-9][\w.-]*/[\w.-]+")
_NUMBER_FIELDS = ("parameters_b", "disk_gb", "memory_gb")
_REQUIRED = ("repo", "family", "parameters_b", "disk_gb", "memory_gb", "context_length", "license", "roles")
_OPTIONAL = ("reasoning", "default_compression", "default_chat", "notes")


def load_catalog(path: Path | None = None) -> list[CatalogModel]:
    """The curated models, in file order (small first): the bundled catalog unless ``path``
    is given. Raises CatalogError on bad data."""
    source: Path | Traversable = Path(path) if path is not None else CATALOG_PATH
    try:
        data = yaml.safe_load(source.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise CatalogError(f"{source}: no such file") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise CatalogError(f"{source}: cannot read ({exc})") from None
    except yaml.YAMLError as exc:
        raise CatalogError(f"{source}: not valid YAML ({' '.join(str(exc).split())})") from None
    entries = data.get("models") if isinstance(data, dict) else None
    if not isinstance(entries, list) or not entries:
        raise CatalogError(f"{source}: expected a top-level 'models:' list of entries")
    models = [_catalog_entry(source, index, entry) for index, entry in enumerate(entries, start=1)]
    seen: set[str] = set()
    for index, model in enumerate(models, start=1):
        if model.repo in seen:
            raise CatalogError(f"{source}: entry {index} ({model.repo}): listed twice")
        seen.add(model.repo)
    defaults = [m.repo for m in models if m.default_compression]
    if len(defaults) != 1:
        raise CatalogError(
            f"{source}: exactly one entry must have default_compression: true, found {len(defaults)}"
            + (f" ({', '.join(defaults)})" if defaults else "")
        )
    chat_defaults = [m.repo for m in models if m.default_chat]
    if len(chat_defaults) > 1:
        raise CatalogError(f"{source}: at most one entry may have default_chat: true, found {', '.join(chat_defaults)}")
    return models


def _catalog_entry(path: Path | Traversable, index: int, entry: Any) -> CatalogModel:
    label = f"entry {index}"
    if isinstance(entry, dict) and isinstance(entry.get("repo"), str):
        label += f" ({entry['repo']})"

    def bad(message: str) -> CatalogError:
        return CatalogError(f"{path}: {label}: {message}")

    if not isinstance(entry, dict):
        raise bad("expected a mapping of fields")
    missing = [key for key in _REQUIRED if key not in entry]
    if missing:
        raise bad(f"missing {', '.join(missing)}")
    unknown = sorted(set(entry) - set(_REQUIRED) - set(_OPTIONAL))
    if unknown:
        raise bad(f"unknown field {', '.join(unknown)}")
    if not isinstance(entry["repo"], str) or not REPO_ID.fullmatch(entry["repo"]):
        raise bad(f"repo must be a Hugging Face repo id like org/name, got {entry['repo']!r}")
    for key in ("family", "license"):
        if not isinstance(entry[key], str) or not entry[key].strip():
            raise bad(f"{key} must be non-empty text")
    for key in _NUMBER_FIELDS:
        value = entry[key]
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not value > 0:
            raise bad(f"{key} must be a positive number, got {value!r}")
    context = entry["context_length"]
    if isinstance(context, bool) or not isinstance(context, int) or context < 256:
        raise bad(f"context_length must be a whole number of tokens (>= 256), got {context!r}")
    roles = entry["roles"]
    if not isinstance(roles, list) or not roles or any(role not in ROLES for role in roles):
        raise bad(f"roles must be a non-empty list of {' and/or '.join(ROLES)}, got {roles!r}")
    for key in ("reasoning", "default_compression", "default_chat"):
        if not isinstance(entry.get(key, False), bool):
            raise bad(f"{key} must be true or false")
    notes = entry.get("notes", "")
    if not isinstance(notes, str):
        raise bad("notes must be text")
    if entry.get("default_compression") and "compression" not in roles:
        raise bad("the default compression model must have the compression role")
    if entry.get("default_chat") and "chat" not in roles:
        raise bad("the default chat model must have the chat role")
    return CatalogModel(
        repo=entry["repo"],
        family=entry["family"],
        parameters_b=float(entry["parameters_b"]),
        disk_gb=float(entry["disk_gb"]),
        memory_gb=float(entry["memory_gb"]),
        context_length=context,
        license=entry["license"],
        roles=tuple(roles),
        reasoning=entry.get("reasoning", False),
        default_compression=entry.get("default_compression", False),
        default_chat=entry.get("default_chat", False),
        notes=notes,
    )


def default_compression_model(catalog: list[CatalogModel] | None = None) -> CatalogModel:
    catalog = catalog if catalog is not None else load_catalog()
    return next(m for m in catalog if m.default_compression)


def default_chat_model(catalog: list[CatalogModel] | None = None) -> CatalogModel:
    """The chat model the first-run screen suggests: the ``default_chat`` entry, else the first
    plain (non-thinking) chat model."""
    catalog = catalog if catalog is not None else load_catalog()
    chat = [m for m in catalog if "chat" in m.roles]
    if not chat:
        raise CatalogError("the catalog has no chat model")
    return next((m for m in chat if m.default_chat), next((m for m in chat if not m.reasoning), chat[0]))


def catalog_repos() -> set[str]:
    try:
        return {m.repo for m in load_catalog()}
    except CatalogError:
        return set()  # a broken catalog must not break listing what is on disk
