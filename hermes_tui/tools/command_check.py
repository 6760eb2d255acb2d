"""Judging a shell command's text: may it run unasked, and what does it run?

``check_command`` says whether a command is one simple command on the read-only allowlist
(``command_table``) whose every path stays in the workspace, after bash's own expansions:
globs are expanded in the workspace, ``~``/``~+`` replaced, brace lists and ``~-`` refused
(a word the check cannot pin down makes the command ask). Option values count as paths
whether attached (``-oFILE``, ``--opt=FILE``) or apart. Git runs unasked only on the
workspace's own repository or one above it, never on a nested ``sub/.git`` or a bare
layout, whose config (programs git runs) any command may have written.

``programs_run`` lists what a command would run, looking through wrappers (``env``,
``command``, ``timeout``...), absolute paths (``/bin/rm``), ``bash -c STRING`` (the string is
parsed too), git's global options and ``find -exec``/``-delete``: what deny rules match
against. It is a best effort: deny rules are not a security boundary (the sandbox is).
"""

from __future__ import annotations

import fnmatch
import glob
import itertools
import os
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TypedDict

from .bash_parse import Parsed, SimpleCommand, Word, parse
from .command_table import (
    GIT,
    GIT_GLOBAL,
    GIT_GLOBAL_WITH_VALUE,
    READ_ONLY,
    SHELLS,
    WRAPPER_SUBCOMMANDS,
    WRAPPERS,
    Program,
    option_hit,
)

MAX_GLOB_MATCHES = 1000  # more than this and the command asks: each match is checked
MAX_WALK_ENTRIES = 20_000  # the most entries looked at for symlinks before a following walk
MAX_DEPTH = 4  # bash -c "bash -c '...'": how deep a deny check reads nested commands


@dataclass(frozen=True)
class CommandCheck:
    simple: bool  # one command of fixed words: no operators, substitutions or redirections
    words: tuple[str, ...]  # its name and arguments (assignments before it not included)
    read_only: bool  # on the allowlist, nothing banned, every path inside the workspace
    reason: str
    assignments: tuple[str, ...] = ()  # "CI=1" before the command
    outside: str | None = None  # a word that may name a path outside the workspace
    banned: str | None = None  # an option that writes or runs programs (from the table)


class _Found(TypedDict):
    """What ``_judge`` found, the same in each of its verdicts (``CommandCheck``'s last fields)."""

    assignments: tuple[str, ...]
    outside: str | None
    banned: str | None


# --- paths -------------------------------------------------------------------------------

def _tilde(text: str, root: Path | None) -> str | None:
    head, sep, tail = text.partition("/")
    if head == "~+":
        if root is None:
            return None
        base = str(root)
    elif head == "~-":
        return None  # $OLDPWD: not known here
    else:
        base = os.path.expanduser(head)
        if base == head:
            return None  # ~user with no such user: bash leaves it, but say nothing for it
    return base + sep + tail


def expand(word: Word, root: Path | None) -> list[str] | None:
    """The paths ``word`` becomes after bash's expansions, or None when they cannot be
    known here (a brace list, ``~-``, a glob that could match ``..``, too many matches) or
    are not only paths (a glob matching a file named like an option, ``--pre=bash``)."""
    if word.text is None or word.brace or word.inner_tilde:
        return None
    text, pattern = word.text, word.pattern
    if word.tilde:
        expanded = _tilde(text, root)
        if expanded is None:
            return None
        head = len(text.partition("/")[0])
        text = expanded
        pattern = glob.escape(expanded[: len(expanded) - len(word.text) + head]) + pattern[head:]
    if not word.glob:
        return [text]
    if root is None or "[^" in pattern:
        return None
    # A component that can match "." or ".." (".*", ".?") climbs out, whatever bash's globskipdots.
    for part in pattern.split("/"):
        if part and part != glob.escape(part) and (fnmatch.fnmatchcase(".", part) or fnmatch.fnmatchcase("..", part)):
            return None
    matches = list(itertools.islice(glob.iglob(pattern, root_dir=root), MAX_GLOB_MATCHES + 1))
    if len(matches) > MAX_GLOB_MATCHES:
        return None
    if any(m.startswith("-") for m in matches):
        return None  # bash hands it over as a word, and the program reads it as an option (--pre=bash)
    return matches or [text]  # no match: bash passes the word as it is


