"""What goes wrong with model files: each error is one line the user can act on."""

from __future__ import annotations

from hermes_tui.util.errors import AppError


class HubError(AppError):
    """A problem the user can act on; ``str()`` is one line."""


class CatalogError(HubError):
    """The catalog file is missing or malformed; names the file and the entry."""


class HubUnreachable(HubError):
    """Offline (HF_HUB_OFFLINE) or the hub endpoint cannot be reached."""


class NotEnoughSpace(HubError):
    """Not enough free disk space for the download; names the sizes and the folder."""


class DownloadCancelled(HubError):
    """The cancel event was set. Partial files stay; the same call resumes them."""
