"""Slash commands: the table, parsing and completion (plain data; no Textual).

One table serves the composer (``/`` completion), ``/help`` and the command palette
(ctrl+p, ``tui.palette``), so the three can never disagree about what exists.
"""

from __future__ import annotations

import re
from dataclasses import dataclass


@dataclass(frozen=True)
class SlashCommand:
    name: str          # without the slash
    help: str
    args: str = ""     # shown after the name in /help and completion, e.g. "[focus topic]"
    # A command that opens a screen: the module of ``tui/screens`` whose ``open_screen(host)``
    # builds it (imported when first opened), and whether the screen dismisses with a new
    # Config the app then runs with. Such a command needs no handler of its own.
    screen: str = ""
    returns_config: bool = False

    @property
    def usage(self) -> str:
        return f"/{self.name} {self.args}".rstrip()


COMMANDS: tuple[SlashCommand, ...] = (
    SlashCommand("help", "commands and key bindings"),
    SlashCommand("new", "start a new session"),
    SlashCommand("sessions", "browse and resume stored sessions"),
    SlashCommand("compact", "compact the context now (batch), optionally focused on a topic", "[focus topic]"),
    SlashCommand("usage", "tokens, context window, occupancy, passes and tokens saved"),
    SlashCommand("summary", "the current rolling summary"),
    SlashCommand("model", "switch the chat model (no name: pick from the local and endpoint models)", "[name]"),
    SlashCommand("mode", "the approval mode for tool calls (no mode: show it and the choices)",
                 "[read-only|ask|auto-edit|full]"),
    SlashCommand("models", "download and manage MLX models", screen="models", returns_config=True),
    SlashCommand("tools", "the tools, their approval, and the MCP servers (restart one)", screen="tools"),
    SlashCommand("bench", "measure what a pass costs on this machine", screen="bench"),
    SlashCommand("settings", "edit the configuration", screen="settings", returns_config=True),
    SlashCommand("quit", "quit hermes-tui"),
)
BY_NAME = {command.name: command for command in COMMANDS}

# "/word" with nothing but letters: meant as a command even when it is not one.
_COMMAND_LIKE = re.compile(r"/[A-Za-z-]+")


@dataclass(frozen=True)
class Invocation:
    command: SlashCommand | None   # None: looks like a command but is not one
    name: str
    arg: str = ""


def parse(text: str) -> Invocation | None:
    """A slash command typed in the composer, or None when the text is a message.

    ``/compact the parser bug`` is a command with an argument; ``/usr/lib is empty?``
    is a message (a path, not a command word).
    """
    stripped = text.strip()
    if not stripped.startswith("/"):
        return None
    word, _, arg = stripped.partition(" ")
    if word[1:] in BY_NAME:
        return Invocation(BY_NAME[word[1:]], word[1:], arg.strip())
    if _COMMAND_LIKE.fullmatch(word):
        return Invocation(None, word[1:], arg.strip())
    return None


def complete(prefix: str) -> list[SlashCommand]:
    """Commands whose ``/name`` starts with ``prefix`` (a single word starting with ``/``)."""
    if not prefix.startswith("/") or " " in prefix or "\n" in prefix:
        return []
    word = prefix[1:].lower()
    return [command for command in COMMANDS if command.name.startswith(word)]