def _values(word: Word, program: Program, root: Path | None) -> Iterable[str | None]:
    """What in one word may name a path (None: something that cannot be known)."""
    text = word.text
    if text is None:
        yield None
        return
    if not text.startswith("-") or text == "-":
        paths: Iterable[str | None] = expand(word, root) or [None]
        yield from paths
        return
    if word.glob or word.brace:
        yield None  # an option word bash would expand: not worth telling apart
        return
    if program.find_style:
        return
    if "=" in text:
        yield text.split("=", 1)[1]
    if not text.startswith("--"):
        # -oFILE: any tail of a cluster may be an attached value.
        for i in range(2, len(text)):
            yield text[i:]


def _first_outside(words: Sequence[Word], program: Program, inside: Callable[[str], bool],
                   root: Path | None) -> str | None:
    after_dashes = False
    for word in words:
        if word.text == "--" and not after_dashes and not program.find_style:
            after_dashes = True
            continue
        if not program.paths and not (word.glob or word.brace or word.tilde or word.inner_tilde):
            continue
        if after_dashes and word.text is not None:
            values: Iterable[str | None] = expand(word, root) or [None]
        else:
            values = _values(word, program, root)
        for value in values:
            if value is None or not inside(value):
                return word.text if word.text is not None else "$?"
    return None


def _follow_escape(words: Sequence[Word], inside: Callable[[str], bool], root: Path | None) -> str | None:
    """Under the paths a following walk starts from, a symlink that leads outside (or a tree
    too big to look through), as a reason; None when the walk stays in."""
    starts = [w.text for w in words if w.text and not w.text.startswith("-")]
    if len(starts) <= 1:
        starts.append(".")  # `grep -R PATTERN`, `rg -L PATTERN`: the one word may be the pattern
    seen = 0
    for start in starts:
        top = Path(start) if os.path.isabs(start) or root is None else root / start
        for dirpath, dirnames, filenames in os.walk(top, followlinks=False):
            for name in itertools.chain(dirnames, filenames):
                seen += 1
                if seen > MAX_WALK_ENTRIES:
                    return f"it follows symlinks, and '{start}' is too big to look through for ones leading out"
                full = os.path.join(dirpath, name)
                if os.path.islink(full) and not inside(full):
                    return f"it follows symlinks, and {full} leads outside the workspace"
    return None


def _writable_repository(dirs: Sequence[Word], root: Path | None) -> str | None:
    """The git folder git would use from the ``-C`` folders ``dirs`` when commands can write
    it, so that its config may name programs git runs (diff.external, a filter, an
    fsmonitor): a nested ``sub/.git`` or a bare layout (HEAD, objects/, refs/) in the
    workspace. Only the workspace's own .git is kept read-only for commands (``sandbox``)."""
    if root is None:
        return None
    folder = Path(os.path.realpath(root.joinpath(*(w.text or "" for w in dirs))))
    while folder.is_relative_to(root):
        if os.path.lexists(folder / ".git"):
            return None if folder == root else str((folder / ".git").relative_to(root))
        if (folder / "HEAD").is_file() and (folder / "objects").is_dir() and (folder / "refs").is_dir():
            return str(folder.relative_to(root))
        if folder == root:
            break
        folder = folder.parent
    return None


# --- the allowlist --------------------------------------------------------------------------

def _git(words: tuple[Word, ...]) -> tuple[Program | None, str, int, str | None]:
    """git's program entry, its name for reasons, where its arguments start, and a global
    option that is not allowed (or None)."""
    i = 1
    while i < len(words) and (words[i].text or "").startswith("-"):
        opt = words[i].text or ""
        if opt in GIT_GLOBAL:
            i += 1
        elif opt in GIT_GLOBAL_WITH_VALUE:
            i += 2
        else:
            return None, "git", i, opt
    sub = words[i].text if i < len(words) else None
    return (GIT.get(sub or ""), f"git {sub or ''}".strip(), i + 1, None)


