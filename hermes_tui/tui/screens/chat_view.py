"""The chat screen as its parts see it: what the turn controller, the pass runner, the guard's
notes and the slash commands use of ``ChatScreen``, and nothing more."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from textual.app import App
    from textual.message import Message
    from textual.widget import Widget

    from hermes_tui.tui.screens.chat_host import ChatHost
    from hermes_tui.tui.widgets.message_views import InfoNote
    from hermes_tui.tui.widgets.messages import MessageList


class ChatView(Protocol):
    """The chat screen, for the parts it owns."""

    @property
    def app(self) -> App[Any]: ...  # Textual's services: app workers, notices, other screens

    @property
    def host(self) -> ChatHost: ...  # the app's own services (HermesApp)

    @property
    def messages(self) -> MessageList: ...  # the conversation's rows

    @property
    def busy(self) -> bool: ...  # a turn or a pass is in flight, or one is queued

    def post_message(self, message: Message) -> bool: ...  # thread-safe: how threads report

    def run_worker(self, work: Any, name: str | None = "", group: str = "default", description: str = "",
                   exit_on_error: bool = True, start: bool = True, exclusive: bool = False,
                   thread: bool = False) -> Any: ...  # the screen's workers: they go with it

    def refresh_status(self) -> None: ...

    def refresh_bindings(self) -> None: ...

    async def note(self, text: str, *, title: str = "", severity: str = "information",
                   markdown: bool = False, before: Widget | None = None) -> InfoNote: ...
