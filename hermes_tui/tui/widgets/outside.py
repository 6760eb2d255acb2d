"""Outside text (a model's, a tool's, an MCP server's, an endpoint's) as widgets take it.

Textual parses a ``str`` as markup almost everywhere it takes one (``Static``, a
``DataTable`` cell, a ``Button`` label, a border title, an ``Option``, a notice): a
tool's output with ``[bold]`` in it changes its style, and one with ``[/]`` raises
``MarkupError`` and ends the app. A ``Content`` or a Rich ``Text`` is shown as it is,
so outside text goes to a widget as one of these, made here, never as a markup string
with the text put inside. Both also get ``terminal_text.visible_controls``: Textual
writes an ESC sequence in a ``Content`` to the terminal raw.
"""

from __future__ import annotations

from typing import Any

from rich.text import Text
from textual.content import Content

from hermes_tui.util.terminal_text import visible_controls

__all__ = ["shown", "shown_cell"]


def shown(text: object, style: str = "") -> Content:
    """``text`` for a widget that takes ``Content``: literal, its control characters visible."""
    return Content.styled(visible_controls(str(text)), style) if style else Content(visible_controls(str(text)))


def shown_cell(text: object, style: str = "", **options: Any) -> Text:
    """``text`` for a ``DataTable`` cell (a ``str`` cell is parsed as Rich markup): literal,
    its control characters visible. ``options``: ``Text``'s own (``no_wrap``, ``overflow``, ...)."""
    return Text(visible_controls(str(text)), style=style, **options)