def check_command(command: str, inside: Callable[[str], bool], *, root: Path | None = None) -> CommandCheck:
    """Judge ``command`` (its text, parsed as bash); ``inside(path)`` says if a path is in the
    workspace, ``root`` is where globs expand (no root: a glob makes the command ask)."""
    parsed = parse(command)
    if not parsed.single:
        first = parsed.commands[0].texts if parsed.commands else ()
        return CommandCheck(False, first, False, parsed.why or "a compound command")
    cmd = parsed.commands[0]
    words = cmd.texts
    assignments = tuple(a.text or "" for a in cmd.assignments)
    return _judge(cmd, words, assignments, inside, root)


def _judge(cmd: SimpleCommand, words: tuple[str, ...], assignments: tuple[str, ...],
           inside: Callable[[str], bool], root: Path | None) -> CommandCheck:
    program_name = words[0]
    start = 1
    if program_name == "git":
        program, shown, start, global_opt = _git(cmd.words)
        if global_opt is not None:
            outside = _first_outside(cmd.words[1:], Program(), inside, root)
            return CommandCheck(True, words, False, f"'git {global_opt}' is not on the read-only list "
                                "(options before the subcommand can make git run programs)",
                                assignments, outside, global_opt)
        # -C DIR: git works there, so the directory must be inside too.
        dirs = [w for a, w in zip(cmd.words[1:start], cmd.words[2:start]) if a.text == "-C"]
        outside = _first_outside(dirs, Program(), inside, root)
        repository = None if outside else _writable_repository(dirs, root)
        if program is not None and repository is not None:
            return CommandCheck(True, words, False, f"'{repository}' is a git folder commands can write: "
                                "its config may name programs git runs", assignments, None, None)
    else:
        program, shown, outside = READ_ONLY.get(program_name), program_name, None
    args = cmd.words[start:]
    table = program or Program()
    outside = outside or _first_outside(args, table, inside, root)
    banned = next((hit for w in args if w.text and (hit := option_hit(w.text, table.banned, find_style=table.find_style))), None)
    result = _Found(assignments=assignments, outside=outside, banned=banned)
    if program is None:
        return CommandCheck(True, words, False, f"'{shown}' is not on the read-only list", **result)
    if banned:
        return CommandCheck(True, words, False, f"'{program_name} {banned}' can write or run programs", **result)
    if outside:
        return CommandCheck(True, words, False, f"'{outside}' may be outside the workspace", **result)
    follows = next((hit for w in args if w.text and (hit := option_hit(w.text, table.follows, find_style=table.find_style))), None)
    if follows:
        escape = _follow_escape(args, inside, root)
        if escape:
            return CommandCheck(True, words, False, f"'{program_name} {follows}': {escape}", **result)
    if assignments:
        return CommandCheck(True, words, False, f"'{assignments[0]}' before the command can change what it runs", **result)
    return CommandCheck(True, words, True, "a read-only command on the allowlist", **result)


# --- what a command runs, for deny rules -----------------------------------------------------

UNKNOWN = ("$?",)  # a program that cannot be known before it runs ($(...), a variable, eval of one)

# Options of wrappers that take a value as the next word (so it is not the program).
_WRAPPER_VALUES = {
    "env": {"-u", "--unset", "-C", "--chdir", "-S", "--split-string"},
    "timeout": {"-s", "--signal", "-k", "--kill-after"},
    "sudo": {"-u", "-g", "-C", "-D", "-h", "-p", "-r", "-t", "-T", "-U", "--user", "--group"},
    "doas": {"-u", "-C"},
    "nice": {"-n", "--adjustment"},
    "ionice": {"-c", "-n", "-p", "-P", "-u"},
    "stdbuf": {"-i", "-o", "-e"},
    "xargs": {"-a", "-d", "-E", "-e", "-I", "-i", "-L", "-l", "-n", "-P", "-s", "--arg-file", "--delimiter",
              "--max-args", "--max-procs", "--max-lines", "--replace", "--eof", "--process-slot-var"},
    "exec": {"-a"},
    "flock": {"-w", "-E", "--timeout", "--conflict-exit-code"},
    "chrt": set(), "taskset": set(), "watch": {"-n", "-d", "--interval"},
    "npx": {"-p", "--package", "-c", "--call"},
    "uv": {"--with", "--python", "-p", "--directory", "--project", "--package", "--extra", "--env-file",
           "--index", "--group", "--from", "-w", "--with-requirements"},
}
_GIT_GLOBAL_VALUES = {"-C", "-c", "--git-dir", "--work-tree", "--namespace", "--config-env", "--super-prefix"}


