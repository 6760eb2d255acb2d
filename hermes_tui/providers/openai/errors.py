"""What the clients of OpenAI-compatible endpoints share: sending, and failure mapping.

Two clients talk to ``POST /v1/chat/completions``: the compression summarizer
(``summarizer``) and the chat model (``chat``). Both send the
request with ``post_chat_completions`` and turn every failure into an error with a
``kind`` (``core.failures``) and a one-line message that names the endpoint and says
what to do. This module holds the parts they share: the request, the mapping of HTTP
status errors and connection errors raised by the openai SDK, and small text helpers.
It returns ``(kind, message)`` pairs; each client wraps them in its own exception class.

Where the messages name config keys, the caller says which section it is configured
in (``auxiliary.compression`` or ``model``).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, NamedTuple

if TYPE_CHECKING:  # the SDK takes seconds to import: the callers import it when they call
    import httpx2
    import openai

from hermes_tui.chat.client import Overflow
from hermes_tui.core.failures import CONTEXT_EXCEEDED, HTTP_4XX, HTTP_5XX, MALFORMED, REFUSED

from .overflow import recognise

# How much of a server's error text goes into a one-line message.
MAX_ERROR_TEXT = 160
# The server's words about an overflow are the cause the user needs: kept whole, figures and all.
MAX_OVERFLOW_TEXT = 400


@dataclass(frozen=True)
class Endpoint:
    """How messages name an endpoint and the config keys that set it up."""

    what: str  # "compression endpoint", "model endpoint"
    base_url: str
    model: str
    config: str  # the config section: "auxiliary.compression", "model"
    base_url_key: str = "base_url"  # how hints name the base URL key


def post_chat_completions(client: openai.OpenAI, body: dict[str, Any], *, stream: bool) -> httpx2.Response:
    """``POST {base_url}/chat/completions`` with ``body`` as it is; the HTTP response.

    ``stream``: the response comes back once its headers are read, its body unread (the
    caller reads and closes it); otherwise it is read whole. The SDK still sends it (the
    client's key, headers, timeout and retries) and raises its own errors
    (``APIStatusError`` on a 4xx/5xx, ``APITimeoutError``, ``APIConnectionError``), so the
    mappings below apply unchanged.

    Not ``client.chat.completions.create``: that runs the SDK's typed transform over the
    request, a pure-Python walk of every message (~27 ms for the bundled 182-message
    session, holding the GIL while the UI thread waits to handle a keypress). The messages
    here are already wire-formatted dicts, so the body only needs ``json.dumps`` (C, ~1 ms).
    This is the SDK's documented way to send a request it does not type
    (``client.post(path, cast_to=Response, body=...)``).
    """
    if TYPE_CHECKING:  # checked against httpx2, the library of the openai SDK installed
        import httpx2 as _http
    else:
        try:  # the openai SDK's HTTP library: httpx2 from openai 3 on, httpx before
            import httpx2 as _http
        except ImportError:  # pragma: no cover - an older openai
            import httpx as _http

    return client.post("/chat/completions", cast_to=_http.Response, body=body, stream=stream)


class Failure(NamedTuple):
    """A failed call: its kind, one line naming the endpoint, and the fix when the answer says
    one (an HTTP 4xx: the key to check)."""

    kind: str
    message: str
    fix: str | None = None


def status_failure(endpoint: Endpoint, exc: openai.APIStatusError) -> Failure:
    """Kind and message for an HTTP error reply (status >= 400)."""
    status = exc.status_code
    overflow = status_overflow(exc)
    if overflow is not None:
        return Failure(CONTEXT_EXCEEDED, overflow_message(endpoint, overflow, f"HTTP {status}"))
    detail = error_text(exc.body)
    detail = f": {detail}" if detail else ""
    if status >= 500:
        return Failure(
            HTTP_5XX,
            f"{endpoint.what} {endpoint.base_url} failed with HTTP {status}{detail} "
            "(check the server's log)",
        )
    config = endpoint.config
    hint = {
        401: f"check the API key ({config}.api_key_env)",
        403: f"check the API key ({config}.api_key_env)",
        404: f"check {config}.model ({endpoint.model!r}) and {endpoint.base_url_key}",
        429: "rate limited or out of quota; try again later",
    }.get(status, f"check {config}.model and {endpoint.base_url_key}")
    return Failure(
        HTTP_4XX,
        f"{endpoint.what} {endpoint.base_url} rejected the request with HTTP {status}"
        f"{detail} ({hint})",
        fix=hint,
    )


def status_overflow(exc: openai.APIStatusError) -> Overflow | None:
    """The context overflow an error reply reports, if that is what it reports."""
    body = exc.body
    words = body.get("message") if isinstance(body, dict) else body
    text = words if isinstance(words, str) and words.strip() else f"{error_text(body)} {exc.message}"
    return recognise(text, body)


def overflow_message(endpoint: Endpoint, overflow: Overflow, how: str) -> str:
    """One line: the server's own words (with its figures), and what they mean."""
    return (
        f"{endpoint.what} {endpoint.base_url} refused the request ({how}): it does not fit the model's "
        f"context window. The server said: {one_line(overflow.text, MAX_OVERFLOW_TEXT)}"
    )


def connection_failure(endpoint: Endpoint, exc: openai.APIConnectionError) -> Failure:
    """Kind and message for a connection that failed before a complete reply."""
    where = f"{endpoint.what} {endpoint.base_url}"
    causes = cause_names(exc)
    if "incomplete body" in causes:
        # Headers arrived, then the socket closed mid-body: a reply, but cut off.
        return Failure(
            MALFORMED,
            f"{where} closed the connection in the middle of its reply: did the server "
            "crash? (check its log)",
        )
    if "ConnectionRefusedError" in causes:
        return Failure(REFUSED, f"{where} refused the connection: is the server running?")
    if "RemoteProtocolError" in causes or "ConnectionResetError" in causes or "ReadError" in causes:
        # The socket closed before a complete reply: the server crashed or was
        # stopped mid-request (or is not an HTTP server).
        return Failure(
            REFUSED,
            f"{where} closed the connection without a reply: did the server crash or "
            "restart? (check its log)",
        )
    reason = one_line(str(exc.__cause__ or exc))
    return Failure(
        REFUSED,
        f"could not connect to {where} ({reason}): is the server running and the "
        f"{endpoint.base_url_key} right?",
    )


def int_or_none(value: object) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def cause_names(exc: BaseException) -> set[str]:
    """Class names (with bases) along the __cause__/__context__ chain, plus the tag
    "incomplete body" when the HTTP layer (h11) says the body was cut off.

    Matching by name keeps this independent of the SDK's HTTP library (httpx, httpx2).
    """
    names: set[str] = set()
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        names.update(cls.__name__ for cls in type(current).__mro__)
        if "without sending complete message body" in str(current):
            names.add("incomplete body")
        for arg in current.args:  # httpx wraps the OSError in args, not as a cause
            if isinstance(arg, BaseException):
                names.update(cls.__name__ for cls in type(arg).__mro__)
        current = current.__cause__ or current.__context__
    return names


def one_line(text: str, limit: int = MAX_ERROR_TEXT) -> str:
    line = " ".join(text.split())
    return line if len(line) <= limit else line[: limit - 1] + "…"


def snippet(text: str) -> str:
    return repr(one_line(text, 40)) if text.strip() else "an empty body"


def error_text(body: object) -> str:
    """The short error text from an error reply's body (already unwrapped by the SDK
    from ``{"error": ...}``): OpenAI's ``{"message": ...}``, a bare string, or JSON."""
    if isinstance(body, dict):
        for key in ("message", "error", "detail"):
            value = body.get(key)
            if isinstance(value, str) and value.strip():
                return one_line(value)
        return one_line(json.dumps(body))
    if isinstance(body, str):
        return one_line(body)
    return ""
