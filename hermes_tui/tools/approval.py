"""Whether a tool call runs: allowed, asked about, or denied, and why.

Pure logic: ``decide`` takes a description of the call (``ApprovalRequest``), the mode,
the rules that apply and whether anyone can be asked, and returns a ``Decision`` whose
reason is one line for the UI and the log. ``build_request`` makes the request from a
tool call and the workspace.

The order, first match wins:
1. a deny rule;                          5. a path outside the workspace: ask;
2. read-only mode: only reads,          6. an edit inside .git/: ask (but in full);
   allowlisted commands and external     7. an allow rule;
   tools trusted as reads go on;
3. the same call N times in a row: ask;  8. the mode: reads allowed; edits ask (ask) or
4. an ask rule;                             run (auto-edit, full); commands ask unless
                                            allowlisted, or run (full); external tools run as their
                                            server's trust says (``base.Trust``), else ask or run (full).
With no one to ask (headless), ask becomes deny.

The workspace boundary holds in every mode: ``full`` runs anything inside it without
asking but still asks before a path outside, and no "always" rule lifts that. A command
is judged on its text only: an allowlisted read-only command runs unasked when it is one
simple command (no ``; & | < > $ ( )``, backticks, backslashes or newlines anywhere, even
quoted) whose path arguments stay inside the workspace; when in doubt, it asks.
"""

from __future__ import annotations

import json
import re
import shlex
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from enum import Enum
from typing import Any, Protocol

from .base import Tool, ToolKind, Trust

REPEAT_LIMIT = 3


class Mode(str, Enum):
    READ_ONLY = "read-only"
    ASK = "ask"
    AUTO_EDIT = "auto-edit"
    FULL = "full"


class Action(str, Enum):
    ALLOW = "allow"
    ASK = "ask"
    DENY = "deny"


@dataclass(frozen=True)
class Decision:
    action: Action
    reason: str


# --- shell commands -------------------------------------------------------------------

# Any of these anywhere in a command, quoted or not, means it is not judged read-only.
_COMPOUND = re.compile(r"[;&|<>$()`\\\n\r]")
_GLOB = re.compile(r"[*?\[\]{}]")

# Read-only commands, and the options that would make them write or run something.
READ_ONLY_COMMANDS: dict[str, frozenset[str]] = {
    "ls": frozenset(), "cat": frozenset(), "head": frozenset(), "tail": frozenset(),
    "wc": frozenset(), "nl": frozenset(), "pwd": frozenset(), "echo": frozenset(),
    "grep": frozenset(), "egrep": frozenset(), "fgrep": frozenset(),
    "rg": frozenset({"--pre", "-z", "--search-zip"}),
    "stat": frozenset(), "du": frozenset(), "df": frozenset(), "diff": frozenset(),
    "cmp": frozenset(), "which": frozenset(), "whoami": frozenset(), "id": frozenset(),
    "uname": frozenset(), "basename": frozenset(), "dirname": frozenset(),
    "realpath": frozenset(),
    "sort": frozenset({"-o", "--output", "--compress-program"}),
    "find": frozenset({"-exec", "-execdir", "-ok", "-okdir", "-delete", "-fprint",
                       "-fprint0", "-fprintf", "-fls"}),
}
# git: the subcommand must come first (no -c / -C / --git-dir before it).
READ_ONLY_GIT: dict[str, frozenset[str]] = {
    "status": frozenset(), "log": frozenset({"--output", "--ext-diff"}),
    "diff": frozenset({"--output", "--ext-diff"}), "show": frozenset({"--output", "--ext-diff"}),
    "ls-files": frozenset(), "rev-parse": frozenset(), "blame": frozenset(),
}


@dataclass(frozen=True)
class CommandCheck:
    simple: bool  # one command, no operators, expansions or redirections
    words: tuple[str, ...]
    read_only: bool  # on the allowlist, and every path argument inside the workspace
    reason: str


def _banned_option(words: Sequence[str], banned: frozenset[str]) -> str | None:
    for word in words:
        name = word.split("=", 1)[0]
        if name in banned:
            return name
    return None


def _path_words(words: Sequence[str]) -> Iterable[str]:
    for word in words:
        if word.startswith("-"):
            if "=" in word:
                yield word.split("=", 1)[1]
            continue
        yield word


def _path_inside(word: str, inside: Callable[[str], bool]) -> bool:
    if not word:
        return True
    if _GLOB.search(word):
        parts = word.split("/")
        first_glob = next(i for i, p in enumerate(parts) if _GLOB.search(p))
        # ".*" can expand to "..": a glob on a dot-name could leave the workspace.
        if any(p.startswith(".") for p in parts[first_glob:] if _GLOB.search(p)):
            return False
        word = "/".join(parts[:first_glob]) or "."
    return inside(word)


