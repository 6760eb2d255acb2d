"""The launcher a sandboxed command runs through on Linux: confine this process, then exec.

    python -I -c "...main()" POLICY_JSON -- bash -c COMMAND

It runs as a fresh, single-threaded process (Landlock applies to the calling thread, and
``preexec_fn`` in the app, which has threads, is unsafe), so the app keeps its process
group handling: the launcher becomes the command (``execv``) in the same process, pid and
group. It imports only this module and ``landlock``. Any failure to confine is reported
on stderr with exit status 126 ("cannot execute"), and the command does not run.
"""

from __future__ import annotations

import json
import os
import sys

from hermes_tui.tools.sandbox.landlock import SandboxError, confine

EXIT_CANNOT_CONFINE = 126


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if len(args) < 3 or args[1] != "--":
        print("usage: launch POLICY_JSON -- PROGRAM [ARG...]", file=sys.stderr)
        return 2
    try:
        policy = json.loads(args[0])
        confine(**policy)
    except (SandboxError, OSError, ValueError, TypeError) as exc:
        print(f"hermes-tui sandbox: cannot confine the command, so it did not run: {exc}", file=sys.stderr)
        return EXIT_CANNOT_CONFINE
    program = args[2:]
    try:
        os.execv(program[0], program)
    except OSError as exc:
        print(f"hermes-tui sandbox: cannot run {program[0]}: {exc}", file=sys.stderr)
        return EXIT_CANNOT_CONFINE
    return EXIT_CANNOT_CONFINE  # not reached


if __name__ == "__main__":
    sys.exit(main())
