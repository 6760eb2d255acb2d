"""The command palette (ctrl+p): each slash command of ``tui.commands`` as an entry."""

from __future__ import annotations

from functools import partial
from typing import Protocol, cast

from textual.command import DiscoveryHit, Hit, Hits, Provider

from hermes_tui.tui.commands import COMMANDS


class RunsSlashCommands(Protocol):
    """The app as the palette sees it: it runs a slash command typed as text."""

    def run_slash(self, text: str) -> None: ...


class SlashCommandsProvider(Provider):
    """Each slash command as a command-palette entry (ctrl+p)."""

    def _run(self, name: str) -> None:
        cast(RunsSlashCommands, self.app).run_slash(f"/{name}")

    async def discover(self) -> Hits:
        for command in COMMANDS:
            yield DiscoveryHit(command.usage, partial(self._run, command.name), help=command.help)

    async def search(self, query: str) -> Hits:
        matcher = self.matcher(query)
        for command in COMMANDS:
            candidate = f"/{command.name} {command.help}"
            score = matcher.match(candidate)
            if score > 0:
                yield Hit(score, matcher.highlight(candidate), partial(self._run, command.name), help=command.usage)
