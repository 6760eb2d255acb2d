"""What the approval check knows of programs: one table, one place per decision.

- ``READ_ONLY``: the programs that may run without asking, each with the options that would
  make it write or run another program (``banned``) and the options that make it follow
  symlinks while it walks a tree (``follows``: allowed only when no symlink under the paths
  it walks leads out of the workspace). A long option is matched by every prefix of it:
  GNU getopt (and git's parse-options) accept any unambiguous abbreviation, so
  ``sort --compress-prog=sh`` was ``--compress-program``.
- ``GIT``: the same for git's subcommands, and the global options allowed before one.
- ``WRAPPERS``, ``SHELLS``, ``INTERPRETERS``: programs that run another program; a deny rule
  looks through them, and no "always" rule is ever made for them.
- ``CURATED``: the program + subcommand pairs an "always" answer may store as a prefix rule;
  every other command is stored exactly as it was shown.

``sort`` is not on the list: ``-o``/``--output``/``--compress-program``, in any spelling,
write files or run programs, and nothing a model needs from it is worth screening for that.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Program:
    banned: frozenset[str] = frozenset()
    follows: frozenset[str] = frozenset()
    paths: bool = True  # its arguments name files (False: echo, uname... only print them)
    find_style: bool = False  # single-dash long options (-exec), never clustered or abbreviated


def _p(banned: str = "", follows: str = "", *, paths: bool = True, find_style: bool = False) -> Program:
    return Program(frozenset(banned.split()), frozenset(follows.split()), paths, find_style)


_GREP = _p(follows="-R --dereference-recursive")
_NO_PATHS = _p(paths=False)

READ_ONLY: dict[str, Program] = {
    "ls": _p(follows="-L --dereference"),
    "cat": _p(), "head": _p(), "tail": _p(), "wc": _p(), "nl": _p(), "stat": _p(), "cmp": _p(),
    "realpath": _p(), "df": _p(),
    "du": _p(follows="-L --dereference"),
    # GNU diff follows symlinks by default: a recursive diff walks into any link.
    "diff": _p(follows="-r --recursive"),
    "grep": _GREP, "egrep": _GREP, "fgrep": _GREP,
    "rg": _p(banned="--pre --hostname-bin -z --search-zip", follows="-L --follow"),
    "find": _p(banned="-exec -execdir -ok -okdir -delete -fprint -fprint0 -fprintf -fls",
               follows="-L -follow", find_style=True),
    "echo": _NO_PATHS, "pwd": _NO_PATHS, "whoami": _NO_PATHS, "id": _NO_PATHS, "uname": _NO_PATHS,
    "basename": _NO_PATHS, "dirname": _NO_PATHS, "which": _NO_PATHS,
}

# Options git takes before the subcommand that cannot make it run anything: -c, --config-env,
# --exec-path, --git-dir, --work-tree... are not here (config can name programs to run).
GIT_GLOBAL_WITH_VALUE = frozenset({"-C"})  # its value is checked as a path
GIT_GLOBAL = frozenset({"--no-pager", "-P", "--no-optional-locks", "--literal-pathspecs",
                        "--no-replace-objects"})
# What would run a program even without a hostile config: external diff and textconv
# drivers, pagers opened on files, and output written to a file.
_GIT_DIFFS = _p(banned="--output --ext-diff --textconv")
GIT: dict[str, Program] = {
    "status": _p(), "log": _GIT_DIFFS, "diff": _GIT_DIFFS, "show": _GIT_DIFFS,
    "ls-files": _p(), "rev-parse": _p(), "blame": _p(banned="--textconv"),
}

# Programs that run the program named in their arguments.
WRAPPERS = frozenset({
    "env", "command", "builtin", "exec", "nice", "nohup", "timeout", "sudo", "doas", "stdbuf",
    "time", "xargs", "setsid", "ionice", "chrt", "taskset", "unbuffer", "watch", "flock",
    "npx", "bunx", "pnpx", "eval", "source", ".", "strace", "ltrace", "firejail", "chroot",
})
# Programs + subcommands that run what follows them.
WRAPPER_SUBCOMMANDS = frozenset({
    ("uv", "run"), ("uv", "tool"), ("uvx", None), ("npm", "exec"), ("pnpm", "exec"), ("pnpm", "dlx"),
    ("yarn", "exec"), ("yarn", "dlx"), ("poetry", "run"), ("pipx", "run"), ("pdm", "run"),
    ("hatch", "run"), ("cargo", "run"), ("go", "run"), ("docker", "run"), ("docker", "exec"),
})
SHELLS = frozenset({"sh", "bash", "zsh", "dash", "ksh", "mksh", "fish", "csh", "tcsh", "busybox"})
INTERPRETERS = frozenset({
    "python", "python3", "python2", "pypy", "pypy3", "node", "nodejs", "deno", "bun", "perl",
    "ruby", "php", "lua", "luajit", "tclsh", "osascript", "pwsh", "powershell", "Rscript", "java",
    "jshell", "irb", "ghci", "julia",
})

# "Always" on one of these stores "program subcommand" (and allows its other arguments, each
# still path-checked); a None subcommand set means the program alone is the rule.
CURATED: dict[str, frozenset[str] | None] = {
    "git": frozenset({"status", "log", "diff", "show", "blame", "ls-files", "rev-parse"}),
    "npm": frozenset({"test"}), "pnpm": frozenset({"test"}), "yarn": frozenset({"test"}),
    "cargo": frozenset({"test", "build", "check", "clippy", "fmt"}),
    "go": frozenset({"test", "build", "vet"}),
    "ruff": frozenset({"check", "format"}),
    "pytest": None, "mypy": None,
}


def runs_others(words: tuple[str, ...]) -> bool:
    """Does this command start with a wrapper, a shell or an interpreter (by its base name)?"""
    if not words:
        return False
    program = words[0].rsplit("/", 1)[-1]
    sub = words[1] if len(words) > 1 else None
    return (program in WRAPPERS or program in SHELLS or program in INTERPRETERS
            or (program, sub) in WRAPPER_SUBCOMMANDS or (program, None) in WRAPPER_SUBCOMMANDS)


def option_hit(word: str, options: frozenset[str], *, find_style: bool = False) -> str | None:
    """The option of ``options`` that ``word`` spells, if any: a long option by any prefix
    (``--out=x`` is ``--output``), a short one anywhere in a cluster (``-So``, ``-oFILE``)."""
    if not options or not word.startswith("-") or word == "-":
        return None
    if find_style:
        return word if word in options else None
    if word.startswith("--"):
        name = word.split("=", 1)[0]
        if len(name) <= 2:
            return None
        return next((o for o in sorted(options) if o.startswith("--") and o.startswith(name)), None)
    # A cluster: -abc is -a -b -c, and -oFILE is -o FILE; a banned letter anywhere in it counts
    # (a value that happens to hold the letter only makes the command ask).
    return next((f"-{c}" for c in word[1:] if f"-{c}" in options), None)
