"""macOS: the ``sandbox-exec`` profile (Seatbelt's SBPL) that enforces a ``Policy``.

Built the way Codex builds its own: deny by default, let a command run, fork and see its
own processes, read what the policy reads, write what it writes with the protected folders
carved out (``require-not``: Seatbelt, unlike Landlock, can subtract, so the workspace root
stays writable and only ``.git`` and our folders are not), and no network. Paths go in as
string literals, escaped; ``/usr/bin/sandbox-exec`` is used by its full path so a program
of that name earlier on ``PATH`` cannot stand in for it.
"""

from __future__ import annotations

from collections.abc import Iterable

from .policy import Policy

SANDBOX_EXEC = "/usr/bin/sandbox-exec"

_BASE = """(version 1)
(deny default)
; a command runs programs and sees, and signals, only its own processes
(allow process-exec process-fork)
(allow signal (target same-sandbox))
(allow process-info* (target same-sandbox))
; what programs ask the system as they start: CPU and OS facts, preferences, the user's name
(allow sysctl-read)
(allow user-preference-read)
(allow mach-lookup (global-name "com.apple.system.opendirectoryd.libinfo"))
(allow ipc-posix-sem)
(allow pseudo-tty)
; stat() anywhere (realpath walks every parent); the contents are what is ruled on below
(allow file-read-metadata)
(allow file-read* (literal "/"))
(allow file-read* file-write-data file-ioctl
  (literal "/dev/null") (literal "/dev/zero") (literal "/dev/tty") (literal "/dev/dtracehelper"))
(allow file-read* (literal "/dev/random") (literal "/dev/urandom") (subpath "/dev/fd"))
"""


def quote(path: str) -> str:
    """``path`` as an SBPL string literal."""
    return '"' + path.replace("\\", "\\\\").replace('"', '\\"') + '"'


def _filter(roots: Iterable[str], excluded: Iterable[str]) -> str:
    excluded = list(excluded)
    parts = []
    for root in roots:
        inner = [e for e in excluded if e == root or e.startswith(root.rstrip("/") + "/")]
        if not inner:
            parts.append(f"(subpath {quote(root)})")
            continue
        # The literal too: `subpath` alone would let a command create the folder itself
        # (`mkdir .git`) before anything beneath it is ruled on.
        nots = " ".join(f"(require-not (literal {quote(e)})) (require-not (subpath {quote(e)}))"
                        for e in inner)
        parts.append(f"(require-all (subpath {quote(root)}) {nots})")
    return "\n  ".join(parts)


def profile(policy: Policy) -> str:
    """The SBPL text for ``policy``."""
    text = _BASE
    text += f"(allow file-read*\n  {_filter(policy.read + policy.write, policy.hidden)})\n"
    text += (f"(allow file-write*\n  {_filter(policy.write, (*policy.protected, *policy.hidden))})\n"
             if policy.write else "")
    if policy.network:
        text += "(allow network*)\n(allow system-socket)\n"
    else:
        text += "; no network: no sockets, no lookups\n"
    return text


def command(policy: Policy, argv: list[str]) -> list[str]:
    return [SANDBOX_EXEC, "-p", profile(policy), *argv]
