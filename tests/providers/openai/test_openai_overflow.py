"""A server's "does not fit the window" reply, through the real client and a real HTTP server:
an HTTP 400 (llama.cpp), an error object mid-stream and one sent with status 200 (LM Studio)
all become CONTEXT_EXCEEDED with the server's own words and figures."""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest
from support.openai_endpoint import FakeEndpoint, send, sse_reply

from hermes_tui.chat.client import CONTEXT_EXCEEDED, HTTP_4XX, ChatError
from hermes_tui.providers.openai.chat import OpenAIChatClient

MESSAGES = [{"role": "user", "content": "hi"}]
LLAMA = {"code": 400, "message": "request (36551 tokens) exceeds the available context size (16384 tokens), "
                                 "try increasing it",
         "type": "exceed_context_size_error", "n_prompt_tokens": 36551, "n_ctx": 16384}
LM_STUDIO = ("Trying to keep the first 10136 tokens when context the overflows. However, the model is loaded "
             "with context length of only 7866 tokens, which is not enough. Try to load the model with a "
             "larger context length, or provide a shorter input")


@pytest.fixture
def endpoint() -> Iterator[FakeEndpoint]:
    fake = FakeEndpoint()
    yield fake
    fake.close()


def failure(endpoint: FakeEndpoint) -> ChatError:
    with pytest.raises(ChatError) as info:
        list(OpenAIChatClient(endpoint.base_url, "m").stream(MESSAGES, max_tokens=8))
    return info.value


def test_a_llama_cpp_400_is_context_exceeded_with_its_figures(endpoint):
    endpoint.reply = lambda h: send(h, 400, json.dumps({"error": LLAMA}).encode())
    error = failure(endpoint)
    assert error.kind == CONTEXT_EXCEEDED
    assert (error.overflow.prompt_tokens, error.overflow.context_limit) == (36551, 16384)
    message = str(error)
    assert endpoint.base_url in message and "\n" not in message
    assert LLAMA["message"] in message and "context window" in message and "check model.model" not in message


def test_an_overflow_mid_stream_or_with_status_200_is_context_exceeded(endpoint):
    endpoint.reply = sse_reply({"error": {"message": LM_STUDIO}})
    error = failure(endpoint)
    assert error.kind == CONTEXT_EXCEEDED and error.overflow.context_limit == 7866
    assert "context length of only 7866 tokens" in str(error)

    endpoint.reply = lambda h: send(h, 200, json.dumps({"error": LM_STUDIO}).encode())
    error = failure(endpoint)
    assert error.kind == CONTEXT_EXCEEDED and error.overflow.prompt_tokens == 10136


def test_another_400_stays_http_4xx(endpoint):
    endpoint.reply = lambda h: send(h, 400, json.dumps({"error": {"message": "max_tokens is too large"}}).encode())
    error = failure(endpoint)
    assert error.kind == HTTP_4XX and error.overflow is None
