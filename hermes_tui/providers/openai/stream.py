"""Reading the event stream of an OpenAI-compatible ``/chat/completions`` reply.

Each chunk is checked by hand rather than through the SDK's ``Stream``, because:

* the SDK's ``Stream`` silently stops at the end of the body, so a server that dies
  mid-reply (``mlx_lm.server`` speaks HTTP/1.0: its stream simply ends) would look
  like a finished reply. Here a stream that ends before ``data: [DONE]`` and before
  any ``finish_reason`` is an error (``MALFORMED``, "cut off after N characters": the
  server did answer, the answer is incomplete);
* keep-alive comments (``mlx_lm.server`` sends ``: keepalive N/M`` during long prompt
  processing) are skipped, not taken for text;
* the SDK builds chunk objects leniently from any JSON, so a wrong URL or a proxy's
  page would surface as an ``AttributeError`` rather than a clear message.

An error object inside the stream is ``HTTP_5XX``, or ``CONTEXT_EXCEEDED`` when it says the
request does not fit the window (LM Studio sends that with status 200), as is a JSON error
body sent with status 200.

Usage comes from the server's last usage chunk (``prompt_tokens``, ``completion_tokens``,
``prompt_tokens_details.cached_tokens``); a server that sends none leaves those fields
None; ``duration_s`` and ``time_to_first_token_s`` are measured here.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # the openai SDK's HTTP library, imported with it by the first call
    import httpx2

from hermes_tui.chat.client import (
    CANCELLED,
    CONTEXT_EXCEEDED,
    HTTP_5XX,
    MALFORMED,
    TIMEOUT,
    ChatDelta,
    ChatDone,
    ChatError,
    ChatToolDelta,
    Usage,
)
from hermes_tui.providers.openai.call_limits import CANCELLED as LIMITS_CANCELLED
from hermes_tui.providers.openai.call_limits import CallLimits
from hermes_tui.providers.openai.errors import (
    Endpoint,
    cause_names,
    error_text,
    int_or_none,
    one_line,
    overflow_message,
    snippet,
)
from hermes_tui.providers.openai.overflow import recognise
from hermes_tui.providers.openai.tool_calls import ToolCallAssembler
from hermes_tui.util.untrusted import NOT_JSON, InputError, is_high_surrogate, load_json, model_text

# How much of a body that is not an event stream is read to describe it.
_MAX_BODY_SAMPLE = 4096


@dataclass
class _Chunk:
    """What one stream chunk carried."""

    text: str = ""
    finish_reason: str | None = None
    usage: dict[str, Any] | None = None
    tool_calls: list[dict[str, Any]] = field(default_factory=list)  # the delta's pieces


_DONE = object()  # the ``data: [DONE]`` sentinel


class StreamReader:
    """Reads one reply's event stream; ``endpoint`` and ``timeout`` name it in messages."""

    def __init__(self, endpoint: Endpoint, timeout: float) -> None:
        self.endpoint = endpoint
        self.base_url = endpoint.base_url
        self.timeout = timeout

    def read(
        self, http: httpx2.Response, started: float, limits: CallLimits
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
                raise self.cancelled(0)
            raise self._not_a_stream(content_type, sample)

        lines = http.iter_lines()
        parts: list[str] = []
        chars = 0
        finish_reason: str | None = None
        usage: dict[str, Any] | None = None
        first_text_at: float | None = None
        calls = ToolCallAssembler()
        data: list[str] = []  # the data lines of the event being read
        events = 0
        done = False
        stray: str | None = None  # the first line that is not SSE, to describe the body
        held = ""  # a chunk's last character, when it is half a surrogate pair the next chunk may end

        while not done:
            if cancel is not None and cancel.is_set():
                raise self.cancelled(chars)
            try:
                with limits.applied():
                    line: str | None = next(lines)
            except StopIteration:
                line = None
            except Exception as exc:  # whatever the HTTP layer raises while reading
                if cancel is not None and cancel.is_set():
                    raise self.cancelled(chars) from exc
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
            error = body["error"]
            overflow = recognise(error.get("message", "") if isinstance(error, dict) else str(error), error)
            if overflow is not None:
                raise ChatError(CONTEXT_EXCEEDED, overflow_message(self.endpoint, overflow, "mid-stream"), overflow, endpoint=self.base_url)
            detail = error_text(error) or "no details"
            raise self._error(HTTP_5XX, f"reported an error mid-stream: {detail} (check the server's log)")
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

    def _error(self, kind: str, what: str) -> ChatError:
        """A failure of this endpoint: the message names it, the error carries it."""
        return ChatError(kind, f"model endpoint {self.base_url} {what}", endpoint=self.base_url)

    def _malformed(self, what: str) -> ChatError:
        return self._error(
            MALFORMED, f"sent {what}, not a chat completion stream: is model.base_url an OpenAI-compatible /v1 endpoint?"
        )

    def _not_a_stream(self, content_type: str, sample: str) -> ChatError:
        overflow = recognise(sample)
        if overflow is not None:  # an error object sent with status 200 (LM Studio)
            return ChatError(CONTEXT_EXCEEDED, overflow_message(self.endpoint, overflow, "HTTP 200"), overflow, endpoint=self.base_url)
        what = one_line(content_type, 40) if content_type else "a body"
        return self._error(
            MALFORMED,
            f"answered with {what} ({snippet(sample)}), not an event stream: "
            "is model.base_url an OpenAI-compatible /v1 endpoint?",
        )

    def _cut_off(self, chars: int, how: str) -> ChatError:
        return self._error(
            MALFORMED,
            f"{how} after {chars} characters, before the reply was finished: did the server crash or restart? "
            "(check its log)",
        )

    def _read_failure(self, exc: BaseException, chars: int) -> ChatError:
        names = cause_names(exc)
        if "TimeoutException" in names or "TimeoutError" in names:
            where = f"after {chars} characters" if chars else "before the first token"
            return self._error(
                TIMEOUT, f"stalled: nothing for {self.timeout:g} s {where} (is the server overloaded or stuck? check its log)"
            )
        return self._cut_off(chars, "closed the connection")

    def cancelled(self, chars: int) -> ChatError:
        return ChatError(
            CANCELLED,
            f"reply from model endpoint {self.base_url} cancelled after {chars} characters",
            endpoint=self.base_url,
        )


def _sample(http: httpx2.Response) -> str:
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
        error = body["error"]
        message = error.get("message") if isinstance(error, dict) else None
        if isinstance(message, str):
            return message  # whole: an overflow's figures are in it
        return error_text(error) or text
    return text
