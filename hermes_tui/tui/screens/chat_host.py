"""What the chat screen asks of the app that hosts it (``HermesApp``), and nothing more."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from pathlib import Path

    from hermes_tui.config import Config
    from hermes_tui.providers.choices import ModelChoice
    from hermes_tui.session.agent import Tools
    from hermes_tui.session.session import Session
    from hermes_tui.tools.approval import Mode


class ScreenHost(Protocol):
    """What a screen a slash command opens by name is built from: ``open_screen(host)`` in
    the module ``commands.SlashCommand.screen`` names."""

    config_path: Path

    def chat_tools(self) -> Tools | None: ...


class ChatHost(Protocol):
    """What the chat screen asks of the app that hosts it (``HermesApp``), and nothing more."""

    config: Config
    config_path: Path
    reply_tokens: int | None
    approval_mode: Mode
    told_no_tools: set[str]  # the chat models the app has said cannot call tools

    def new_session(self) -> None: ...
    def show_sessions(self) -> None: ...
    def open_tool_screen(self, name: str) -> None: ...
    def use_chat_model(self, choice: ModelChoice) -> dict[str, Any]: ...
    def tools_for(self, session: Session) -> Tools | None: ...
