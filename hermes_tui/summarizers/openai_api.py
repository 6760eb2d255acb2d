"""The OpenAI-compatible summarizer backend.

Any server that speaks ``POST /v1/chat/completions`` can perform compaction passes:
llama.cpp's server, Ollama, LM Studio, vLLM, ``mlx_lm.server`` or a hosted API. This is
where passes go when MLX has no GPU (Linux, Intel Macs, CI).

Every failure becomes a ``SummarizerError`` whose kind says what happened and whose
message is one line that names the endpoint and says what to do, because it ends up in
the status bar and the log of someone who did not write this code.

The reply is read as plain JSON and checked by hand rather than trusted to the SDK's
models: the SDK hands back a bare string for a non-JSON body, and leniently builds a
``ChatCompletion`` from any JSON object, so a proxy's error page or a wrong URL would
otherwise surface as an ``AttributeError`` deep inside compaction.
"""

from __future__ import annotations

import json
import os
import time
from typing import Any

import openai

from .base import (
    HTTP_4XX,
    HTTP_5XX,
    MALFORMED,
    REFUSED,
    TIMEOUT,
    Completion,
    SummarizerError,
)

# Local servers do not check the key, but the SDK refuses to start without one.
PLACEHOLDER_API_KEY = "not-needed"

# The config key a user edits when passes time out (named in the TIMEOUT message).
TIMEOUT_CONFIG_KEY = "auxiliary.compression.timeout"

# How much of a server's error text goes into a one-line message.
_MAX_ERROR_TEXT = 160


def resolve_api_key(env_var: str) -> str | None:
    """The API key from environment variable ``env_var``; None when unset or blank."""
    if not env_var:
        return None
    value = os.environ.get(env_var, "").strip()
    return value or None


