"""How a tool call's outcome and an edit's diff read (pure text; the app's use is in test_tui_agent)."""

from __future__ import annotations

from hermes_tui.tui.screens.approval import diff_text
from hermes_tui.tui.widgets.message_views import outcome_text


def test_outcome_text_names_the_exit_code_size_and_duration():
    assert outcome_text("ok", 0, 1536, 35.4) == "[green]✓[/] exit 0  [dim]1.5 KB · 35 ms[/]"
    assert outcome_text("ok", 2, 12, 1250.0) == "[red]✗ exit 2[/]  [dim]12 B · 1.2 s[/]"
    assert outcome_text("ok", None, 24, 0.4) == "[green]✓[/]  [dim]24 B · 0 ms[/]"
    assert outcome_text("denied", None, 0, None) == "[yellow]✗ denied[/]"
    assert outcome_text("stopped", -15, 0, 2000.0) == "[yellow]■ stopped[/] exit -15  [dim]2.0 s[/]"
    assert outcome_text("ok", 0, 3 * 1024 * 1024, None) == "[green]✓[/] exit 0  [dim]3.0 MB[/]"


def test_diff_text_colours_additions_removals_and_hunks():
    text = diff_text("--- a/x\n+++ b/x\n@@ -1 +1 @@\n-old\n+new\n same\n")
    styles = {text.plain[span.start:span.end].rstrip("\n"): str(span.style) for span in text.spans}
    assert styles == {"--- a/x": "bold", "+++ b/x": "bold", "@@ -1 +1 @@": "cyan", "-old": "red", "+new": "green"}


def test_a_long_diff_shows_its_head_and_how_much_more():
    text = diff_text("\n".join(f"+line {i}" for i in range(10)), limit=4)
    assert text.plain.splitlines()[-1] == "… 6 more lines" and "+line 3" in text.plain and "+line 4" not in text.plain