def check_command(command: str, inside: Callable[[str], bool]) -> CommandCheck:
    """Judge ``command`` (text only); ``inside(path)`` says if a path is in the workspace."""
    if _COMPOUND.search(command):
        return CommandCheck(False, (), False, "a compound command (operators, redirection or expansion)")
    try:
        words = tuple(shlex.split(command))
    except ValueError:
        return CommandCheck(False, (), False, "a command that does not parse")
    if not words:
        return CommandCheck(False, (), False, "an empty command")
    program, args = words[0], words[1:]
    if program == "git":
        if not args or args[0] not in READ_ONLY_GIT:
            return CommandCheck(True, words, False, f"'git {args[0] if args else ''}' is not on the read-only list")
        banned = _banned_option(args[1:], READ_ONLY_GIT[args[0]])
        rest = args[1:]
    elif program in READ_ONLY_COMMANDS:
        banned = _banned_option(args, READ_ONLY_COMMANDS[program])
        rest = args
    else:
        return CommandCheck(True, words, False, f"'{program}' is not on the read-only list")
    if banned:
        return CommandCheck(True, words, False, f"'{program} {banned}' can write or run programs")
    for word in _path_words(rest):
        if not _path_inside(word, inside):
            return CommandCheck(True, words, False, f"'{word}' may be outside the workspace")
    return CommandCheck(True, words, True, "a read-only command on the allowlist")


def command_segments(command: str) -> list[tuple[str, ...]]:
    """The simple commands a compound one is made of, as well as text allows (for deny rules)."""
    segments = []
    for part in re.split(r"[;&|\n\r(){}]+|\$\(|`", command):
        try:
            words = tuple(shlex.split(part))
        except ValueError:
            words = tuple(part.split())
        if words:
            segments.append(words)
    return segments


# --- rules ------------------------------------------------------------------------------

@dataclass(frozen=True)
class Rule:
    """``tool`` alone covers every call of it; with ``prefix``, commands starting with it."""

    tool: str
    action: Action
    prefix: str | None = None

    @classmethod
    def parse(cls, text: str, action: Action) -> Rule:
        """``"edit_file"`` or ``"run_shell: git status"``."""
        tool, sep, prefix = text.partition(":")
        tool, prefix = tool.strip(), prefix.strip()
        if not tool:
            raise ValueError(f"rule {text!r}: no tool name")
        if sep and not prefix:
            raise ValueError(f"rule {text!r}: empty command prefix")
        return cls(tool=tool, action=action, prefix=prefix or None)

    def __str__(self) -> str:
        return f"{self.tool}: {self.prefix}" if self.prefix else self.tool

    def matches(self, request: ApprovalRequest) -> bool:
        if self.tool != request.tool:
            return False
        if self.prefix is None:
            return True
        if request.command is None:
            return False
        want = tuple(shlex.split(self.prefix))
        if self.action is Action.ALLOW:
            # Allowing "git status" must not allow "git status; rm -rf ~".
            check = request.command_check
            return check is not None and check.simple and check.words[: len(want)] == want
        return any(words[: len(want)] == want for words in command_segments(request.command))


class RuleStore(Protocol):
    """Where "always" answers live, per workspace (the database, in the app)."""

    def rules(self, workspace: str) -> list[Rule]: ...

    def add(self, workspace: str, rule: Rule) -> None: ...

    def remove(self, workspace: str, rule: Rule) -> None: ...


class MemoryRuleStore:
    """Rules held in memory: for tests, headless runs, and "allow for this session"."""

    def __init__(self) -> None:
        self._rules: dict[str, list[Rule]] = {}

    def rules(self, workspace: str) -> list[Rule]:
        return list(self._rules.get(workspace, ()))

    def add(self, workspace: str, rule: Rule) -> None:
        rules = self._rules.setdefault(workspace, [])
        if rule not in rules:
            rules.append(rule)

    def remove(self, workspace: str, rule: Rule) -> None:
        if rule in self._rules.get(workspace, ()):
            self._rules[workspace].remove(rule)


# --- repeated calls ---------------------------------------------------------------------

class RepeatTracker:
    """How many times in a row the same call (tool and arguments) has come, this one included."""

    def __init__(self) -> None:
        self._last: tuple[str, str] | None = None
        self._count = 0

    def observe(self, tool: str, arguments: dict[str, Any]) -> int:
        key = (tool, json.dumps(arguments, sort_keys=True, ensure_ascii=False))
        self._count = self._count + 1 if key == self._last else 1
        self._last = key
        return self._count

    def reset(self) -> None:
        """After the user allows a repeat: count again from it."""
        self._count = 0


# --- the decision -----------------------------------------------------------------------