class OpenAISummarizer:
    """Summarizer backed by an OpenAI-compatible chat completions endpoint.

    ``timeout`` (seconds) bounds connecting and each wait for data. A non-streaming
    server sends nothing until the whole answer is ready, so in practice it bounds
    the whole call. The SDK's automatic retries are off: a retry would double the
    time a user waits before seeing the failure, and compaction retries on the next
    turn anyway.
    """

    def __init__(
        self,
        base_url: str,
        model: str,
        api_key: str | None = None,
        timeout: float = 120.0,
    ) -> None:
        self.base_url = base_url.rstrip("/")
        self.model = model
        self.model_name = model
        self.timeout = float(timeout)
        self._client = openai.OpenAI(
            base_url=self.base_url,
            api_key=api_key or PLACEHOLDER_API_KEY,
            timeout=self.timeout,
            max_retries=0,
        )

    def __repr__(self) -> str:
        return f"OpenAISummarizer(base_url={self.base_url!r}, model={self.model!r})"

    def complete(self, messages: list[dict[str, Any]], *, max_tokens: int) -> Completion:
        """One non-streaming chat completion at temperature 0."""
        started = time.perf_counter()
        try:
            raw = self._client.chat.completions.with_raw_response.create(
                model=self.model,
                messages=messages,
                max_tokens=max_tokens,
                temperature=0,
                stream=False,
            )
            body_text = raw.http_response.text
        except openai.APIStatusError as exc:
            raise self._status_error(exc) from exc
        except openai.APITimeoutError as exc:
            raise SummarizerError(
                TIMEOUT,
                f"compression endpoint {self.base_url} did not answer within "
                f"{self.timeout:g} s: raise {TIMEOUT_CONFIG_KEY} or use a smaller model",
            ) from exc
        except openai.APIConnectionError as exc:
            raise self._connection_error(exc) from exc
        except openai.OpenAIError as exc:  # anything else the SDK raises
            raise SummarizerError(
                MALFORMED,
                f"compression endpoint {self.base_url} failed: {_one_line(str(exc))}",
            ) from exc
        duration = time.perf_counter() - started
        return self._parse(body_text, duration)

    # -- errors -------------------------------------------------------------------

    def _status_error(self, exc: openai.APIStatusError) -> SummarizerError:
        status = exc.status_code
        detail = _error_text(exc.body)
        detail = f": {detail}" if detail else ""
        if status >= 500:
            return SummarizerError(
                HTTP_5XX,
                f"compression endpoint {self.base_url} failed with HTTP {status}{detail} "
                "(check the server's log)",
            )
        hint = {
            401: "check the API key (auxiliary.compression.api_key_env)",
            403: "check the API key (auxiliary.compression.api_key_env)",
            404: f"check auxiliary.compression.model ({self.model!r}) and base_url",
            429: "rate limited or out of quota; try again later",
        }.get(status, "check auxiliary.compression.model and base_url")
        return SummarizerError(
            HTTP_4XX,
            f"compression endpoint {self.base_url} rejected the request with HTTP {status}"
            f"{detail} ({hint})",
        )

    def _connection_error(self, exc: openai.APIConnectionError) -> SummarizerError:
        causes = _cause_names(exc)
        if "incomplete body" in causes:
            # Headers arrived, then the socket closed mid-body: a reply, but cut off.
            return SummarizerError(
                MALFORMED,
                f"compression endpoint {self.base_url} closed the connection in the middle "
                "of its reply: did the server crash? (check its log)",
            )
        if "ConnectionRefusedError" in causes:
            return SummarizerError(
                REFUSED,
                f"compression endpoint {self.base_url} refused the connection: "
                "is the server running?",
            )
        if "RemoteProtocolError" in causes or "ConnectionResetError" in causes or "ReadError" in causes:
            # The socket closed before a complete reply: the server crashed or was
            # stopped mid-request (or is not an HTTP server).
            return SummarizerError(
                REFUSED,
                f"compression endpoint {self.base_url} closed the connection without a "
                "reply: did the server crash or restart? (check its log)",
            )
        reason = _one_line(str(exc.__cause__ or exc))
        return SummarizerError(
            REFUSED,
            f"could not connect to compression endpoint {self.base_url} ({reason}): "
            "is the server running and the base_url right?",
        )

    # -- the reply ----------------------------------------------------------------

    def _malformed(self, what: str) -> SummarizerError:
        return SummarizerError(
            MALFORMED,
            f"compression endpoint {self.base_url} sent {what}, not a chat completion: "
            "is base_url an OpenAI-compatible /v1 endpoint?",
        )

    def _parse(self, body_text: str, duration: float) -> Completion:
        try:
            body = json.loads(body_text)
        except ValueError:
            raise self._malformed(f"a body that is not JSON ({_snippet(body_text)})")
        if not isinstance(body, dict):
            raise self._malformed(f"a JSON {type(body).__name__}")
        choices = body.get("choices")
        if not isinstance(choices, list) or not choices or not isinstance(choices[0], dict):
            raise self._malformed("a reply with no choices")
        choice = choices[0]
        message = choice.get("message")
        content = message.get("content") if isinstance(message, dict) else None
        if content is None:
            # Some servers answer chat requests in the legacy completions shape.
            content = choice.get("text")
        if not isinstance(content, str):
            finish = choice.get("finish_reason")
            raise self._malformed(f"a choice with no text (finish_reason={finish!r})")

        usage = body.get("usage") if isinstance(body.get("usage"), dict) else {}
        details = usage.get("prompt_tokens_details")
        cached = details.get("cached_tokens") if isinstance(details, dict) else None
        finish_reason = choice.get("finish_reason")
        return Completion(
            text=content,
            finish_reason=finish_reason if isinstance(finish_reason, str) else None,
            prompt_tokens=_int_or_none(usage.get("prompt_tokens")),
            completion_tokens=_int_or_none(usage.get("completion_tokens")),
            duration_s=duration,
            cached_tokens=_int_or_none(cached),
        )


def _int_or_none(value: object) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _cause_names(exc: BaseException) -> set[str]:
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


def _one_line(text: str, limit: int = _MAX_ERROR_TEXT) -> str:
    line = " ".join(text.split())
    return line if len(line) <= limit else line[: limit - 1] + "…"


def _snippet(text: str) -> str:
    return repr(_one_line(text, 40)) if text.strip() else "an empty body"


def _error_text(body: object) -> str:
    """The short error text from an error reply's body (already unwrapped by the SDK
    from ``{"error": ...}``): OpenAI's ``{"message": ...}``, a bare string, or JSON."""
    if isinstance(body, dict):
        for key in ("message", "error", "detail"):
            value = body.get(key)
            if isinstance(value, str) and value.strip():
                return _one_line(value)
        return _one_line(json.dumps(body))
    if isinstance(body, str):
        return _one_line(body)
    return ""
