"""The workspace boundary: which paths a tool may touch without asking.

Every path a tool is given is joined to the workspace root and resolved through symlinks
(``Path.resolve(strict=False)``, so a path that does not exist yet resolves too). The
result is inside when it is the root or below it. ``..`` escapes, absolute paths
elsewhere, and symlinks (to files or directories) that point out all resolve outside;
using such a path needs the user's approval through the context's ``approve_outside``
callback, and with no one to ask (headless) it is refused.

Resolving and then opening is not atomic: a symlink swapped in between is not caught.
The boundary keeps a model from wandering off; it is not a sandbox against a hostile
process already running in the workspace.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from hermes_tui.util.errors import AppError


class ToolError(AppError):
    """An expected failure; its message (one line) is what the model reads, followed by
    ``detail`` when there is one: text the tool produced as it would in a result (a file
    as ``read_file`` shows it), kept with its lines."""

    def __init__(self, message: str, *, detail: str = "") -> None:
        super().__init__(message)
        self.detail = detail


@dataclass(frozen=True)
class OutsideAccess:
    """A request to use a path outside the workspace, as shown to the user."""

    tool: str
    given: str  # the path as the model wrote it
    resolved: Path
    purpose: str  # "read" or "write"


OutsideApprover = Callable[[OutsideAccess], bool]


class _Approving(Protocol):
    """What ``check`` needs of a tool's context: who approves an outside path."""

    approve_outside: OutsideApprover | None


def relative_display(path: Path, root: Path) -> str:
    """``path`` as the model should see it: relative inside the workspace, else absolute."""
    try:
        rel = path.relative_to(root)
    except ValueError:
        return str(path)
    return rel.as_posix() or "."


class Workspace:
    def __init__(self, root: str | os.PathLike[str]) -> None:
        resolved = Path(root).expanduser().resolve(strict=False)
        if not resolved.is_dir():
            raise ValueError(f"workspace {root}: not a directory")
        self.root = resolved

    def resolve(self, path: str) -> Path:
        """``path`` (relative to the root, or absolute, ``~`` expanded) through symlinks."""
        given = Path(os.path.expanduser(path)) if path.startswith("~") else Path(path)
        return (self.root / given).resolve(strict=False)

    def contains(self, resolved: Path) -> bool:
        return resolved == self.root or resolved.is_relative_to(self.root)

    def is_inside(self, path: str) -> bool:
        return self.contains(self.resolve(path))

    def display(self, resolved: Path) -> str:
        return relative_display(resolved, self.root)

    def approver_for(self, paths: Iterable[str]) -> OutsideApprover:
        """An ``approve_outside`` that grants exactly ``paths`` (as the user approved them)."""
        granted = frozenset(self.resolve(p) for p in paths)
        return lambda access: access.resolved in granted

    def check(self, path: str, context: _Approving, *, tool: str, purpose: str) -> Path:
        """The resolved path, if inside or approved; else ``ToolError``."""
        if "\0" in path:
            raise ToolError(f"path {path!r} contains a NUL byte")
        resolved = self.resolve(path)
        if self.contains(resolved):
            return resolved
        access = OutsideAccess(tool=tool, given=path, resolved=resolved, purpose=purpose)
        approve = context.approve_outside
        if approve is not None and approve(access):
            return resolved
        why = "not approved" if approve is not None else "no one to approve it"
        raise ToolError(f"{path} resolves to {resolved}, outside the workspace {self.root}: "
                        f"refused ({why})")
