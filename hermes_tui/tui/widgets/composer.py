"""The message input: multi-line, with history and slash-command completion.

Keys (they work in ordinary terminals; Shift+Enter only where the terminal reports it,
e.g. kitty, WezTerm, foot, Ghostty, recent iTerm2 — Ctrl+J works everywhere):

    Enter              send
    Ctrl+J, Shift+Enter, Alt+Enter   new line
    Up / Down          on the first / last line: earlier / later inputs
    Tab or Right       accept the completion shown after a ``/``
"""

from __future__ import annotations

from typing import Any

from textual import events
from textual.message import Message
from textual.widgets import TextArea

from hermes_tui.tui import commands

NEWLINE_KEYS = {"ctrl+j", "newline", "shift+enter", "alt+enter"}


class Composer(TextArea):
    class Submitted(Message):
        def __init__(self, composer: Composer, text: str):
            super().__init__()
            self.composer = composer
            self.text = text

    class Completions(Message):
        """The slash commands matching what is typed (empty: none, or not a command)."""

        def __init__(self, matches: list[commands.SlashCommand]):
            super().__init__()
            self.matches = matches

    def __init__(self, *, inputs: list[str] | None = None, **kwargs: Any) -> None:
        kwargs.setdefault("soft_wrap", True)
        kwargs.setdefault("show_line_numbers", False)
        kwargs.setdefault("tab_behavior", "focus")
        kwargs.setdefault("compact", True)
        kwargs.setdefault("highlight_cursor_line", False)
        kwargs.setdefault("placeholder", "Message · Enter sends · Ctrl+J new line · / for commands")
        super().__init__(**kwargs)
        self.inputs: list[str] = list(inputs or [])
        self._recall: int | None = None   # index into history while browsing it
        self._draft = ""                  # what was typed before browsing began
        self._matches: list[commands.SlashCommand] = []

    # --- keys ---------------------------------------------------------------------------
    async def _on_key(self, event: events.Key) -> None:
        # Handled here (before TextArea's own _on_key, which would insert a newline).
        if event.key == "enter":
            event.stop()
            event.prevent_default()
            self.action_submit()
        elif event.key in NEWLINE_KEYS:
            event.stop()
            event.prevent_default()
            self.insert("\n")
        elif event.key == "tab" and self.suggestion:
            event.stop()
            event.prevent_default()
            self.insert(self.suggestion + " ")

    def action_submit(self) -> None:
        text = self.text
        if not text.strip():
            return
        if not self.inputs or self.inputs[-1] != text:
            self.inputs.append(text)
        self._recall = None
        self._draft = ""
        self.clear()
        self.post_message(self.Submitted(self, text))

    # --- history ------------------------------------------------------------------------
    def action_cursor_up(self, select: bool = False) -> None:
        if not select and self.cursor_location[0] == 0 and self.inputs:
            self.recall(-1)
        else:
            super().action_cursor_up(select)

    def action_cursor_down(self, select: bool = False) -> None:
        if not select and self._recall is not None and self.cursor_location[0] == self.document.line_count - 1:
            self.recall(+1)
        else:
            super().action_cursor_down(select)

    def recall(self, step: int) -> None:
        """Step through earlier inputs (-1: older, +1: newer; past the newest: the draft)."""
        if self._recall is None:
            if step > 0:
                return
            self._draft = self.text
            index = len(self.inputs) - 1
        else:
            index = self._recall + step
        if index < 0:
            return
        if index >= len(self.inputs):
            self._recall = None
            self._set_text(self._draft)
            return
        self._recall = index
        self._set_text(self.inputs[index])

    def _set_text(self, text: str) -> None:
        self.load_text(text)
        self.move_cursor(self.document.end)

    # --- completion ---------------------------------------------------------------------
    def update_suggestion(self) -> None:
        text = self.text
        matches = commands.complete(text) if self.cursor_location == self.document.end else []
        if matches != self._matches:
            self._matches = matches
            self.post_message(self.Completions(matches))
        self.suggestion = matches[0].name[len(text) - 1:] if matches else ""
