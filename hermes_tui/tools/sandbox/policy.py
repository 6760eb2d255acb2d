"""What a command may read, write and connect to, in each approval mode: the one decision.

| mode | reads | writes | network |
|---|---|---|---|
| read-only | the workspace, the system, tool prefixes, the session's temp dir | the session's temp dir | none |
| ask, auto-edit | the same | the workspace (but ``.git``, a ``gitdir:`` target and our own folders) and the temp dir | none |
| full | no sandbox: the user chose to let commands do anything they can | | |

Readable everywhere (``Policy.read``):

- the workspace, and the git directories it uses (``.git``, the target of a ``gitdir:``
  file and its ``commondir``, a repository above the workspace), so ``git status`` works;
- the system's programs, libraries and configuration (``SYSTEM_READ``), less the files that
  hold secrets there (``SYSTEM_HIDDEN``: ``/etc/shadow``, ssh host keys, sudoers);
- where the programs on ``PATH`` are installed, so a pyenv, uv, cargo or Homebrew tool still
  runs: each ``PATH`` folder outside the system's, its prefix when it is a ``bin``/``shims``
  folder (``~/.pyenv`` for ``~/.pyenv/shims``; for ``~/.local/bin`` only ``lib`` and
  ``share/uv`` beside it), the prefixes the symlinks in it point into, and the running
  interpreter's. Entries of such a prefix named like credentials (``credentials.toml``,
  ``.netrc``, ``auth.json``, ...) are hidden;
- the session's private temp dir (``TMPDIR``).

The rest of the user's home is not readable, and the usual credential folders
(``~/.ssh``, ``~/.aws``, ``~/.gnupg``, ...) are hidden even inside the workspace (a workspace
that is the home folder). Writes never reach our own folders (config, sessions, logs,
cache: ``hermes_tui.util.paths``) or Hermes Agent's home, even inside the workspace.
"""

from __future__ import annotations

import json
import os
import re
import sys
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from hermes_tui.tools.approval import Mode
from hermes_tui.util import paths

LINUX_SYSTEM_READ = ("/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32", "/etc", "/opt",
                     "/proc", "/sys", "/nix/store", "/run/current-system")
MACOS_SYSTEM_READ = ("/usr", "/bin", "/sbin", "/System", "/Library", "/Applications", "/etc",
                     "/private/etc", "/opt", "/private/var/db", "/var/db")
SYSTEM_READ = MACOS_SYSTEM_READ if sys.platform == "darwin" else LINUX_SYSTEM_READ
SYSTEM_HIDDEN = ("/etc/shadow", "/etc/shadow-", "/etc/gshadow", "/etc/gshadow-", "/etc/sudoers",
                 "/etc/sudoers.d", "/etc/ssh", "/etc/security/opasswd", "/etc/master.passwd",
                 "/private/etc/master.passwd", "/private/etc/sudoers", "/private/etc/ssh")
# In the home folder: never readable, even when the workspace holds them.
HOME_HIDDEN = (".ssh", ".gnupg", ".aws", ".azure", ".kube", ".docker", ".netrc", ".git-credentials",
               ".pypirc", ".npmrc", ".config/gh", ".config/gcloud", ".password-store", ".local/share/keyrings")
_CREDENTIAL_NAME = re.compile(r"(?i)credential|token|secret|passw|auth|netrc|^\.env|key")
_BIN_NAMES = frozenset({"bin", "sbin", "shims"})


@dataclass(frozen=True)
class Policy:
    """Absolute paths. ``write`` implies read; ``protected`` paths inside ``write`` stay
    read-only; ``hidden`` paths are neither read nor written wherever they are."""

    read: tuple[str, ...]
    write: tuple[str, ...]
    protected: tuple[str, ...] = ()
    hidden: tuple[str, ...] = ()
    network: bool = False
    tmpdir: str = ""
    mode: str = ""
    notes: tuple[str, ...] = field(default=(), compare=False)

    def to_json(self) -> str:
        return json.dumps(asdict(self), separators=(",", ":"))

    @classmethod
    def from_json(cls, text: str) -> Policy:
        data = json.loads(text)
        fields: dict[str, Any] = {k: tuple(v) if isinstance(v, list) else v for k, v in data.items()}
        return cls(**fields)


def _real(path: str | Path) -> str:
    return os.path.realpath(path)


def _within(path: str, roots: Iterable[str]) -> bool:
    return any(path == r or path.startswith(r.rstrip("/") + "/") for r in roots)


