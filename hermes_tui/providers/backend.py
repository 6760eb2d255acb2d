"""What a backend package offers, and what the backends share.

A backend is a package under ``providers/`` that ``config.provider_registry`` names. Its
``__init__`` offers ``make_chat_client(cfg)`` when it serves the chat role, ``make_summarizer(cfg)``
when it serves compaction, and optionally ``warm()`` (``Backend``). A factory raises
``ProviderError`` for a configuration it cannot run, saying what to set. ``providers.selection``
resolves the provider and calls the package; a backend never imports the selection.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Protocol

from hermes_tui.util.errors import AppError

if TYPE_CHECKING:
    import threading

    from hermes_tui.chat.client import ChatClient
    from hermes_tui.compaction.summarizer import Summarizer
    from hermes_tui.config import AuxiliaryCompressionConfig, ModelConfig


class ProviderError(AppError):
    """No usable model for a role as configured: the message says what to configure, ``key``
    names the config key to set. Raised from a ``ModelUnavailable`` (its ``__cause__``) when
    the named model is not on this machine."""


class Backend(Protocol):
    """The module-level functions of a backend package; it offers those of the roles it serves."""

    def make_chat_client(self, cfg: ModelConfig) -> ChatClient:
        """The conversation model ``model`` sets up. Raises ProviderError."""
        ...

    def make_summarizer(self, cfg: AuxiliaryCompressionConfig) -> Summarizer:
        """The compression model ``auxiliary.compression`` sets up. Raises ProviderError."""
        ...

    def warm(self) -> threading.Thread:
        """Optional: start loading, on a thread of its own, what the first call would load."""
        ...


def resolve_api_key(env_var: str) -> str | None:
    """The API key from environment variable ``env_var``; None when unset or blank."""
    if not env_var:
        return None
    value = os.environ.get(env_var, "").strip()
    return value or None
