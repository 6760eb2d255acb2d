"""OpenAISummarizer against a real mlx_lm.server and against small stdlib HTTP servers
that misbehave in each way a real endpoint can."""

from __future__ import annotations

import json
import socket
import threading
import time
from collections.abc import Iterator

import pytest
from support.drip_server import MODES, DripServer, wait_until
from support.openai_endpoint import FakeEndpoint, send

from hermes_tui.compaction.summarizer import Summarizer, SummarizerError
from hermes_tui.core.failures import HTTP_4XX, HTTP_5XX, MALFORMED, REFUSED, TIMEOUT
from hermes_tui.providers.backend import resolve_api_key
from hermes_tui.providers.openai.summarizer import PLACEHOLDER_API_KEY, OpenAISummarizer

MESSAGES = [
    {"role": "system", "content": "Summarize the exchange in one sentence."},
    {"role": "user", "content": "The assistant ran the tests; 3 failed in test_store.py."},
]


def fail_with(summarizer: OpenAISummarizer, kind: str) -> SummarizerError:
    """Call the summarizer, expect a SummarizerError of ``kind``, check the message."""
    with pytest.raises(SummarizerError) as info:
        summarizer.complete(MESSAGES, max_tokens=8)
    error = info.value
    assert error.kind == kind, str(error)
    message = str(error)
    assert summarizer.base_url in message  # every message names the endpoint
    assert "\n" not in message  # one line, fit for a status bar
    return error


# -- a real server ------------------------------------------------------------------


@pytest.mark.integration
def test_completion_from_mlx_server(mlx_server, tiny_model):
    from mlx_lm.utils import load_tokenizer

    summarizer = OpenAISummarizer(mlx_server.base_url, mlx_server.model)
    assert isinstance(summarizer, Summarizer)
    assert summarizer.model_name == mlx_server.model

    result = summarizer.complete(MESSAGES, max_tokens=16)

    assert isinstance(result.text, str) and result.text
    assert result.finish_reason == "length"  # random weights never stop on their own
    assert result.completion_tokens == 16
    # the server counts the same chat-templated prompt we would
    tokenizer = load_tokenizer(tiny_model.fp32)
    assert result.prompt_tokens == len(tokenizer.apply_chat_template(MESSAGES, add_generation_prompt=True))
    assert result.duration_s > 0


@pytest.mark.integration
def test_mlx_server_reports_prefix_cache_hits(mlx_server):
    summarizer = OpenAISummarizer(mlx_server.base_url, mlx_server.model)
    messages = [MESSAGES[0], {"role": "user", "content": f"A unique exchange {time.time_ns()}."}]
    summarizer.complete(messages, max_tokens=4)
    again = summarizer.complete(messages, max_tokens=4)
    assert again.cached_tokens is not None and 0 < again.cached_tokens <= again.prompt_tokens


@pytest.mark.integration
def test_mlx_server_wrong_model_name_is_http_4xx(mlx_server):
    # mlx_lm.server treats an unknown name as a hub repo, finds it nowhere offline, 404s
    error = fail_with(OpenAISummarizer(mlx_server.base_url, "no-such-model"), HTTP_4XX)
    assert "HTTP 404" in str(error)
    assert "no-such-model" in str(error)


def test_closed_port_is_refused():
    with socket.socket() as sock:  # a port the OS just handed out; nothing listens on it
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    summarizer = OpenAISummarizer(f"http://127.0.0.1:{port}/v1", "m", timeout=5)
    error = fail_with(summarizer, REFUSED)
    assert str(error) == (
        f"compression endpoint http://127.0.0.1:{port}/v1 refused the connection: "
        "is the server running?"
    )


# -- misbehaving endpoints ----------------------------------------------------------


def send_json(handler, status: int, data: object) -> None:
    send(handler, status, json.dumps(data).encode())


def chat_completion(content: object, finish_reason: str = "stop", **extra) -> dict:
    return {
        "id": "chatcmpl-1",
        "object": "chat.completion",
        "model": "m",
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": content},
                "finish_reason": finish_reason,
            }
        ],
        **extra,
    }


