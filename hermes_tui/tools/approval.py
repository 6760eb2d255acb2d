"""Whether a tool call runs: allowed, asked about, or denied, and why.

Pure logic: ``decide`` takes a description of the call (``ApprovalRequest``), the mode,
the rules that apply and whether anyone can be asked, and returns a ``Decision`` whose
reason is one line for the UI and the log. ``build_request`` makes the request from a
tool call and the workspace.

The order, first match wins:
1. a deny rule;                          5. a path outside the workspace: ask;
2. read-only mode: only reads,          6. an edit of a protected file: ask (but in full);
   allowlisted commands and external     7. an allow rule;
   tools trusted as reads go on;
3. the same call N times in a row: ask;  8. the mode: reads allowed; edits ask (ask) or
4. an ask rule;                             run (auto-edit, full); commands ask unless
                                            allowlisted, or run (full); external tools run as their
                                            server's trust says (``base.Trust``), else ask or run (full).
With no one to ask (headless), ask becomes deny.

The workspace boundary holds in every mode: ``full`` runs anything inside it without
asking but still asks before a path outside, and no "always" rule lifts that; nor does one
lift the protected files (``protected``: .git in any spelling, a bare-repository layout,
.vscode/, .idea/, .envrc, our own folders). A command is judged on its text, parsed as bash
(``command_check``): an allowlisted read-only command runs unasked when it is one simple
command of fixed words (no operators, substitutions, redirections or expansions) whose
paths, after glob and tilde expansion, stay inside the workspace; when in doubt, it asks.

Rules are exact where they allow: "always" stores the command as shown (``= ls -la src``),
or program + subcommand for a curated few (``git log``, ``npm test``: ``command_table.CURATED``),
and an allow rule still needs the command's paths inside and no banned option. Deny rules
match what a command runs through wrappers, paths and ``bash -c`` (``programs_run``), but are
a convenience, not a boundary: the sandbox under ``run_shell`` is.
"""

from __future__ import annotations

import dataclasses
import json
import shlex
from collections.abc import Sequence
from dataclasses import dataclass, field
from enum import Enum
from typing import Any, Protocol

from .base import Tool, ToolKind, Trust
from .command_check import UNKNOWN, CommandCheck, check_command, command_segments
from .command_table import CURATED, runs_others
from .protected import protected_reason

__all__ = ["CommandCheck", "check_command", "command_segments"]  # re-exported for callers

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


# --- shell commands: parsed as bash, judged against one table (command_check, command_table)
# CommandCheck, check_command and command_segments live in command_check; named here too.


# --- rules ------------------------------------------------------------------------------

EXACT = "= "  # a rule's prefix starting so matches the whole command, not a prefix of it


@dataclass(frozen=True)
class Rule:
    """``tool`` alone covers every call of it; with ``prefix``, commands starting with it;
    with a prefix ``"= words"``, exactly that command."""

    tool: str
    action: Action
    prefix: str | None = None

    @classmethod
    def parse(cls, text: str, action: Action) -> Rule:
        """``"edit_file"``, ``"run_shell: git status"`` or ``"run_shell: = ls -la src"``."""
        tool, sep, prefix = text.partition(":")
        tool, prefix = tool.strip(), prefix.strip()
        if not tool:
            raise ValueError(f"rule {text!r}: no tool name")
        if sep and not prefix.lstrip("= "):
            raise ValueError(f"rule {text!r}: empty command prefix")
        if prefix.startswith("="):
            prefix = EXACT + prefix[1:].strip()
        return cls(tool=tool, action=action, prefix=prefix or None)

    @classmethod
    def exact(cls, tool: str, words: Sequence[str], action: Action = Action.ALLOW) -> Rule:
        return cls(tool=tool, action=action, prefix=EXACT + shlex.join(words))

    @property
    def is_exact(self) -> bool:
        return self.prefix is not None and self.prefix.startswith(EXACT)

    def __str__(self) -> str:
        return f"{self.tool}: {self.prefix}" if self.prefix else self.tool

    def _words(self) -> tuple[str, ...]:
        assert self.prefix is not None
        try:
            return tuple(shlex.split(self.prefix.removeprefix(EXACT)))
        except ValueError:
            return (self.prefix,)

    def matches(self, request: ApprovalRequest) -> bool:
        if self.tool != request.tool:
            return False
        if self.prefix is None:
            return True
        if request.command is None:
            return False
        want = self._words()
        if self.action is Action.ALLOW:
            return self._allows(request.command_check, want)
        ran = command_segments(request.command)
        if self.action is Action.DENY and UNKNOWN in ran:
            return True  # `$(echo rm) x`: what runs is not known, and this rule might be it
        return any(words[: len(want)] == want for words in ran)

    def _allows(self, check: CommandCheck | None, want: tuple[str, ...]) -> bool:
        # Allowing "git status" must not allow "git status; rm -rf ~", nor `cat` allow
        # `cat ~/.ssh/id_rsa`, nor `git` allow `git -c alias.x=!cmd x`.
        if check is None or not check.simple or check.assignments or check.outside or check.banned:
            return False
        if self.is_exact:
            return check.words == want
        # A prefix rule on a wrapper, shell or interpreter (`CI=1`, `env`, `bash`, `python`)
        # would allow anything after it: such rules (older versions stored some) never allow.
        if runs_others(want) or "=" in want[0]:
            return False
        return check.words[: len(want)] == want


