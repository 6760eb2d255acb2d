"""The "always" answers to approval prompts, kept per workspace in our database.

A ``tools.approval.RuleStore`` backed by the ``approval_rules`` table. The workspace is
the resolved root as text, so two paths to one folder share their rules. Rules are
never written into the workspace: the model can write there.
"""

from __future__ import annotations

import time

from hermes_tui.store.db import translate_errors
from hermes_tui.store.store import Store
from hermes_tui.tools.approval import Action, Rule


class StoredRules:
    def __init__(self, store: Store) -> None:
        self.store = store

    def rules(self, workspace: str) -> list[Rule]:
        with translate_errors(self.store.path):
            rows = self.store.conn.execute(
                "SELECT tool, prefix, action FROM approval_rules WHERE workspace = ? ORDER BY created, rowid",
                (workspace,),
            ).fetchall()
        out = []
        for tool, prefix, action in rows:
            try:
                out.append(Rule(tool=tool, action=Action(action), prefix=prefix or None))
            except ValueError:
                continue  # a rule some later version wrote: not ours to apply
        return out

    def add(self, workspace: str, rule: Rule) -> None:
        with self.store._transaction():
            self.store.conn.execute(
                "INSERT OR IGNORE INTO approval_rules (workspace, tool, prefix, action, created) VALUES (?,?,?,?,?)",
                (workspace, rule.tool, rule.prefix or "", rule.action.value, time.time()),
            )

    def remove(self, workspace: str, rule: Rule) -> None:
        with self.store._transaction():
            self.store.conn.execute(
                "DELETE FROM approval_rules WHERE workspace = ? AND tool = ? AND prefix = ? AND action = ?",
                (workspace, rule.tool, rule.prefix or "", rule.action.value),
            )