def git_dirs(workspace: Path) -> tuple[list[str], list[str]]:
    """The git directories a workspace uses: (to read, to keep read-only inside it)."""
    read: list[str] = []
    dot_git = workspace / ".git"
    protected = [str(dot_git)]  # bound read-only when it exists (see landlock.py)
    for folder in (workspace, *workspace.parents):
        candidate = folder / ".git"
        if candidate.is_dir():
            read.append(_real(candidate))
            break
        if candidate.is_file():
            read.append(str(candidate))
            try:
                text = candidate.read_text(errors="replace")
            except OSError:
                break
            if text.startswith("gitdir:"):
                target = Path(_real(folder / text[len("gitdir:"):].strip()))
                read.append(str(target))
                protected.append(str(target))
                common = target / "commondir"
                if common.is_file():
                    try:
                        read.append(_real(target / common.read_text().strip()))
                    except OSError:
                        pass
            break
    return read, protected


def _prefix_entries(prefix: str) -> tuple[list[str], list[str]]:
    """A tool prefix: (itself, its entries named like credentials, to hide)."""
    try:
        names = os.listdir(prefix)
    except OSError:
        return [], []
    return [prefix], [os.path.join(prefix, n) for n in names if _CREDENTIAL_NAME.search(n)]


def tool_prefixes(path_env: str, home: str, *, executable: str = sys.executable) -> tuple[list[str], list[str]]:
    """Where the programs on ``PATH`` (and the running interpreter) are installed, outside
    the system folders: (to read, to hide)."""
    read: list[str] = []
    hidden: list[str] = []
    home = _real(home) if home else ""

    def add_prefix(prefix: str) -> None:
        if not prefix or prefix == "/" or prefix == home or _within(prefix, SYSTEM_READ) or _within(prefix, read):
            return
        if home and prefix == os.path.join(home, ".local"):
            # ~/.local also holds keyrings and shell histories: only what programs load.
            read.extend(p for p in (os.path.join(prefix, "lib"), os.path.join(prefix, "share", "uv"))
                        if os.path.isdir(p))
            return
        got, secret = _prefix_entries(prefix)
        read.extend(got)
        hidden.extend(secret)

    def add_bin(folder: str) -> None:
        folder = _real(folder)
        if not os.path.isdir(folder) or _within(folder, SYSTEM_READ):
            return
        if not _within(folder, read):
            read.append(folder)
        if os.path.basename(folder) in _BIN_NAMES:
            add_prefix(os.path.dirname(folder))

    for interpreter in {executable, sys.base_prefix + "/bin/python", sys.prefix + "/bin/python"}:
        add_bin(os.path.dirname(_real(interpreter)))
        add_bin(os.path.dirname(interpreter))
    for folder in filter(None, path_env.split(os.pathsep)):
        if not os.path.isabs(folder) or not os.path.isdir(folder) or _within(_real(folder), SYSTEM_READ):
            continue
        add_bin(folder)
        try:
            entries = list(os.scandir(folder))
        except OSError:
            continue
        for entry in entries:
            if entry.is_symlink():
                target = _real(entry.path)
                if not _within(target, read) and not _within(target, SYSTEM_READ):
                    add_bin(os.path.dirname(target))
    return read, hidden


def our_folders() -> list[str]:
    """Our config, sessions, models, logs and cache folders, and Hermes Agent's home."""
    found = [paths.config_path().parent, paths.state_db_path().parent, paths.models_dir(),
             paths.logs_dir(), paths.cache_dir(), paths.hermes_agent_home()]
    return sorted({_real(p) for p in found})


def policy_for(mode: Mode | str, workspace: str | Path, tmpdir: str | Path, *,
               env: Mapping[str, str] | None = None, extra_read: Sequence[str | Path] = ()) -> Policy | None:
    """The sandbox for a command run in ``mode``; None in full mode (no sandbox).

    ``env`` is the command's environment (its ``PATH`` and ``HOME``); ``extra_read``: paths
    outside the workspace the user approved for this call."""
    mode = Mode(mode)
    if mode is Mode.FULL:
        return None
    env = os.environ if env is None else env
    root = Path(_real(workspace))
    home = env.get("HOME", "")
    git_read, git_protected = git_dirs(root)
    tools_read, tools_hidden = tool_prefixes(env.get("PATH", ""), home)
    tmp = _real(tmpdir)
    read = [p for p in SYSTEM_READ if os.path.exists(p)]
    read += [str(root), *git_read, *tools_read, *(_real(p) for p in extra_read)]
    hidden = [p for p in SYSTEM_HIDDEN if os.path.lexists(p)] + tools_hidden
    if home:
        hidden += [os.path.join(_real(home), name) for name in HOME_HIDDEN]
    write = [tmp]
    protected: list[str] = []
    if mode in (Mode.ASK, Mode.AUTO_EDIT):
        write.append(str(root))
        protected = git_protected + our_folders()
    return Policy(read=tuple(dict.fromkeys(read)), write=tuple(write), protected=tuple(dict.fromkeys(protected)),
                  hidden=tuple(dict.fromkeys(hidden)), network=False, tmpdir=tmp, mode=mode.value)
