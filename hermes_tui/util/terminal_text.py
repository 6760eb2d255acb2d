"""Outside text made fit to show in a terminal: its control characters made visible.

A model's reply, a tool's output, an MCP server's name or error, a command waiting for
approval: none of it is ours, and a terminal obeys what it is sent. An ESC sequence in
it is an instruction to the user's terminal: OSC 52 writes the clipboard, OSC 8 makes a
link whose target is not what it shows, ``ESC[2J``/``ESC[H`` clear the screen and move
the cursor (so a prompt can show a command other than the one that runs). Textual and
Rich pass such text through to the terminal as it is (checked: ``\\x1b[2J`` inside a
``Content`` reaches the pty raw), so the app decides, here, once for every place that
shows outside text (the TUI and ``hermes-tui run``'s output).

The rule, :func:`visible_controls`:

- ``\\n`` and ``\\t`` are kept: they are how text is laid out. ``\\r\\n`` is a line ending
  and shows as ``\\n``; a lone ``\\r`` (which would let a line overwrite its own start) is
  shown as ``␍``.
- Every other C0 control and DEL shows as its Unicode control picture (ESC as ``␛``,
  BEL as ``␇``, NUL as ``␀``, DEL as ``␡``).
- C1 controls (U+0080-U+009F; ``\\x9b`` is a one-character CSI to some terminals) show
  as ``\\x9b``-style escapes: they have no pictures.
- The bidirectional overrides and isolates (U+202A-U+202E, U+2066-U+2069) show as
  ``⟨U+202E⟩``: terminals that do bidi (VTE, Konsole, mlterm) reorder what follows
  them, so a command in the approval prompt could read differently from what runs
  ("Trojan Source"). The plain marks (LRM, RLM) are left alone: right-to-left text
  needs them and they cannot reorder a run of text.

Made visible rather than dropped: what the user sees is then still what is there (a
command in the approval prompt with ``␛[2J`` in it is a command to be wary of; one with
it silently removed looks harmless and is not what runs), and nothing of a tool's output
goes missing without a trace. Only what is shown changes: the transcript stores, and
the model is sent, the text as it came.
"""

from __future__ import annotations

import re

__all__ = ["visible_controls"]

# Everything the rule above changes, and nothing else: text without any of it (nearly
# all text) is returned as it is, after one regex search.
_SHOWN_OTHERWISE = re.compile("\r\n?|[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")


def _picture(match: re.Match[str]) -> str:
    char = match.group()
    if char == "\r\n":
        return "\n"
    code = ord(char[0])
    if code < 0x20:
        return chr(0x2400 + code)  # the Control Pictures block: U+2400 + the C0 code
    if code == 0x7F:
        return "\u2421"  # ␡
    if code <= 0x9F:
        return f"\\x{code:02x}"
    return f"⟨U+{code:04X}⟩"


def visible_controls(text: str) -> str:
    """``text`` as it may be written to a terminal: controls other than newline and tab
    made visible (see the module's docstring for the rule and why)."""
    if _SHOWN_OTHERWISE.search(text) is None:
        return text
    return _SHOWN_OTHERWISE.sub(_picture, text)
