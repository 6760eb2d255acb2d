"""The conversation model behind any OpenAI-compatible endpoint.

Streams ``POST {base_url}/chat/completions`` (llama.cpp's server, Ollama, LM Studio,
vLLM, ``mlx_lm.server``, a hosted API) with ``stream_options.include_usage`` so the
server reports token counts in a last chunk. The openai SDK sends the request and
maps HTTP errors (``openai_errors.post_chat_completions``, the summarizer's request too:
the messages go out as the wire-format dicts they already are, without the SDK's
per-message transform); the event stream itself is read line by line and each chunk is
checked by hand, because:

* the SDK's ``Stream`` silently stops at the end of the body, so a server that dies
  mid-reply (``mlx_lm.server`` speaks HTTP/1.0: its stream simply ends) would look
  like a finished reply. Here a stream that ends before ``data: [DONE]`` and before
  any ``finish_reason`` is an error;
* keep-alive comments (``mlx_lm.server`` sends ``: keepalive N/M`` during long prompt
  processing) are skipped, not taken for text;
* the SDK builds chunk objects leniently from any JSON, so a wrong URL or a proxy's
  page would surface as an ``AttributeError`` rather than a clear message.

Failures (``ChatError.kind``):

* ``REFUSED``: nothing listening, or the connection closed before any reply;
* ``TIMEOUT``: no data for ``timeout`` seconds, before the reply or mid-stream. It is
  an idle limit, not a limit on a reply's length: a reply that keeps coming is read to
  its end, however slowly, and the user stops it with ``cancel``;
* ``HTTP_4XX`` / ``HTTP_5XX``: an error status, with the server's short message; an
  error object sent inside the stream counts as ``HTTP_5XX``;
* ``MALFORMED``: a body that is not an event stream, a chunk that is not JSON or not
  a chat completion chunk, and a stream **cut off mid-reply** (connection dropped or
  body ended after N characters without ``finish_reason``/``[DONE]``). Cut-off is
  MALFORMED, not REFUSED, for the same reason as in the summarizer: the server did
  answer, the answer is incomplete. The message says how many characters arrived.
* ``NO_TOOLS``: an error status that says the request's tools cannot be used (see
  Tools below); the same call again is sent without them.
* ``CANCELLED``: ``cancel`` was set. It is seen within ``openai_http.CANCEL_POLL_S``
  even while the server sends nothing (before the headers or mid-stream), and the
  connection is closed.

Tools: ``tools`` goes into the request only when it is non-empty. Streamed
``delta.tool_calls`` pieces are assembled by their ``index`` (a server that sends none
continues the last call unless a piece brings a new ``id``): the id and name come with
a call's first piece, the arguments in pieces, each yielded as a ``ChatToolDelta``. The
``ChatDone`` holds the assembled calls as they came (arguments never checked here), a
call without an id gets a generated one, and a reply with calls that the server ended
with "stop" ends with "tool_calls" (servers differ; the caller acts on the calls). An
endpoint that rejects a request with tools and says why in words mentioning tools
(``llama-server`` without ``--jinja``, a model whose template has none) is ``NO_TOOLS``,
and the client's ``supports_tools`` turns False, so the same call repeated runs without
tools. A call in the history whose arguments are not JSON (the model's malformed call,
kept as it came) goes out with its text as a JSON string: ``mlx_lm.server`` parses
every call's arguments and rejects the whole request otherwise (HTTP 404), so the
model could never be told to correct it.

Usage comes from the server's last usage chunk (``prompt_tokens``, ``completion_tokens``,
``prompt_tokens_details.cached_tokens``); a server that sends none leaves those fields
None. ``prompt_tps``, ``generation_tps`` and ``peak_memory_gb`` are MLX-only and stay
None here; ``duration_s`` and ``time_to_first_token_s`` are measured by the client.

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
from dataclasses import dataclass, field
from typing import Any

import openai

from ..providers.openai_errors import (
    Endpoint,
    cause_names,
    connection_failure,
    error_text,
    int_or_none,
    one_line,
    post_chat_completions,
    snippet,
    status_failure,
)
from ..providers.openai_http import CANCELLED as LIMITS_CANCELLED
from ..providers.openai_http import CallLimits, http_client
from ..untrusted import NOT_JSON, InputError, is_high_surrogate, load_json, model_text
from .client import (
    CANCELLED,
    DEFAULT_MAX_TOKENS,
    HTTP_5XX,
    MALFORMED,
    NO_TOOLS,
    TIMEOUT,
    ChatClient,
    ChatDelta,
    ChatDone,
    ChatError,
    ChatToolDelta,
    Usage,
    tool_call,
)

# Local servers do not check the key, but the SDK refuses to start without one.
PLACEHOLDER_API_KEY = "not-needed"

# How much of a body that is not an event stream is read to describe it.
_MAX_BODY_SAMPLE = 4096


log = logging.getLogger(__name__)


@dataclass
class _Chunk:
    """What one stream chunk carried."""

    text: str = ""
    finish_reason: str | None = None
    usage: dict[str, Any] | None = None
    tool_calls: list[dict[str, Any]] = field(default_factory=list)  # the delta's pieces


_DONE = object()  # the ``data: [DONE]`` sentinel


@dataclass
class _PartialCall:
    id: str | None
    name: str
    arguments: list[str]


class _ToolCallAssembler:
    """Streamed ``tool_calls`` pieces → complete calls, in the order they began."""

    def __init__(self) -> None:
        self.calls: list[_PartialCall] = []
        self._by_index: dict[int, int] = {}  # the server's index → position in ``calls``

    def add(self, piece: dict[str, Any]) -> ChatToolDelta:
        call_id = piece.get("id") if isinstance(piece.get("id"), str) and piece.get("id") else None
        function = piece.get("function") if isinstance(piece.get("function"), dict) else {}
        name = function.get("name") if isinstance(function.get("name"), str) else None
        arguments = function.get("arguments")
        if arguments is None:
            arguments = ""
        elif not isinstance(arguments, str):  # some servers send the object itself
            arguments = json.dumps(arguments, ensure_ascii=False)
        position = self._position(piece.get("index"), call_id)
        call = self.calls[position]
        if call_id and call.id is None:
            call.id = call_id
        if name and name != call.name:
            # The name comes whole in the first piece; a server that repeats it is not
            # taken to extend it, one that splits it is.
            call.name += name
        call.arguments.append(arguments)
        return ChatToolDelta(index=position, id=call_id, name=name, arguments=arguments)

    def _position(self, index: Any, call_id: str | None) -> int:
        if isinstance(index, int) and not isinstance(index, bool):
            if index not in self._by_index:
                self._by_index[index] = len(self.calls)
                self.calls.append(_PartialCall(None, "", []))
            return self._by_index[index]
        # No index: a new id starts a call, anything else continues the last one.
        if call_id is not None:
            for position, call in enumerate(self.calls):
                if call.id == call_id:
                    return position
        if not self.calls or (call_id is not None and self.calls[-1].id is not None):
            self.calls.append(_PartialCall(None, "", []))
        return len(self.calls) - 1

    def result(self) -> list[dict[str, Any]] | None:
        if not self.calls:
            return None
        # "" for a call without arguments would be sent back as it is; "{}" is what it means.
        # model_text: a surrogate pair split between pieces is joined, a lone half replaced.
        return [tool_call(c.id, model_text([c.name]), model_text(c.arguments) or "{}") for c in self.calls]


class OpenAIChatClient(ChatClient):
    """Chat client for an OpenAI-compatible ``/v1`` endpoint.

    ``timeout`` (seconds) bounds connecting and each wait for data (the longest
    silence, not the whole reply; ``cancel`` stops a reply at any moment). The SDK's
    automatic retries are off: a retry would double the wait before the user sees
    the failure (and could run a long generation twice). ``temperature`` None leaves
    sampling to the server's default. ``max_tokens`` (``model.max_tokens``) caps a reply
    when a call names no cap.
    """

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
        self.base_url = base_url.rstrip("/")
        self.model = model
        self.model_name = model
        self.timeout = float(timeout)
        self.temperature = temperature
        self.max_tokens = max_tokens
        self._client = openai.OpenAI(
            base_url=self.base_url,
            api_key=api_key or PLACEHOLDER_API_KEY,
            timeout=self.timeout,
            max_retries=0,
            http_client=http_client(),
        )
        self._endpoint = Endpoint(
            what="model endpoint",
            base_url=self.base_url,
            model=model,
            config="model",
            base_url_key="model.base_url",
        )

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
    ) -> Iterator[ChatDelta | ChatToolDelta | ChatDone]:
        """Yield ``ChatDelta`` per piece of text and ``ChatToolDelta`` per piece of a
        tool call, then one ``ChatDone``.

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

        if cancel is not None and cancel.is_set():
            raise self._cancelled(0)
        started = time.perf_counter()
        # The cancel is seen inside every wait for data, so a stop needs no next byte.
        limits = CallLimits(cancel=cancel)
        response = self._send(params, limits)
        try:
            yield from self._read(response, started, limits)
        finally:
            response.close()

    def _send(self, params: dict[str, Any], limits: CallLimits):
        """Send the request; return the HTTP response (headers read, body unread)."""
        try:
            with limits.applied():
                return post_chat_completions(self._client, params, stream=True)
        except openai.OpenAIError as exc:
            if limits.stopped == LIMITS_CANCELLED:
                raise self._cancelled(0) from exc
            raise self._send_failure(exc, with_tools="tools" in params) from exc

    def _send_failure(self, exc: openai.OpenAIError, *, with_tools: bool = False) -> ChatError:
        if isinstance(exc, openai.APIStatusError):
            kind, message = status_failure(self._endpoint, exc)
            if with_tools and _refuses_tools(exc):
                self.supports_tools = False
                return ChatError(
                    NO_TOOLS,
                    f"model endpoint {self.base_url} does not accept tools for model {self.model!r}"
                    f" (HTTP {exc.status_code}: {error_text(exc.body) or 'no details'}): the chat "
                    "goes on without tools",
                )
            return ChatError(kind, message)
        if isinstance(exc, openai.APITimeoutError):
            return ChatError(
                TIMEOUT,
                f"model endpoint {self.base_url} did not answer within {self.timeout:g} s: "
                "is the server overloaded or stuck? (check its log)",
            )
        if isinstance(exc, openai.APIConnectionError):
            return ChatError(*connection_failure(self._endpoint, exc))
        # anything else the SDK raises
        return ChatError(MALFORMED, f"model endpoint {self.base_url} failed: {one_line(str(exc))}")

    def _read(
        self, http: Any, started: float, limits: CallLimits
    ) -> Iterator[ChatDelta | ChatToolDelta | ChatDone]:
        """Read the event stream of ``http`` (an httpx response whose body is unread).

        ``limits`` apply around each read, never across a ``yield``: the consumer runs
        its own code between deltas."""
        cancel = limits.cancel
        content_type = http.headers.get("content-type", "")
        if "json" in content_type.lower() or "html" in content_type.lower():
            with limits.applied():
                sample = _sample(http)
            if limits.stopped == LIMITS_CANCELLED:
                raise self._cancelled(0)
            raise self._not_a_stream(content_type, sample)

        lines = http.iter_lines()
        parts: list[str] = []
        chars = 0
        finish_reason: str | None = None
        usage: dict[str, Any] | None = None
        first_text_at: float | None = None
        calls = _ToolCallAssembler()
        data: list[str] = []  # the data lines of the event being read
        events = 0
        done = False
        stray: str | None = None  # the first line that is not SSE, to describe the body
        held = ""  # a chunk's last character, when it is half a surrogate pair the next chunk may end

        while not done:
            if cancel is not None and cancel.is_set():
                raise self._cancelled(chars)
            try:
                with limits.applied():
                    line: str | None = next(lines)
            except StopIteration:
                line = None
            except Exception as exc:  # whatever the HTTP layer raises while reading
                if cancel is not None and cancel.is_set():
                    raise self._cancelled(chars) from exc
                raise self._read_failure(exc, chars) from exc

            if line is not None and line != "":
                if line.startswith(":"):  # a comment: keep-alive
                    continue
                field, _, value = line.partition(":")
                if field == "data":
                    data.append(value[1:] if value.startswith(" ") else value)
                elif field not in ("event", "id", "retry") and stray is None:
                    stray = line
                continue

            # A blank line (or the end of the body) ends the event being read.
            if data:
                events += 1
                chunk = self._parse_chunk("\n".join(data))
                data = []
                if chunk is _DONE:
                    done = True
                else:
                    assert isinstance(chunk, _Chunk)
                    if chunk.usage is not None:
                        usage = chunk.usage
                    if chunk.finish_reason is not None:
                        finish_reason = chunk.finish_reason
                    text = held + chunk.text
                    held = text[-1] if text and is_high_surrogate(text[-1]) else ""
                    text = model_text([text[:len(text) - len(held)]])
                    if text:
                        if first_text_at is None:
                            first_text_at = time.perf_counter()
                        parts.append(text)
                        chars += len(text)
                        yield ChatDelta(text)
                    for piece in chunk.tool_calls:
                        if first_text_at is None:
                            first_text_at = time.perf_counter()
                        tool_delta = calls.add(piece)
                        chars += len(tool_delta.arguments)
                        yield tool_delta
            if line is None:
                break

        if not done and finish_reason is None:
            if events == 0 and stray is not None:
                raise self._not_a_stream(content_type, stray)
            raise self._cut_off(chars, "ended the stream")

        if held:  # its pair never came
            parts.append(model_text([held]))
            yield ChatDelta(parts[-1])

        tool_calls = calls.result()
        if tool_calls and finish_reason == "stop":
            finish_reason = "tool_calls"
        usage = usage or {}
        details = usage.get("prompt_tokens_details")
        cached = details.get("cached_tokens") if isinstance(details, dict) else None
        yield ChatDone(
            text="".join(parts),
            tool_calls=tool_calls,
            usage=Usage(
                prompt_tokens=int_or_none(usage.get("prompt_tokens")),
                completion_tokens=int_or_none(usage.get("completion_tokens")),
                cached_tokens=int_or_none(cached),
                finish_reason=finish_reason,
                duration_s=time.perf_counter() - started,
                time_to_first_token_s=None if first_text_at is None else first_text_at - started,
            ),
        )

    # -- chunks -------------------------------------------------------------------

    def _parse_chunk(self, data: str) -> _Chunk | object:
        if data.strip() == "[DONE]":
            return _DONE
        try:
            body = load_json(data, model_output=True)
        except InputError as exc:
            if exc.kind == NOT_JSON:
                raise self._malformed(f"a stream chunk that is not JSON ({snippet(data)})") from None
            raise self._malformed(f"a stream chunk that cannot be read ({exc})") from None
        if not isinstance(body, dict):
            raise self._malformed(f"a stream chunk that is a JSON {type(body).__name__}")
        if body.get("error"):
            detail = error_text(body["error"]) or "no details"
            raise ChatError(
                HTTP_5XX,
                f"model endpoint {self.base_url} reported an error mid-stream: {detail} "
                "(check the server's log)",
            )
        choices = body.get("choices")
        usage = body.get("usage")
        if not isinstance(choices, list) and not isinstance(usage, dict):
            raise self._malformed("a stream chunk with no choices")
        chunk = _Chunk(usage=usage if isinstance(usage, dict) else None)
        if isinstance(choices, list) and choices:
            choice = choices[0]
            if not isinstance(choice, dict):
                raise self._malformed("a stream chunk whose choice is not an object")
            delta = choice.get("delta")
            content = delta.get("content") if isinstance(delta, dict) else None
            if content is None:
                # Some servers stream in the legacy completions shape.
                content = choice.get("text")
            if content is not None and not isinstance(content, str):
                raise self._malformed(f"a stream chunk whose content is a {type(content).__name__}")
            chunk.text = content or ""
            pieces = delta.get("tool_calls") if isinstance(delta, dict) else None
            if pieces is not None:
                if not isinstance(pieces, list) or not all(isinstance(p, dict) for p in pieces):
                    raise self._malformed("a stream chunk whose tool_calls is not a list of objects")
                chunk.tool_calls = pieces
            reason = choice.get("finish_reason")
            chunk.finish_reason = reason if isinstance(reason, str) else None
        return chunk

    # -- errors -------------------------------------------------------------------

    def _malformed(self, what: str) -> ChatError:
        return ChatError(
            MALFORMED,
            f"model endpoint {self.base_url} sent {what}, not a chat completion stream: "
            "is model.base_url an OpenAI-compatible /v1 endpoint?",
        )

    def _not_a_stream(self, content_type: str, sample: str) -> ChatError:
        what = one_line(content_type, 40) if content_type else "a body"
        return ChatError(
            MALFORMED,
            f"model endpoint {self.base_url} answered with {what} ({snippet(sample)}), "
            "not an event stream: is model.base_url an OpenAI-compatible /v1 endpoint?",
        )

    def _cut_off(self, chars: int, how: str) -> ChatError:
        return ChatError(
            MALFORMED,
            f"model endpoint {self.base_url} {how} after {chars} characters, before the "
            "reply was finished: did the server crash or restart? (check its log)",
        )

    def _read_failure(self, exc: BaseException, chars: int) -> ChatError:
        names = cause_names(exc)
        if "TimeoutException" in names or "TimeoutError" in names:
            where = f"after {chars} characters" if chars else "before the first token"
            return ChatError(
                TIMEOUT,
                f"model endpoint {self.base_url} stalled: nothing for {self.timeout:g} s "
                f"{where} (is the server overloaded or stuck? check its log)",
            )
        return self._cut_off(chars, "closed the connection")

    def _cancelled(self, chars: int) -> ChatError:
        return ChatError(
            CANCELLED,
            f"reply from model endpoint {self.base_url} cancelled after {chars} characters",
        )


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
    base_url = base_url.rstrip("/")
    endpoint = Endpoint(what="model endpoint", base_url=base_url, model="", config="model",
                        base_url_key="model.base_url")
    client = openai.OpenAI(base_url=base_url, api_key=api_key or PLACEHOLDER_API_KEY, timeout=timeout, max_retries=0)
    try:
        page = client.models.list()
        return sorted({str(item.id) for item in page.data if getattr(item, "id", None)})
    except openai.APIStatusError as exc:
        raise ChatError(*status_failure(endpoint, exc)) from exc
    except openai.APITimeoutError as exc:
        raise ChatError(TIMEOUT, f"model endpoint {base_url} did not list its models within {timeout:g} s") from exc
    except openai.APIConnectionError as exc:
        raise ChatError(*connection_failure(endpoint, exc)) from exc
    except (openai.OpenAIError, AttributeError, TypeError, ValueError) as exc:  # not an OpenAI model list
        raise ChatError(
            MALFORMED, f"model endpoint {base_url} did not answer /models with a model list: {one_line(str(exc))}"
        ) from exc
    finally:
        client.close()


def _sample(http: Any) -> str:
    """The start of a body that is not an event stream, for the error message."""
    sample = b""
    try:
        for piece in http.iter_bytes():
            sample += piece
            if len(sample) >= _MAX_BODY_SAMPLE:
                break
    except Exception:  # noqa: BLE001 - a broken body is described by what arrived
        pass
    text = sample[:_MAX_BODY_SAMPLE].decode("utf-8", errors="replace")
    try:  # an error object: show its message rather than the start of the JSON
        body = load_json(text)
    except InputError:
        return text
    if isinstance(body, dict) and body.get("error"):
        return error_text(body["error"]) or text
    return text
