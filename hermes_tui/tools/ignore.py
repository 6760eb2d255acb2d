"""Which files a listing or a search skips: ``.git/`` and what ``.gitignore`` files say.

Every ``.gitignore`` from the workspace root down to a file's directory applies, the
deeper one last (so it can re-include with ``!``), each matched relative to its own
directory, as git does; the root's ``.git/info/exclude`` applies too. Ignore files above
the workspace root and the user's global excludes do not: what the model sees depends on
the workspace alone. Symlinked directories are listed, never descended into, so a walk
cannot leave the workspace through one.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import pathspec


# Git's own entries, never the project's: a ``.git`` directory, or the ``.git`` file of a
# worktree or a submodule.
GIT_NAMES = frozenset({".git"})


class IgnoreRules:
    def __init__(self, root: Path) -> None:
        self.root = root
        self._specs: dict[Path, pathspec.GitIgnoreSpec | None] = {}

    def _spec(self, directory: Path) -> pathspec.GitIgnoreSpec | None:
        if directory not in self._specs:
            lines: list[str] = []
            sources = [directory / ".gitignore"]
            if directory == self.root:
                sources.append(directory / ".git" / "info" / "exclude")
            for source in sources:
                try:
                    lines += source.read_text(encoding="utf-8", errors="replace").splitlines()
                except OSError:
                    pass
            self._specs[directory] = _spec_of(lines) if lines else None
        return self._specs[directory]

    def ignored(self, path: Path, is_dir: bool) -> bool:
        """Whether ``path`` (below the root, not resolved) is ignored by itself.

        Callers that walk prune ignored directories, so what lies below one is never
        asked about, as in git (a file under an ignored directory cannot be re-included).
        """
        try:
            parts = path.relative_to(self.root).parts
        except ValueError:
            return False
        if not parts:
            return False
        if parts[-1] in GIT_NAMES:
            return True
        result = False
        directory = self.root
        for i in range(len(parts)):
            spec = self._spec(directory)
            if spec is not None:
                rel = "/".join(parts[i:]) + ("/" if is_dir else "")
                verdict = spec.check_file(rel).include
                if verdict is not None:
                    result = verdict
            directory = directory / parts[i]
        return result


def _spec_of(lines: list[str]) -> pathspec.GitIgnoreSpec:
    """The rules of an ignore file's lines. A line git would pass over (``!`` alone, a lone
    backslash) is left out: pathspec refuses the whole file for it, and a listing or search
    would then fail on that workspace."""
    import pathspec  # on first use: ~7 ms the app's start-up need not pay

    try:
        return pathspec.GitIgnoreSpec.from_lines(lines)
    except ValueError:  # pathspec's pattern error
        valid = []
        for line in lines:
            try:
                pathspec.GitIgnoreSpec.from_lines([line])
            except ValueError:  # pathspec's pattern error
                continue
            valid.append(line)
        return pathspec.GitIgnoreSpec.from_lines(valid)


def entry_is_dir(entry: os.DirEntry[str]) -> bool:
    """A real directory (a symlink to one counts as a file: it is not descended into)."""
    try:
        return entry.is_dir(follow_symlinks=False)
    except OSError:
        return False


def entry_mark(entry: os.DirEntry[str]) -> str:
    """How a listing marks an entry: ``/`` for a directory, ``@`` for a symlink, else nothing."""
    return "/" if entry_is_dir(entry) else "@" if entry.is_symlink() else ""


def list_entries(directory: Path, rules: IgnoreRules) -> list[os.DirEntry[str]]:
    """The entries of ``directory`` that are not ignored, sorted by name."""
    with os.scandir(directory) as it:
        entries = sorted(it, key=lambda e: e.name)
    return [e for e in entries if not rules.ignored(Path(e.path), entry_is_dir(e))]


def walk_files(start: Path, rules: IgnoreRules,
               check_cancel: Callable[[], None] = lambda: None) -> Iterator[Path]:
    """Files below ``start``, depth first with each directory's entries by name (the
    order of ``rg --sort path``), skipping ignored paths."""
    check_cancel()
    try:
        entries = list_entries(start, rules)
    except OSError:
        return
    for entry in entries:
        if entry_is_dir(entry):
            yield from walk_files(Path(entry.path), rules, check_cancel)
        else:
            yield Path(entry.path)
