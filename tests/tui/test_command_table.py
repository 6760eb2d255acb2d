"""The slash-command table (``tui.commands``) and the chat screen's handlers (``chat_commands``)
name the same commands: one the table lists cannot go unhandled, and no handler is left unlisted.
A command that opens a screen names its module, which builds it with ``open_screen``."""

from importlib import import_module

from hermes_tui.tui import commands
from hermes_tui.tui.screens.chat_commands import HANDLERS


def test_each_command_of_the_table_has_a_handler_or_a_screen_and_each_handler_a_command():
    assert list(HANDLERS) == [command.name for command in commands.COMMANDS if not command.screen]
    for command in commands.COMMANDS:
        if command.screen:
            assert command.name not in HANDLERS
            assert callable(import_module(f"hermes_tui.tui.screens.{command.screen}").open_screen), command.name
