"""The conversation model behind any OpenAI-compatible endpoint.

Streams ``POST {base_url}/chat/completions`` (llama.cpp's server, Ollama, LM Studio,
vLLM, ``mlx_lm.server``, a hosted API) with ``stream_options.include_usage`` so the
server reports token counts in a last chunk. The openai SDK sends the request and
maps HTTP errors (``errors.post_chat_completions``, the summarizer's request too:
the messages go out as the wire-format dicts they already are, without the SDK's
per-message transform); the event stream is read by ``stream.StreamReader`` and
its tool-call pieces assembled by ``tool_calls``.

Failures (``ChatError.kind``):

* ``REFUSED``: nothing listening, or the connection closed before any reply;
* ``TIMEOUT``: no data for ``timeout`` seconds, before the reply or mid-stream. It is
  an idle limit, not a limit on a reply's length: a reply that keeps coming is read to
  its end, however slowly, and the user stops it with ``cancel``;
* ``HTTP_4XX`` / ``HTTP_5XX``: an error status, with the server's short message; an
  error object sent inside the stream counts as ``HTTP_5XX``;
* ``CONTEXT_EXCEEDED``: the server says the request does not fit the model's window
  (``providers.openai.overflow`` knows the wordings); the message carries the server's
  own words with its figures, and ``ChatError.overflow`` the figures themselves;
* ``MALFORMED``: a body that is not an event stream, a chunk that is not JSON or not
  a chat completion chunk, and a stream cut off mid-reply (see ``stream``);
* ``NO_TOOLS``: an error status that says the request's tools cannot be used (see
  Tools below); the same call again is sent without them.
* ``CANCELLED``: ``cancel`` was set. It is seen within ``call_limits.CANCEL_POLL_S``
  even while the server sends nothing (before the headers or mid-stream), and the
  connection is closed.

Tools: ``tools`` goes into the request only when it is non-empty. A reply with calls
that the server ended with "stop" ends with "tool_calls" (servers differ; the caller
acts on the calls). An endpoint that rejects a request with tools and says why in words
mentioning tools (``llama-server`` without ``--jinja``, a model whose template has none)
is ``NO_TOOLS``, and the client's ``supports_tools`` turns False, so the same call
repeated runs without tools. A call in the history whose arguments are not JSON (the
model's malformed call, kept as it came) goes out with its text as a JSON string:
``mlx_lm.server`` parses every call's arguments and rejects the whole request otherwise
(HTTP 404), so the model could never be told to correct it.

``prompt_tps``, ``generation_tps`` and ``peak_memory_gb`` are MLX-only and stay None here.
Messages are one line, name the endpoint and say what to do. The chat model is
configured with ``model.base_url``, ``model.model`` and ``model.api_key_env``; there
is no config key for the timeout, so messages state it in seconds.
"""

from __future__ import annotations

import json
import logging
import threading
import time
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # imported by the first call (providers.openai.call_limits.SdkClient): it is slow to import
    import httpx2
    import openai

from hermes_tui.chat.call_schema import response_format
from hermes_tui.chat.client import (
    DEFAULT_MAX_TOKENS,
    HTTP_4XX,
    HTTP_5XX,
    MALFORMED,
    NO_TOOLS,
    TIMEOUT,
    ChatClient,
    ChatDelta,
    ChatDone,
    ChatError,
    ChatToolDelta,
)
from hermes_tui.providers.openai.call_limits import CANCELLED as LIMITS_CANCELLED
from hermes_tui.providers.openai.call_limits import CallLimits, SdkClient
from hermes_tui.providers.openai.errors import (
    Endpoint,
    connection_failure,
    error_text,
    one_line,
    post_chat_completions,
    status_failure,
    status_overflow,
)
from hermes_tui.providers.openai.stream import StreamReader
from hermes_tui.util.untrusted import InputError, load_json

log = logging.getLogger(__name__)

# Local servers do not check the key, but the SDK refuses to start without one.
PLACEHOLDER_API_KEY = "not-needed"


