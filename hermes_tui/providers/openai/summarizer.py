"""The compression model behind any OpenAI-compatible endpoint.

Any server that speaks ``POST /v1/chat/completions`` can perform compaction passes:
llama.cpp's server, Ollama, LM Studio, vLLM, ``mlx_lm.server`` or a hosted API. This is
where passes go when MLX has no GPU (Linux, Intel Macs, CI).

Every failure becomes a ``SummarizerError`` whose kind says what happened and whose
message is one line that names the endpoint and says what to do, because it ends up in
the status bar and the log of someone who did not write this code.

The request goes out through ``errors.post_chat_completions``, as the chat model's
does, under a ``call_limits.CallLimits`` deadline: ``timeout`` ends the whole
call, however the server paces its reply. The reply is read as plain JSON and
checked by hand rather than trusted to the SDK's models: the SDK hands back a bare
string for a non-JSON body, and leniently builds a ``ChatCompletion`` from any JSON
object, so a proxy's error page or a wrong URL would otherwise surface as an
``AttributeError`` deep inside compaction.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # imported by the first call (providers.openai.call_limits.SdkClient): it is slow to import
    import openai

from hermes_tui.compaction.sizing import ModelSpeed
from hermes_tui.compaction.summarizer import Completion, SummarizerError
from hermes_tui.core.failures import MALFORMED, TIMEOUT
from hermes_tui.providers.openai.call_limits import TIMED_OUT, CallLimits, SdkClient
from hermes_tui.providers.openai.errors import (
    Endpoint,
    connection_failure,
    int_or_none,
    one_line,
    post_chat_completions,
    snippet,
    status_failure,
)
from hermes_tui.util.untrusted import NOT_JSON, InputError, load_json, model_text

# Local servers do not check the key, but the SDK refuses to start without one.
PLACEHOLDER_API_KEY = "not-needed"

# The config key a user edits when passes time out (named in the TIMEOUT message).
TIMEOUT_CONFIG_KEY = "auxiliary.compression.timeout"


class OpenAISummarizer:
    """Summarizer backed by an OpenAI-compatible chat completions endpoint.

    ``timeout`` (seconds) is a deadline for the whole call: connecting, sending, the
    headers and the whole body. A server that keeps a reply coming slowly (a byte at a
    time, or a stream of slow chunks) is stopped there like one that sends nothing.
    The SDK's automatic retries are off: a retry would double the time a user waits
    before seeing the failure, and compaction retries on the next turn anyway.
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
        # The server is part of the key: one model name served by a laptop's llama-server and
        # by a GPU box are two speeds, and two models behind one server differ by name.
        self.speed_key = f"openai-api:{model}@{self.base_url}"
        self.speed = ModelSpeed()  # learnt from the calls, kept per speed_key (compaction.sizing)
        self.timeout = float(timeout)
        self._sdk = SdkClient(self.base_url, api_key or PLACEHOLDER_API_KEY, self.timeout)

    def __repr__(self) -> str:
        return f"OpenAISummarizer(base_url={self.base_url!r}, model={self.model!r})"

    def complete(self, messages: list[dict[str, Any]], *, max_tokens: int) -> Completion:
        """One non-streaming chat completion at temperature 0."""
        started = time.perf_counter()
        client = self._sdk.get()  # the SDK is imported by then: the except clauses name it
        import openai

        limits = CallLimits(deadline=time.monotonic() + self.timeout)
        try:
            with limits.applied():
                response = post_chat_completions(
                    client,
                    {
                        "model": self.model,
                        "messages": messages,
                        "max_tokens": max_tokens,
                        "temperature": 0,
                        "stream": False,
                    },
                    stream=False,
                )
                body_text = response.text
        except openai.OpenAIError as exc:
            if limits.stopped == TIMED_OUT or isinstance(exc, openai.APITimeoutError):
                raise self._timed_out() from exc
            if isinstance(exc, openai.APIStatusError):
                raise self._status_error(exc) from exc
            if isinstance(exc, openai.APIConnectionError):
                raise self._connection_error(exc) from exc
            raise SummarizerError(  # anything else the SDK raises
                MALFORMED,
                f"compression endpoint {self.base_url} failed: {one_line(str(exc))}",
                endpoint=self.base_url,
            ) from exc
        duration = time.perf_counter() - started
        return self._parse(body_text, duration)

    # -- errors -------------------------------------------------------------------

    def _timed_out(self) -> SummarizerError:
        return SummarizerError(
            TIMEOUT,
            f"compression model {self.model} at {self.base_url} did not answer within "
            f"{self.timeout:g} s: raise {TIMEOUT_CONFIG_KEY} or use a smaller model",
            endpoint=self.base_url,
        )

    def _endpoint(self) -> Endpoint:
        return Endpoint(
            what="compression endpoint",
            base_url=self.base_url,
            model=self.model,
            config="auxiliary.compression",
        )

    def _status_error(self, exc: openai.APIStatusError) -> SummarizerError:
        failure = status_failure(self._endpoint(), exc)
        return SummarizerError(failure.kind, failure.message, endpoint=self.base_url, fix=failure.fix)

    def _connection_error(self, exc: openai.APIConnectionError) -> SummarizerError:
        failure = connection_failure(self._endpoint(), exc)
        return SummarizerError(failure.kind, failure.message, endpoint=self.base_url)

    # -- the reply ----------------------------------------------------------------

    def _malformed(self, what: str) -> SummarizerError:
        return SummarizerError(
            MALFORMED,
            f"compression endpoint {self.base_url} sent {what}, not a chat completion: "
            "is base_url an OpenAI-compatible /v1 endpoint?",
            endpoint=self.base_url,
        )

    def _parse(self, body_text: str, duration: float) -> Completion:
        try:
            body = load_json(body_text, model_output=True)
        except InputError as exc:
            if exc.kind == NOT_JSON:
                raise self._malformed(f"a body that is not JSON ({snippet(body_text)})") from None
            raise self._malformed(f"a JSON body that cannot be read ({exc})") from None
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

        usage = body.get("usage")
        usage = usage if isinstance(usage, dict) else {}
        details = usage.get("prompt_tokens_details")
        cached = details.get("cached_tokens") if isinstance(details, dict) else None
        finish_reason = choice.get("finish_reason")
        # llama.cpp's server says how fast it read and wrote (its "timings"); others do not.
        timings = body.get("timings")
        timings = timings if isinstance(timings, dict) else {}
        return Completion(
            text=model_text([content]),
            finish_reason=finish_reason if isinstance(finish_reason, str) else None,
            prompt_tokens=int_or_none(usage.get("prompt_tokens")),
            completion_tokens=int_or_none(usage.get("completion_tokens")),
            duration_s=duration,
            cached_tokens=int_or_none(cached),
            prompt_tps=_positive(timings.get("prompt_per_second")),
            generation_tps=_positive(timings.get("predicted_per_second")),
        )


def _positive(value: Any) -> float | None:
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) and value > 0 else None

