"""The one base of the errors hermes-tui reports to its user, carrying the facts a UI needs.

An error's message (``str(exc)``) is one line for people and the log. To choose its words
and buttons the UI also needs facts: what kind of failure, which config key fixes it, which
server or model it concerns, and the fix when the raiser knows it better than the UI does.
Reading those back out of the message with patterns breaks whenever a message is reworded,
so they travel as fields, set where the error is raised (None where unknown).

Control-flow signals that never reach the user (a cancelled generation, a splice that lost
a race) are not ``AppError`` s.
"""

from __future__ import annotations

__all__ = ["AppError"]


class AppError(Exception):
    """A problem the user can act on; ``str()`` is one line.

    ``kind`` names the failure with a constant of the raising package (``"refused"``,
    ``"locked"``, ...; a subclass may give a default); ``key`` is the dotted config key that
    fixes it (``"model.base_url"``); ``endpoint`` the server's URL; ``model`` the model's
    name or folder; ``fix`` one sentence saying what to do.
    """

    kind: str = ""

    def __init__(
        self,
        message: str = "",
        *,
        kind: str | None = None,
        key: str | None = None,
        endpoint: str | None = None,
        model: str | None = None,
        fix: str | None = None,
    ) -> None:
        super().__init__(message)
        if kind is not None:
            self.kind = kind
        self.key = key
        self.endpoint = endpoint
        self.model = model
        self.fix = fix
