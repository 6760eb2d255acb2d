"""Files whose edit asks in every mode but full, wherever the workspace is.

Each can make a later, unasked step run a program, or change what we allow:
- a ``.git`` folder (``config`` names an fsmonitor, a pager, hooks run on commit), compared
  as the file system may compare it: case-folded (macOS and Windows disks are
  case-insensitive by default, so ``.GIT/config`` is ``.git/config``), Unicode-normalised, and
  without the code points HFS+ ignores in names (``.g\\u200cit``);
- a bare-repository layout anywhere (``HEAD``, ``objects/``, ``refs/`` in one folder): git
  takes such a folder for a repository, and an allowlisted ``git status`` inside it reads
  its ``config``; creating the second of the three asks;
- ``.vscode/`` and ``.idea/`` (tasks and run configurations that an editor runs) and
  ``.envrc`` (direnv runs it on ``cd``);
- our own home, config, data, log and cache folders (``paths``): ``config.yaml`` holds the
  approval mode and the MCP servers we start, the database our "always" rules.
"""

from __future__ import annotations

import os
import unicodedata
from pathlib import Path

from hermes_tui.util import paths

_PROTECTED_DIRS = frozenset({".git", ".vscode", ".idea"})
_PROTECTED_FILES = frozenset({".envrc"})
_REPO_MARKERS = frozenset({"head", "objects", "refs"})
# Code points HFS+ drops from names when it compares them (Apple TN1150): zero-width joiners
# and marks, bidi controls, and the BOM.
_IGNORABLE = dict.fromkeys([*range(0x200B, 0x2010), *range(0x202A, 0x202F), *range(0x206A, 0x2070), 0xFEFF])


def fold(name: str) -> str:
    """A file name as a case-insensitive, normalising file system compares it."""
    return unicodedata.normalize("NFC", name.translate(_IGNORABLE)).casefold()


def _our_folders() -> list[Path]:
    found = [paths.home_override(), paths.config_path().parent, paths.state_db_path().parent,
             paths.logs_dir(), paths.cache_dir(), paths.hermes_agent_home()]
    return [Path(os.path.realpath(p)) for p in found if p is not None]


def _bare_repo_in(folder: Path, child: str) -> bool:
    """Would ``folder`` hold two or more of HEAD, objects/, refs/ once ``child`` is there?"""
    try:
        names = {fold(n) for n in os.listdir(folder)}
    except OSError:
        names = set()
    names.add(fold(child))
    return fold(child) in _REPO_MARKERS | {"config", "hooks", "packed-refs", "info"} and len(names & _REPO_MARKERS) >= 2


def protected_reason(resolved: Path, root: Path) -> str | None:
    """Why writing ``resolved`` (already through symlinks) must ask, or None."""
    for folder in _our_folders():
        if resolved == folder or resolved.is_relative_to(folder):
            return f"{resolved} is in hermes-tui's own files ({folder})"
    try:
        rel = resolved.relative_to(root)
    except ValueError:
        rel = None
    parts = rel.parts if rel is not None else resolved.parts[1:]
    base = root if rel is not None else Path(resolved.anchor)
    for i, part in enumerate(parts):
        name = fold(part)
        if name in _PROTECTED_DIRS or name in _PROTECTED_FILES or name == fold(".git"):
            return f"{Path(*parts[: i + 1])} is protected ({part}: edits there always ask)"
        if _bare_repo_in(base.joinpath(*parts[:i]), part):
            where = Path(*parts[:i]) if i else Path(".")
            return f"{Path(*parts[: i + 1])} would make {where} a git repository (HEAD, objects/, refs/)"
    return None
