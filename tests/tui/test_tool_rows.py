"""How a tool call's outcome and an edit's diff read (pure text; the app's use is in test_tui_agent)."""

from __future__ import annotations

import json

from support.chat_app import app_test
from textual.app import App, ComposeResult
from textual.widgets import Collapsible

from hermes_tui.core.transcript import Message
from hermes_tui.tools.base import ToolResult
from hermes_tui.tui.screens.approval import diff_text
from hermes_tui.tui.widgets.message_views import ToolCallView, ToolResultMessage, outcome_text


def test_outcome_text_names_the_exit_code_size_and_duration():
    assert outcome_text("ok", 0, 1536, 35.4).markup == "[green]✓[/green] exit 0  [dim]1.5 KB · 35 ms[/dim]"
    assert outcome_text("ok", 2, 12, 1250.0).markup == "[red]✗ exit 2[/red]  [dim]12 B · 1.2 s[/dim]"
    assert outcome_text("ok", None, 24, 0.4).markup == "[green]✓[/green]  [dim]24 B · 0 ms[/dim]"
    assert outcome_text("denied", None, 0, None).markup == "[yellow]✗ denied[/yellow]"
    assert outcome_text("stopped", -15, 0, 2000.0).markup == "[yellow]■ stopped[/yellow] exit -15  [dim]2.0 s[/dim]"
    assert outcome_text("ok", 0, 3 * 1024 * 1024, None).markup == "[green]✓[/green] exit 0  [dim]3.0 MB[/dim]"
    assert outcome_text("[weird]", None, 0, None).plain == "[weird]"  # a status is text, never markup


def test_diff_text_colours_additions_removals_and_hunks():
    text = diff_text("--- a/x\n+++ b/x\n@@ -1 +1 @@\n-old\n+new\n same\n")
    styles = {text.plain[span.start:span.end].rstrip("\n"): str(span.style) for span in text.spans}
    assert styles == {"--- a/x": "bold", "+++ b/x": "bold", "@@ -1 +1 @@": "cyan", "-old": "red", "+new": "green"}


def test_a_long_diff_shows_its_head_and_how_much_more():
    text = diff_text("\n".join(f"+line {i}" for i in range(10)), limit=4)
    assert text.plain.splitlines()[-1] == "… 6 more lines" and "+line 3" in text.plain and "+line 4" not in text.plain


# --- rows of real code: brackets are text -------------------------------------------------


class RowsApp(App):
    def __init__(self, *rows) -> None:
        super().__init__()
        self.rows = rows

    def compose(self) -> ComposeResult:
        yield from self.rows


def _call(command: str) -> dict:
    return {"id": "c1", "type": "function", "function": {"name": "run_shell", "arguments": json.dumps({"command": command})}}


@app_test
async def test_rows_of_code_with_open_brackets_are_shown_as_text():
    """A result whose first line opens a bracket (a Python file starting `x = [1,`) with more
    lines, and a running call `echo [a`: their markup titles raised MarkupError and ended the app."""
    call = ToolCallView(_call("echo [a"))
    streaming = ToolCallView()
    result = ToolResultMessage(Message("tool", "x = [1,\n    2,\n]\n", tool_call_id="c1", name="read_file"))
    app = RowsApp(call, streaming, result)
    async with app.run_test(size=(100, 20)) as pilot:
        call.start()
        streaming.stream("run_shell", '{"command": "ls [/')
        await pilot.pause()
        assert "echo [a" in str(call.title) and "running" in str(call.title)
        assert '"ls [/' in str(streaming.title)
        assert "x = [1," in str(result.query_one(Collapsible).title) and "(4 lines)" in str(result.query_one(Collapsible).title)
        call.finish(ToolResult.error("[/] no such file [bold"))
        await pilot.pause()
        assert "✗ error" in str(call.title)
