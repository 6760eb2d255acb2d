"""The approval prompt: may this tool call run? Allow once, for this session, always, or deny.

Shown (with the terminal bell) when ``tools.approval.decide`` asks. It shows the tool, the
command or the arguments, why it asks, and for an edit the diff it would make, coloured.
It dismisses with an ``Answer``; Escape denies (the model gets a "denied" result and
carries on). "Always" is offered only when a rule can hold it (``session.agent.always_rule``:
a compound command can only be allowed once).

It shows all of it, however long: the dialog scrolls while its buttons stay docked at the
bottom, a command's line breaks are marked (``⏎``) so a second command sixty blank lines
down cannot hide below the first, and the rule "Always" would save is spelled out.

Everything it shows of the call is the model's (the tool, the command, the path, the diff) or
a rule's text quoting it: it is shown literally, with its control characters visible
(``widgets.outside``), so the prompt shows the command that would run, not what an escape
sequence in it makes the terminal draw.
"""

from __future__ import annotations

from rich.text import Text
from textual import on
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, VerticalScroll
from textual.content import Content
from textual.message import Message as UIMessage
from textual.screen import ModalScreen
from textual.widgets import Button, Static

from hermes_tui.session.agent import Answer, always_rule
from hermes_tui.tools.approval import ApprovalRequest
from hermes_tui.tui.widgets.outside import shown
from hermes_tui.tui.widgets.text import pretty_args
from hermes_tui.util.terminal_text import visible_controls

DIFF_LINES = 400  # a longer diff shows its head and says how much more there is


def diff_text(diff: str, limit: int = DIFF_LINES) -> Text:
    """A unified diff, coloured as ``git diff`` does: additions green, removals red, hunks cyan."""
    text = Text(no_wrap=True, overflow="ellipsis")
    lines = visible_controls(diff).splitlines()  # the file's text: its escapes shown, not obeyed
    for line in lines[:limit]:
        if line.startswith(("+++", "---")):
            style = "bold"
        elif line.startswith("+"):
            style = "green"
        elif line.startswith("-"):
            style = "red"
        elif line.startswith("@@"):
            style = "cyan"
        else:
            style = ""
        text.append(line + "\n", style)
    if len(lines) > limit:
        text.append(f"… {len(lines) - limit} more lines\n", "dim")
    return text


# Marks each line break of a command: what follows it is another command to the shell.
LINE_BREAK = "⏎"


def what_it_does(request: ApprovalRequest) -> str:
    """The call in one block: the command for a command (its line breaks marked), else the
    arguments."""
    if request.command is not None:
        lines = request.command.split("\n")
        shown_lines = "\n".join(f"{line}{LINE_BREAK}" for line in lines[:-1]) + ("\n" if len(lines) > 1 else "")
        return f"$ {shown_lines}{lines[-1]}"
    return pretty_args(request.arguments)


def rule_line(request: ApprovalRequest) -> str:
    """What "Always" would save, or why it is not offered."""
    rule = always_rule(request)
    if rule is None:
        return ("Always is not offered: no rule can allow just this "
                "(more than one command, or a program that runs others).")
    return f"Always saves the rule: {rule}"


class ApprovalScreen(ModalScreen[Answer]):
    DEFAULT_CSS = """
    ApprovalScreen {
        align: center middle;
        #dialog {
            width: 100;
            max-width: 95%;
            height: auto;
            max-height: 90%;
            scrollbar-gutter: stable;
            padding: 1 2;
            background: $surface;
            border: round $warning;
            border-title-color: $text;
        }
        #reason { color: $text-muted; margin-bottom: 1; }
        #call { text-style: bold; margin-bottom: 1; }
        #preview { height: auto; max-height: 20; border: round $border; margin-bottom: 1; }
        #rule { color: $text-muted; margin-bottom: 1; }
        #buttons { dock: bottom; height: auto; align-horizontal: right; background: $surface; }
        #buttons Button { margin-left: 1; }
    }
    """

    BINDINGS = [
        Binding("y", "answer('allow_once')", "Allow once"),
        Binding("s", "answer('allow_session')", "This session"),
        Binding("a", "answer('always')", "Always"),
        Binding("n,d,escape", "answer('deny')", "Deny"),
    ]

    class Withdrawn(UIMessage):
        """The turn stopped while the prompt was up: it goes, as a deny."""

    def __init__(self, request: ApprovalRequest, preview: str | None, reason: str) -> None:
        super().__init__()
        self.request, self.preview, self.reason = request, preview, reason
        self.can_always = always_rule(request) is not None

    def compose(self) -> ComposeResult:
        # Scrolls when the call is long; the buttons are docked, so they stay on screen.
        with VerticalScroll(id="dialog") as dialog:
            dialog.border_title = Content.assemble("Allow ", shown(self.request.tool), "?")  # a str title is markup
            yield Static(shown(self.reason), id="reason")
            yield Static(shown(what_it_does(self.request)), id="call")
            yield Static(shown(rule_line(self.request)), id="rule")
            if self.preview:
                with VerticalScroll(id="preview"):
                    yield Static(diff_text(self.preview), id="diff")
            with Horizontal(id="buttons"):
                yield Button("Allow once (y)", id="allow_once", variant="primary")
                yield Button("This session (s)", id="allow_session")
                if self.can_always:
                    yield Button("Always (a)", id="always")
                yield Button("Deny (n)", id="deny", variant="error")

    def on_mount(self) -> None:
        self.app.bell()
        self.query_one("#deny", Button).focus()  # a stray Enter never allows anything

    @on(Withdrawn)
    def _withdrawn(self) -> None:
        if self.is_attached and self.app.screen is self:
            self.dismiss(Answer.DENY)

    @on(Button.Pressed)
    def _pressed(self, event: Button.Pressed) -> None:
        event.stop()
        self.action_answer(event.button.id or Answer.DENY.value)

    def action_answer(self, answer: str) -> None:
        if answer == Answer.ALWAYS.value and not self.can_always:
            return
        self.dismiss(Answer(answer))