def rule_for(request: ApprovalRequest) -> Rule | None:
    """The rule an "always" (or "this session") answer stores, shown in the prompt before it
    is given: the tool; for a command, the command exactly, or program + subcommand when the
    pair is curated (``command_table.CURATED``). None when no rule should hold it (a compound
    command, one with an expansion, one starting with an assignment or a program that runs
    others): the answer then holds for this call only."""
    if request.kind is not ToolKind.SHELL:
        return Rule(tool=request.tool, action=Action.ALLOW)
    check = request.command_check
    if check is None or not check.simple or not check.words or check.assignments:
        return None
    words = check.words
    if runs_others(words) or "/" in words[0]:
        return None
    curated = CURATED.get(words[0], frozenset())
    if curated is None:
        return Rule(tool=request.tool, action=Action.ALLOW, prefix=words[0])
    if len(words) > 1 and words[1] in curated:
        return Rule(tool=request.tool, action=Action.ALLOW, prefix=f"{words[0]} {words[1]}")
    return Rule.exact(request.tool, words)


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
    protected: tuple[str, ...] = ()  # why each protected path named is (``protected``), edits only
    command: str | None = None
    command_check: CommandCheck | None = None
    repeats: int = 1
    trust: Trust = Trust.ASK  # an external tool's, from its server's config
    arguments: dict[str, Any] = field(default_factory=dict, compare=False)
    # What "always" would store, for the prompt to show before the user answers (``rule_for``).
    rule_preview: Rule | None = field(default=None, compare=False)


def build_request(tool: Tool, arguments: dict[str, Any], workspace: Any, repeats: int = 1) -> ApprovalRequest:
    """The request for one call; ``workspace`` is a ``workspace.Workspace``."""
    named = tool.paths(arguments)
    outside = tuple(p for p in named if not workspace.is_inside(p))
    protected: tuple[str, ...] = ()
    if tool.kind is ToolKind.EDIT:
        reasons = (protected_reason(workspace.resolve(p), workspace.root) for p in named)
        protected = tuple(r for r in reasons if r)
    command = tool.shell_command(arguments)
    check = check_command(command, workspace.is_inside, root=workspace.root) if command is not None else None
    request = ApprovalRequest(tool=tool.name, kind=tool.kind, outside=outside, protected=protected,
                              command=command, command_check=check, repeats=repeats,
                              trust=tool.trust, arguments=arguments)
    return dataclasses.replace(request, rule_preview=rule_for(request))


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
    if request.kind is ToolKind.EDIT and request.protected and mode is not Mode.FULL:
        # .git/config can make an allowlisted `git status` run a program (core.fsmonitor);
        # our config.yaml sets the approval mode. Before "outside": our home may be there.
        return Decision(Action.ASK, f"{label}: {request.protected[0]}")
    if request.outside:
        return Decision(Action.ASK, f"{label}: {request.outside[0]} is outside the workspace")
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