class OpenAIChatClient(ChatClient):
    """Chat client for an OpenAI-compatible ``/v1`` endpoint.

    ``timeout`` (seconds) bounds connecting and each wait for data (the longest
    silence, not the whole reply; ``cancel`` stops a reply at any moment). The SDK's
    automatic retries are off: a retry would double the wait before the user sees
    the failure (and could run a long generation twice). ``temperature`` None leaves
    sampling to the server's default. ``max_tokens`` (``model.max_tokens``) caps a reply
    when a call names no cap.
    """

    supports_tools: bool  # turns False when the endpoint refuses a request with tools

    def __init__(
        self,
        base_url: str,
        model: str,
        api_key: str | None = None,
        timeout: float = 120.0,
        temperature: float | None = None,
        max_tokens: int = DEFAULT_MAX_TOKENS,
    ) -> None:
        # Assumed until the endpoint refuses a request with tools (NO_TOOLS).
        self.supports_tools = True
        # Assumed until the endpoint refuses a request whose reply must be a call (see stream).
        self.supports_call_schema = True
        self.base_url = base_url.rstrip("/")
        self.model = model
        self.model_name = model
        self.timeout = float(timeout)
        self.temperature = temperature
        self.max_tokens = max_tokens
        self._sdk = SdkClient(self.base_url, api_key or PLACEHOLDER_API_KEY, self.timeout)
        self._endpoint = Endpoint(
            what="model endpoint",
            base_url=self.base_url,
            model=model,
            config="model",
            base_url_key="model.base_url",
        )
        self._reader = StreamReader(self._endpoint, self.timeout)

    def __repr__(self) -> str:
        return f"OpenAIChatClient(base_url={self.base_url!r}, model={self.model!r})"

    warm_kind = "server"

    def warm(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None = None) -> None:
        """A one-token request for ``messages`` on a thread of its own: a server with prefix
        caching (llama.cpp, vLLM, mlx_lm.server) reads the new context now, while the chat
        is idle, instead of at the next request. Its reply and any failure are dropped."""

        def run() -> None:
            try:
                for _ in self.stream(messages, max_tokens=1, tools=tools):
                    pass
            except Exception as exc:  # noqa: BLE001 - a cache that stays cold costs only time
                log.info("warming the chat cache of %s failed: %s", self.model, exc)

        threading.Thread(target=run, name="chat cache warm", daemon=True).start()

    # -- the call -----------------------------------------------------------------

    def stream(
        self,
        messages: list[dict[str, Any]],
        *,
        max_tokens: int | None = None,
        stop: list[str] | None = None,
        cancel: threading.Event | None = None,
        tools: list[dict[str, Any]] | None = None,
        must_call: list[dict[str, Any]] | None = None,
    ) -> Iterator[ChatDelta | ChatToolDelta | ChatDone]:
        """Yield ``ChatDelta`` per piece of text and ``ChatToolDelta`` per piece of a
        tool call, then one ``ChatDone``.

        ``must_call``: the reply is held to ``chat.call_schema`` of them by ``response_format``
        (the call comes back as JSON text). An endpoint that refuses the request with it,
        for another reason than its size or its tools, gets the same request once more
        without it, and when that is answered it is not asked again.

        A generator: the request is sent on the first ``next()``; closing it early
        closes the connection (the server notices and stops generating).
        """
        params: dict[str, Any] = {
            "model": self.model,
            "messages": _json_arguments(messages),
            "max_tokens": max_tokens if max_tokens is not None else self.max_tokens,
            "stream": True,
            "stream_options": {"include_usage": True},
        }
        if self.temperature is not None:
            params["temperature"] = self.temperature
        if stop:
            params["stop"] = list(stop)
        if tools and self.supports_tools:
            params["tools"] = list(tools)
            if must_call and self.supports_call_schema:
                params["response_format"] = response_format(must_call)

        if cancel is not None and cancel.is_set():
            raise self._reader.cancelled(0)
        started = time.perf_counter()
        # The cancel is seen inside every wait for data, so a stop needs no next byte.
        limits = CallLimits(cancel=cancel)
        try:
            response = self._send(params, limits)
        except ChatError as exc:
            if "response_format" not in params or exc.kind not in (HTTP_4XX, HTTP_5XX) or exc.overflow is not None:
                raise
            del params["response_format"]
            response = self._send(params, limits)  # its failure is the request's own, raised
            # Only now is the schema known to be what the endpoint refused.
            log.info("model endpoint %s refused a reply held to a call (%s): not asked again", self.base_url, exc)
            self.supports_call_schema = False
        try:
            yield from self._reader.read(response, started, limits)
        finally:
            response.close()

    def _send(self, params: dict[str, Any], limits: CallLimits) -> httpx2.Response:
        """Send the request; return the HTTP response (headers read, body unread)."""
        client = self._sdk.get()  # the SDK is imported by then: the except clause names it
        import openai

        try:
            with limits.applied():
                return post_chat_completions(client, params, stream=True)
        except openai.OpenAIError as exc:
            if limits.stopped == LIMITS_CANCELLED:
                raise self._reader.cancelled(0) from exc
            raise self._send_failure(exc, with_tools="tools" in params) from exc

    def _send_failure(self, exc: openai.OpenAIError, *, with_tools: bool = False) -> ChatError:
        import openai

        if isinstance(exc, openai.APIStatusError):
            failure = status_failure(self._endpoint, exc)
            overflow = status_overflow(exc)
            if overflow is not None:
                return ChatError(failure.kind, failure.message, overflow, endpoint=self.base_url)
            if with_tools and _refuses_tools(exc):
                self.supports_tools = False
                return ChatError(
                    NO_TOOLS,
                    f"model endpoint {self.base_url} does not accept tools for model {self.model!r}"
                    f" (HTTP {exc.status_code}: {error_text(exc.body) or 'no details'}): the chat "
                    "goes on without tools",
                    endpoint=self.base_url,
                )
            return ChatError(failure.kind, failure.message, endpoint=self.base_url, fix=failure.fix)
        if isinstance(exc, openai.APITimeoutError):
            return ChatError(
                TIMEOUT,
                f"model endpoint {self.base_url} did not answer within {self.timeout:g} s: "
                "is the server overloaded or stuck? (check its log)",
                endpoint=self.base_url,
            )
        if isinstance(exc, openai.APIConnectionError):
            failure = connection_failure(self._endpoint, exc)
            return ChatError(failure.kind, failure.message, endpoint=self.base_url)
        # anything else the SDK raises
        return ChatError(MALFORMED, f"model endpoint {self.base_url} failed: {one_line(str(exc))}", endpoint=self.base_url)