@dataclass(frozen=True)
class ApprovalRequest:
    tool: str
    kind: ToolKind
    outside: tuple[str, ...] = ()  # the paths named that resolve outside the workspace
    protected: tuple[str, ...] = ()  # the paths named that resolve into a .git directory
    command: str | None = None
    command_check: CommandCheck | None = None
    repeats: int = 1
    trust: Trust = Trust.ASK  # an external tool's, from its server's config
    arguments: dict[str, Any] = field(default_factory=dict, compare=False)


def build_request(tool: Tool, arguments: dict[str, Any], workspace: Any, repeats: int = 1) -> ApprovalRequest:
    """The request for one call; ``workspace`` is a ``workspace.Workspace``."""
    named = tool.paths(arguments)
    outside = tuple(p for p in named if not workspace.is_inside(p))
    protected = tuple(p for p in named if p not in outside
                      and ".git" in workspace.resolve(p).relative_to(workspace.root).parts)
    command = tool.shell_command(arguments)
    check = check_command(command, workspace.is_inside) if command is not None else None
    return ApprovalRequest(tool=tool.name, kind=tool.kind, outside=outside, protected=protected,
                           command=command, command_check=check, repeats=repeats,
                           trust=tool.trust, arguments=arguments)


def _label(request: ApprovalRequest) -> str:
    return f"{request.tool} `{request.command}`" if request.command is not None else request.tool


def _by_rules(request: ApprovalRequest, rules: Sequence[Rule], action: Action) -> Rule | None:
    return next((r for r in rules if r.action is action and r.matches(request)), None)


def _decide(request: ApprovalRequest, mode: Mode, rules: Sequence[Rule], repeat_limit: int) -> Decision:
    label = _label(request)
    check = request.command_check
    allowlisted = request.kind is ToolKind.SHELL and check is not None and check.read_only
    external_read = request.kind is ToolKind.EXTERNAL and request.trust is Trust.READ
    rule = _by_rules(request, rules, Action.DENY)
    if rule:
        return Decision(Action.DENY, f"{label}: denied by the rule '{rule}'")
    if mode is Mode.READ_ONLY and not (request.kind is ToolKind.READ or allowlisted or external_read):
        why = f" ({check.reason})" if check is not None else ""
        return Decision(Action.DENY, f"{label}: not allowed in read-only mode{why}")
    if request.repeats >= repeat_limit:
        return Decision(Action.ASK, f"{label}: the same call {request.repeats} times in a row")
    rule = _by_rules(request, rules, Action.ASK)
    if rule:
        return Decision(Action.ASK, f"{label}: the rule '{rule}' asks")
    if request.outside:
        return Decision(Action.ASK, f"{label}: {request.outside[0]} is outside the workspace")
    if request.kind is ToolKind.EDIT and request.protected and mode is not Mode.FULL:
        # .git/config can make an allowlisted `git status` run a program (core.fsmonitor).
        return Decision(Action.ASK, f"{label}: {request.protected[0]} is inside .git; edits there always ask")
    rule = _by_rules(request, rules, Action.ALLOW)
    if rule:
        return Decision(Action.ALLOW, f"{label}: allowed by the rule '{rule}'")
    if request.kind is ToolKind.READ:
        return Decision(Action.ALLOW, f"{label}: reads inside the workspace need no approval")
    if external_read:
        return Decision(Action.ALLOW, f"{label}: marked read-only by its server, which is trusted to say so")
    if request.kind is ToolKind.EXTERNAL and request.trust is Trust.RUN:
        return Decision(Action.ALLOW, f"{label}: its MCP server is trusted")
    if mode is Mode.FULL:
        return Decision(Action.ALLOW, f"{label}: full mode")
    if request.kind is ToolKind.EDIT:
        if mode is Mode.AUTO_EDIT:
            return Decision(Action.ALLOW, f"{label}: auto-edit mode, inside the workspace")
        return Decision(Action.ASK, f"{label}: edits ask in {mode.value} mode")
    if request.kind is ToolKind.SHELL:
        if allowlisted:
            return Decision(Action.ALLOW, f"{label}: {check.reason}")  # type: ignore[union-attr]
        why = check.reason if check is not None else "a command"
        return Decision(Action.ASK, f"{label}: {why}")
    return Decision(Action.ASK, f"{label}: an external tool; its effects are unknown")


def decide(request: ApprovalRequest, *, mode: Mode, rules: Sequence[Rule] = (),
           interactive: bool = True, repeat_limit: int = REPEAT_LIMIT) -> Decision:
    decision = _decide(request, mode, rules, repeat_limit)
    if decision.action is Action.ASK and not interactive:
        return Decision(Action.DENY, f"{decision.reason}; no one to ask (headless), so denied")
    return decision