@pytest.fixture
def endpoint() -> Iterator[FakeEndpoint]:
    fake = FakeEndpoint()
    yield fake
    fake.close()


def test_request_shape_and_usage(endpoint):
    endpoint.reply = lambda h: send_json(
        h,
        200,
        chat_completion(
            "A short summary.",
            usage={
                "prompt_tokens": 40,
                "completion_tokens": 5,
                "total_tokens": 45,
                "prompt_tokens_details": {"cached_tokens": 32},
            },
        ),
    )
    result = OpenAISummarizer(endpoint.base_url, "small-model").complete(MESSAGES, max_tokens=64)

    assert result.text == "A short summary."
    assert result.finish_reason == "stop"
    assert (result.prompt_tokens, result.completion_tokens, result.cached_tokens) == (40, 5, 32)
    (request,) = endpoint.requests
    assert request["path"] == "/v1/chat/completions"
    assert request["headers"]["authorization"] == f"Bearer {PLACEHOLDER_API_KEY}"
    body = request["body"]
    assert body["model"] == "small-model"
    assert body["messages"] == MESSAGES
    assert body["max_tokens"] == 64
    assert body["temperature"] == 0
    assert not body.get("stream")


def test_api_key_and_missing_usage(endpoint):
    endpoint.reply = lambda h: send_json(h, 200, chat_completion("ok"))
    result = OpenAISummarizer(endpoint.base_url, "m", api_key="sk-test").complete(MESSAGES, max_tokens=8)
    assert endpoint.requests[0]["headers"]["authorization"] == "Bearer sk-test"
    assert result.text == "ok"
    assert (result.prompt_tokens, result.completion_tokens, result.cached_tokens) == (None, None, None)


def test_http_500_is_http_5xx(endpoint):
    endpoint.reply = lambda h: send_json(h, 500, {"error": {"message": "out of memory"}})
    error = fail_with(OpenAISummarizer(endpoint.base_url, "m"), HTTP_5XX)
    assert "HTTP 500" in str(error) and "out of memory" in str(error)


def test_http_404_is_http_4xx_with_server_text(endpoint):
    endpoint.reply = lambda h: send_json(
        h, 404, {"error": {"message": "model 'm' not found", "type": "invalid_request_error"}}
    )
    error = fail_with(OpenAISummarizer(endpoint.base_url, "m"), HTTP_4XX)
    assert "HTTP 404" in str(error) and "model 'm' not found" in str(error)


def test_http_401_is_http_4xx(endpoint):
    endpoint.reply = lambda h: send(h, 401, b"Unauthorized", "text/plain")
    error = fail_with(OpenAISummarizer(endpoint.base_url, "m"), HTTP_4XX)
    assert "HTTP 401" in str(error) and "API key" in str(error)


def test_sdk_does_not_retry(endpoint):
    endpoint.reply = lambda h: send_json(h, 503, {"error": {"message": "loading"}})
    fail_with(OpenAISummarizer(endpoint.base_url, "m"), HTTP_5XX)
    assert len(endpoint.requests) == 1


@pytest.mark.parametrize(
    "status, body, content_type, what",
    [
        (200, b'{"choices": [', "application/json", "not JSON"),
        (200, b"<html>proxy login</html>", "text/html", "not JSON"),
        (200, b"", "application/json", "not JSON"),
        (200, b"[1, 2]", "application/json", "JSON list"),
        (200, b'{"object": "list", "data": []}', "application/json", "no choices"),
        (200, json.dumps(chat_completion(None, "tool_calls")).encode(), "application/json", "no text"),
    ],
    ids=["truncated-json", "html", "empty", "list", "no-choices", "content-none"],
)
def test_not_a_chat_completion_is_malformed(endpoint, status, body, content_type, what):
    endpoint.reply = lambda h: send(h, status, body, content_type)
    error = fail_with(OpenAISummarizer(endpoint.base_url, "m"), MALFORMED)
    assert what in str(error)


