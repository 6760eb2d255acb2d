"""The slash-command table (``tui.commands``) and the chat screen's handlers (``chat_commands``)
name the same commands: one the table lists cannot go unhandled, and no handler is left unlisted."""

from hermes_tui.tui import commands
from hermes_tui.tui.screens.chat_commands import HANDLERS


def test_each_command_of_the_table_has_a_handler_and_each_handler_a_command():
    assert list(HANDLERS) == [command.name for command in commands.COMMANDS]
