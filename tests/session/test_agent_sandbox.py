"""Where no OS sandbox confines commands: the app says so once, and a command that is not on
the read-only allowlist asks even when an "always" rule would have let it run (headless:
denied). Where there is one, rules work as before."""

from __future__ import annotations

import pytest

from hermes_tui.session.agent import AgentListener, AgentTurn, Tools
from hermes_tui.tools.approval import Action, Mode, Rule, build_request, decide
from hermes_tui.tools.builtin import builtin_registry
from hermes_tui.tools.sandbox import support
from hermes_tui.tools.sandbox.support import SandboxSupport
from hermes_tui.tools.workspace import Workspace

NONE = SandboxSupport(False, "none", "Landlock is not available")
LANDLOCK = SandboxSupport(True, "landlock", "Landlock ABI 7")


class Heard(AgentListener):
    def __init__(self) -> None:
        self.notices: list[str] = []

    def notice(self, text: str) -> None:
        self.notices.append(text)


def turn(tmp_path, mode: Mode, *, ask=True) -> tuple[AgentTurn, Tools, Heard]:
    tools = Tools(registry=builtin_registry(), workspace=Workspace(tmp_path), mode=mode)
    heard = Heard()
    agent = AgentTurn(None, tools, ask=(lambda *a: "allow") if ask else None,  # type: ignore[arg-type]
                      listener=heard, passes=object())  # type: ignore[arg-type]
    return agent, tools, heard


def decision(agent: AgentTurn, tools: Tools, command: str, rules=()):
    request = build_request(tools.registry.get("run_shell"), {"command": command}, tools.workspace)
    first = decide(request, mode=tools.mode, rules=rules, interactive=agent.ask is not None)
    return agent._unconfined(request, first)


@pytest.mark.parametrize("mode", [Mode.ASK, Mode.AUTO_EDIT])
def test_a_rule_is_not_enough_without_a_sandbox(tmp_path, monkeypatch, mode):
    monkeypatch.setattr(support, "available", lambda: NONE)
    agent, tools, _ = turn(tmp_path, mode)
    rule = Rule.parse("run_shell: npm test", Action.ALLOW)
    got = decision(agent, tools, "npm test", [rule])
    assert got.action is Action.ASK and "no OS sandbox" in got.reason
    assert decision(agent, tools, "ls -la").action is Action.ALLOW  # the allowlist still runs
    headless, tools, _ = turn(tmp_path, mode, ask=False)
    assert decision(headless, tools, "npm test", [rule]).action is Action.DENY


def test_with_a_sandbox_rules_work_as_before(tmp_path, monkeypatch):
    monkeypatch.setattr(support, "available", lambda: LANDLOCK)
    agent, tools, _ = turn(tmp_path, Mode.AUTO_EDIT)
    rule = Rule.parse("run_shell: npm test", Action.ALLOW)
    assert decision(agent, tools, "npm test", [rule]).action is Action.ALLOW


def test_full_mode_runs_unconfined_as_chosen(tmp_path, monkeypatch):
    monkeypatch.setattr(support, "available", lambda: NONE)
    agent, tools, heard = turn(tmp_path, Mode.FULL)
    assert decision(agent, tools, "npm test").action is Action.ALLOW
    agent._sandbox_notice()
    assert heard.notices == []


def test_the_notice_is_given_once(tmp_path, monkeypatch):
    monkeypatch.setattr(support, "available", lambda: NONE)
    agent, tools, heard = turn(tmp_path, Mode.ASK)
    agent._sandbox_notice()
    agent._sandbox_notice()
    assert len(heard.notices) == 1 and "No OS sandbox here (Landlock is not available)" in heard.notices[0]
    monkeypatch.setattr(support, "available", lambda: LANDLOCK)
    agent, tools, heard = turn(tmp_path, Mode.ASK)
    agent._sandbox_notice()
    assert heard.notices == []


def test_every_context_carries_the_current_mode_and_one_private_temp_dir(tmp_path):
    import os
    import stat
    import threading

    _, tools, _ = turn(tmp_path, Mode.ASK)
    first = tools.context(threading.Event()).sandbox
    tools.mode = Mode.READ_ONLY
    second = tools.context(threading.Event()).sandbox
    assert first.mode is Mode.ASK and second.mode is Mode.READ_ONLY
    assert first.tmpdir == second.tmpdir and stat.S_IMODE(os.stat(first.tmpdir).st_mode) == 0o700