def test_empty_content_is_a_valid_completion(endpoint):
    # Empty summaries are rejected by compaction, not by the transport.
    endpoint.reply = lambda h: send_json(h, 200, chat_completion("", "length"))
    result = OpenAISummarizer(endpoint.base_url, "m").complete(MESSAGES, max_tokens=8)
    assert (result.text, result.finish_reason) == ("", "length")


def test_slow_server_is_timeout(endpoint):
    def slow(handler):
        endpoint.release.wait(30)  # far longer than the timeout; released at teardown

    endpoint.reply = slow
    summarizer = OpenAISummarizer(endpoint.base_url, "m", timeout=1)
    started = time.monotonic()
    error = fail_with(summarizer, TIMEOUT)
    elapsed = time.monotonic() - started
    assert 0.9 < elapsed < 3, elapsed
    assert "auxiliary.compression.timeout" in str(error) and "1 s" in str(error)


def test_connection_closed_without_reply_is_refused(endpoint):
    def hang_up(handler):
        handler.close_connection = True
        handler.connection.shutdown(socket.SHUT_RDWR)

    endpoint.reply = hang_up
    error = fail_with(OpenAISummarizer(endpoint.base_url, "m"), REFUSED)
    assert "closed the connection without a reply" in str(error)


def test_connection_closed_mid_body_is_malformed(endpoint):
    def cut_off(handler):
        handler.send_response(200)
        handler.send_header("Content-Type", "application/json")
        handler.send_header("Content-Length", "500")
        handler.end_headers()
        handler.wfile.write(b'{"choices": [{"message": ')
        handler.wfile.flush()
        handler.close_connection = True
        handler.connection.shutdown(socket.SHUT_RDWR)

    endpoint.reply = cut_off
    error = fail_with(OpenAISummarizer(endpoint.base_url, "m"), MALFORMED)
    assert "in the middle of its reply" in str(error)


def test_base_url_trailing_slash_is_normalized(endpoint):
    endpoint.reply = lambda h: send_json(h, 200, chat_completion("ok"))
    summarizer = OpenAISummarizer(endpoint.base_url + "/", "m")
    assert summarizer.base_url == endpoint.base_url
    summarizer.complete(MESSAGES, max_tokens=8)
    assert endpoint.requests[0]["path"] == "/v1/chat/completions"


def test_resolve_api_key(monkeypatch):
    monkeypatch.setenv("HERMES_TEST_KEY", "sk-abc")
    assert resolve_api_key("HERMES_TEST_KEY") == "sk-abc"
    monkeypatch.setenv("HERMES_TEST_KEY", "  ")
    assert resolve_api_key("HERMES_TEST_KEY") is None
    monkeypatch.delenv("HERMES_TEST_KEY")
    assert resolve_api_key("HERMES_TEST_KEY") is None
    assert resolve_api_key("") is None


# -- the timeout is a deadline for the whole call -----------------------------------

DRIP_TIMEOUT_S = 2.0


@pytest.mark.timeout(60)
@pytest.mark.parametrize("mode", MODES)
def test_a_slow_drip_ends_at_the_deadline(mode):
    """Every read returns within 0.5 s, yet the call ends at ``timeout``: the limit is
    a deadline for connect + headers + body, not for each read."""
    with DripServer(mode) as server:
        threads_before = set(threading.enumerate())
        summarizer = OpenAISummarizer(server.base_url, "small-model", timeout=DRIP_TIMEOUT_S)
        started = time.monotonic()
        error = fail_with(summarizer, TIMEOUT)
        elapsed = time.monotonic() - started
        assert DRIP_TIMEOUT_S - 0.1 < elapsed < DRIP_TIMEOUT_S + 5, elapsed
        assert not server.finished.is_set()  # the drip would have lasted 120 s
        assert str(error) == (
            f"compression model small-model at {server.base_url} did not answer within 2 s: "
            "raise auxiliary.compression.timeout or use a smaller model"
        )
        assert error.endpoint == server.base_url
        assert server.hung_up.wait(5)  # the socket was closed, not left dripping
        assert server.handled.wait(5)
        assert wait_until(lambda: set(threading.enumerate()) == threads_before), (
            set(threading.enumerate()) - threads_before
        )