def _skip_options(words: list[str], i: int, takes_value: set[str]) -> int:
    while i < len(words):
        w = words[i]
        if w == "--":
            return i + 1
        if "=" in w and not w.startswith("-") and w.split("=", 1)[0].replace("_", "a").isalnum():
            i += 1  # env NAME=value
            continue
        if not w.startswith("-") or w == "-":
            return i
        i += 2 if w in takes_value else 1
    return i


def _strip(words: list[str], depth: int, out: list[tuple[str, ...]]) -> None:
    """Add to ``out`` what ``words`` runs, through wrappers (recursively)."""
    while words:
        name = words[0].rsplit("/", 1)[-1]  # /bin/rm is rm
        words = [name, *words[1:]]
        sub = words[1] if len(words) > 1 else None
        if name in ("eval", "source", "."):
            if name == "eval" and depth < MAX_DEPTH:
                out.extend(_programs(" ".join(words[1:]), depth + 1))
            else:
                out.append(UNKNOWN)
            return
        if name in SHELLS:
            _shell(words, depth, out)
            return
        if name == "git":
            i = 1
            while i < len(words) and words[i].startswith("-"):
                i += 2 if words[i] in _GIT_GLOBAL_VALUES else 1
            out.append(("git", *words[i:]))
            return
        if name == "find":
            out.append(tuple(words))
            _find(words, depth, out)
            return
        if name in WRAPPERS or (name, sub) in WRAPPER_SUBCOMMANDS or (name, None) in WRAPPER_SUBCOMMANDS:
            out.append(tuple(words))  # a rule may name the wrapper itself too
            first = 2 if (name, sub) in WRAPPER_SUBCOMMANDS else 1
            i = _skip_options(words, first, _WRAPPER_VALUES.get(name, set()))
            if name == "timeout" and i < len(words):
                i += 1  # the duration
            words = words[i:]
            continue
        out.append(tuple(words))
        return


def _shell(words: list[str], depth: int, out: list[tuple[str, ...]]) -> None:
    out.append(tuple(words))
    for i, w in enumerate(words[1:], start=1):
        if w.startswith("-") and not w.startswith("--") and "c" in w[1:]:
            if i + 1 < len(words) and depth < MAX_DEPTH:
                out.extend(_programs(words[i + 1], depth + 1))
            else:
                out.append(UNKNOWN)
            return
        if not w.startswith("-"):
            out.append(UNKNOWN)  # a script: what it runs is not known here
            return


def _find(words: list[str], depth: int, out: list[tuple[str, ...]]) -> None:
    i = 1
    while i < len(words):
        w = words[i]
        if w in ("-exec", "-execdir", "-ok", "-okdir"):
            end = next((j for j in range(i + 1, len(words)) if words[j] in (";", "+")), len(words))
            _strip(words[i + 1:end], depth + 1, out)
            i = end
        elif w == "-delete":
            out.append(("rm", "<find -delete>"))
        i += 1


def _programs(command: str, depth: int = 0) -> list[tuple[str, ...]]:
    parsed: Parsed = parse(command)
    out: list[tuple[str, ...]] = []
    for cmd in parsed.commands:
        if not cmd.words:
            continue
        if cmd.words[0].text is None:
            out.append(UNKNOWN)
            continue
        _strip(list(cmd.texts), depth, out)
    return out


def programs_run(command: str) -> list[tuple[str, ...]]:
    """Every command ``command`` would run, each as its words with wrappers and the program's
    directory stripped (``UNKNOWN`` for one that cannot be known before it runs)."""
    return _programs(command)


def command_segments(command: str) -> list[tuple[str, ...]]:
    """The simple commands of ``command``, as deny rules see them (see ``programs_run``)."""
    return programs_run(command)
