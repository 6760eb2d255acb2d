"""The command line: argparse front ends over the packages below; nothing imports it."""

from hermes_tui.cli.root import main

__all__ = ["main"]