@pytest.mark.timeout(60)
def test_a_pass_against_a_slow_drip_fails_with_timeout(hermes_home):
    from helpers import agent_session

    from hermes_tui.config import Config
    from hermes_tui.core.conversation import Conversation
    from hermes_tui.session.wiring import make_compactor, make_counter

    with DripServer("json") as server:
        config = Config().with_overrides({
            "auxiliary.compression.provider": "openai-api",
            "auxiliary.compression.base_url": server.base_url,
            "auxiliary.compression.model": "small-model",
            "auxiliary.compression.timeout": DRIP_TIMEOUT_S,
        })
        counter = make_counter(config)
        compactor = make_compactor(config, counter=counter, context_limit=8192)
        conv = Conversation(agent_session(exchanges=14, size=60), counter=counter)
        before = [m.id for m in conv.messages]
        started = time.monotonic()
        report = compactor.micro_pass(conv)
        assert time.monotonic() - started < DRIP_TIMEOUT_S + 5
        assert (report.outcome, report.fields["failure"]) == ("summarize_failed", "timeout")
        assert [m.id for m in conv.messages] == before
        assert not server.finished.is_set()


def test_a_slow_answer_within_the_deadline_is_read_whole():
    """The deadline does not cut a reply that arrives in time, however it is split."""
    with DripServer("json", interval=0.002, drip_s=0.4) as server:
        result = OpenAISummarizer(server.base_url, "m", timeout=30).complete(MESSAGES, max_tokens=8)
    assert result.text.startswith("A summary of the exchange.")
    assert server.finished.is_set()


def test_lone_surrogates_in_a_summary_are_repaired_and_the_pass_stores(endpoint, tmp_path, hermes_home):
    from helpers import agent_session

    from hermes_tui.config import Config
    from hermes_tui.core.conversation import Conversation
    from hermes_tui.session.wiring import make_compactor, make_counter
    from hermes_tui.store import Store

    body = json.dumps(chat_completion("- Ran the tests: \\ud800 all green \\ud83d\\ude00."))
    # json.dumps escaped our backslashes: undo that so the server sends JSON escapes of surrogates
    body = body.replace("\\\\u", "\\u")
    endpoint.reply = lambda h: send(h, 200, body.encode())
    config = Config().with_overrides({
        "auxiliary.compression.provider": "openai-api",
        "auxiliary.compression.base_url": endpoint.base_url,
        "auxiliary.compression.model": "small-model",
    })
    counter = make_counter(config)
    compactor = make_compactor(config, counter=counter, context_limit=8192)
    conv = Conversation(agent_session(exchanges=14, size=60), counter=counter)
    with Store(tmp_path / "state.db") as store:
        session = store.create_session("t", messages=conv.messages)
        report = compactor.micro_pass(conv, lambda result: store.archive_and_compact(session.id, result))
        assert report.outcome == "absorbed", report.fields
        (marker,) = [m for m in store.load_active(session.id) if m.is_marker]
    assert "- Ran the tests: \ufffd all green \U0001F600." in marker.meta["summary"]


@pytest.mark.parametrize("body, problem", [
    (b'{"choices": ' * 5000 + b"null" + b"}" * 5000, "too deeply nested"),
    (b'{"choices": [{"message": {"content": "ok"}}], "created": ' + b"7" * 5000 + b"}", "number too long"),
])
def test_an_unreadable_json_answer_is_malformed_in_one_line(endpoint, body, problem):
    endpoint.reply = lambda h: send(h, 200, body)
    error = fail_with(OpenAISummarizer(endpoint.base_url, "m"), MALFORMED)
    assert problem in str(error) and endpoint.base_url in str(error) and "\n" not in str(error)