def _json_arguments(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """``messages`` with every call's arguments JSON text (see the module docstring).

    The list itself when nothing needs it (the common case: no copy)."""
    out: list[dict[str, Any]] | None = None
    for position, message in enumerate(messages):
        calls = message.get("tool_calls") if message.get("role") == "assistant" else None
        if not calls or all(_is_json(c) for c in calls):
            continue
        if out is None:
            out = list(messages)
        fixed = []
        for call in calls:
            if not _is_json(call):
                function = call["function"]
                call = {**call, "function": {**function, "arguments": json.dumps(function["arguments"], ensure_ascii=False)}}
            fixed.append(call)
        out[position] = {**message, "tool_calls": fixed}
    return messages if out is None else out


def _is_json(call: Any) -> bool:
    """A call whose arguments a server can parse (or one this cannot repair)."""
    function = call.get("function") if isinstance(call, dict) else None
    arguments = function.get("arguments") if isinstance(function, dict) else None
    if not isinstance(arguments, str) or not arguments:
        return True
    try:
        load_json(arguments, model_output=True)
    except InputError:  # not JSON, too deep, a number too long
        return False
    return True


def _refuses_tools(exc: openai.APIStatusError) -> bool:
    """An error reply that says the request's tools are the trouble (not the key or quota)."""
    if exc.status_code in (401, 403, 429) or not (400 <= exc.status_code < 500 or exc.status_code == 500):
        return False
    words = f"{error_text(exc.body)} {exc.message}".lower()
    # "does not support tools", "tools param requires --jinja", "tool choice requires
    # --enable-auto-tool-choice": tools named together with why they cannot be used. A
    # complaint about one tool message in the history names tools without such a word.
    return ("tool" in words or "function call" in words) and any(
        word in words for word in ("support", "requir", "enable", "allow", "accept"))


def list_models(base_url: str, *, api_key: str | None = None, timeout: float = 5.0) -> list[str]:
    """The model ids ``GET {base_url}/models`` lists, sorted (for ``/model``'s picker).

    Raises ``ChatError`` with the same kinds and one-line messages as a reply.
    """
    import openai

    base_url = base_url.rstrip("/")
    endpoint = Endpoint(what="model endpoint", base_url=base_url, model="", config="model",
                        base_url_key="model.base_url")
    client = openai.OpenAI(base_url=base_url, api_key=api_key or PLACEHOLDER_API_KEY, timeout=timeout, max_retries=0)
    try:
        page = client.models.list()
        return sorted({str(item.id) for item in page.data if getattr(item, "id", None)})
    except openai.APIStatusError as exc:
        failure = status_failure(endpoint, exc)
        raise ChatError(failure.kind, failure.message, endpoint=base_url, fix=failure.fix) from exc
    except openai.APITimeoutError as exc:
        raise ChatError(
            TIMEOUT, f"model endpoint {base_url} did not list its models within {timeout:g} s", endpoint=base_url
        ) from exc
    except openai.APIConnectionError as exc:
        failure = connection_failure(endpoint, exc)
        raise ChatError(failure.kind, failure.message, endpoint=base_url) from exc
    except (openai.OpenAIError, AttributeError, TypeError, ValueError) as exc:  # not an OpenAI model list
        raise ChatError(
            MALFORMED, f"model endpoint {base_url} did not answer /models with a model list: {one_line(str(exc))}",
            endpoint=base_url,
        ) from exc
    finally:
        client.close()
