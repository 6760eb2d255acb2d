"""OpenAIChatClient against a real mlx_lm.server (streaming, usage, cancel, prefix
cache, the server killed mid-stream) and against small stdlib HTTP servers that
misbehave in each way a real endpoint can."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from collections.abc import Iterator

import pytest
from support.drip_server import DripServer, wait_until
from support.openai_endpoint import (
    FakeEndpoint,
    chunk,
    event,
    hang_up,
    send,
    sse_reply,
    start_stream,
    usage_chunk,
)
from support.servers import (
    SERVER_START_TIMEOUT_S,
    free_port,
    server_log_tail,
    stop_server,
    wait_until_serving,
)

from hermes_tui.chat.client import (
    CANCELLED,
    HTTP_4XX,
    HTTP_5XX,
    MALFORMED,
    REFUSED,
    TIMEOUT,
    ChatClient,
    ChatDelta,
    ChatDone,
    ChatError,
    Usage,
    collect,
)
from hermes_tui.providers.openai.chat import PLACEHOLDER_API_KEY, OpenAIChatClient

MESSAGES = [
    {"role": "system", "content": "You are a helpful assistant."},
    {"role": "user", "content": "Write a haiku about terminals."},
]


def drain(client: OpenAIChatClient, **kwargs) -> tuple[list[ChatDelta], ChatDone]:
    """Consume one stream; check the shape: deltas, then exactly one ChatDone, last."""
    events = list(client.stream(MESSAGES, **{"max_tokens": 16, **kwargs}))
    assert events and isinstance(events[-1], ChatDone)
    deltas = events[:-1]
    assert all(isinstance(e, ChatDelta) and e.text for e in deltas)
    done = events[-1]
    assert done.text == "".join(d.text for d in deltas)
    return deltas, done


def fail_with(
    client: OpenAIChatClient, kind: str, received: list[str] | None = None, **kwargs
) -> ChatError:
    """Stream, expect a ChatError of ``kind``; collect the delta texts in ``received``."""
    received = [] if received is None else received
    with pytest.raises(ChatError) as info:
        for event in client.stream(MESSAGES, **{"max_tokens": 16, **kwargs}):
            assert isinstance(event, ChatDelta), "no ChatDone after a failure"
            received.append(event.text)
    error = info.value
    assert error.kind == kind, str(error)
    message = str(error)
    assert client.base_url in message  # every message names the endpoint
    assert "\n" not in message  # one line, fit for a status bar
    return error


# -- a real server ------------------------------------------------------------------


@pytest.mark.integration
def test_stream_from_mlx_server(mlx_server, tiny_model):
    from mlx_lm.utils import load_tokenizer

    client = OpenAIChatClient(mlx_server.base_url, mlx_server.model)
    assert isinstance(client, ChatClient)
    assert client.model_name == mlx_server.model

    deltas, done = drain(client, max_tokens=24)

    assert len(deltas) >= 3  # streamed, not one block
    usage = done.usage
    assert usage.finish_reason == "length"  # random weights never stop on their own
    assert usage.completion_tokens == 24
    tokenizer = load_tokenizer(tiny_model.fp32)
    assert usage.prompt_tokens == len(tokenizer.apply_chat_template(MESSAGES, add_generation_prompt=True))
    assert 0 < usage.time_to_first_token_s <= usage.duration_s
    # MLX-only measurements are not invented for a remote server
    assert (usage.prompt_tps, usage.generation_tps, usage.peak_memory_gb) == (None, None, None)


@pytest.mark.integration
def test_complete_from_mlx_server(mlx_server):
    client = OpenAIChatClient(mlx_server.base_url, mlx_server.model, temperature=0)
    done = client.complete(MESSAGES, max_tokens=8)
    assert isinstance(done, ChatDone) and done.text
    assert (done.usage.completion_tokens, done.usage.finish_reason) == (8, "length")
    # temperature 0 is greedy: the same prompt gives the same text
    assert client.complete(MESSAGES, max_tokens=8).text == done.text


@pytest.mark.integration
def test_stop_string_is_sent_and_honoured(mlx_server, tiny_model):
    from mlx_lm.utils import load_tokenizer

    tokenizer = load_tokenizer(tiny_model.fp32)
    client = OpenAIChatClient(mlx_server.base_url, mlx_server.model, temperature=0)
    deltas, full = drain(client, max_tokens=40)
    # mlx_lm.server matches stop words as token sequences: stop at a delta from the
    # second half of the greedy reply that is exactly one token.
    stop = next(
        d.text
        for d in deltas[len(deltas) // 2 :]
        if d.text.strip() and len(tokenizer.encode(d.text, add_special_tokens=False)) == 1
    )
    done = client.complete(MESSAGES, max_tokens=40, stop=[stop])
    assert done.usage.finish_reason == "stop"
    assert len(done.text) < len(full.text) and full.text.startswith(done.text)


@pytest.mark.integration
def test_cancel_after_first_delta(mlx_server):
    client = OpenAIChatClient(mlx_server.base_url, mlx_server.model)
    cancel = threading.Event()
    received: list[str] = []
    stream = client.stream(MESSAGES, max_tokens=2000, cancel=cancel)
    with pytest.raises(ChatError) as info:
        for event in stream:
            assert isinstance(event, ChatDelta)
            received.append(event.text)
            if len(received) == 1:
                cancel.set()
                cancelled_at = time.monotonic()
    assert info.value.kind == CANCELLED
    assert time.monotonic() - cancelled_at < 0.5
    assert received and f"after {len(received[0])} characters" in str(info.value)

    # The server noticed the closed connection; the next request is served normally.
    started = time.monotonic()
    done = client.complete(MESSAGES, max_tokens=4)
    assert done.usage.completion_tokens == 4
    assert time.monotonic() - started < 10


@pytest.mark.integration
def test_mlx_server_reports_prefix_cache_hits(mlx_server):
    client = OpenAIChatClient(mlx_server.base_url, mlx_server.model)
    messages = [MESSAGES[0], {"role": "user", "content": f"A unique question {time.time_ns()}."}]
    first = client.complete(messages, max_tokens=4)
    again = client.complete(messages, max_tokens=4)
    assert first.usage.cached_tokens is not None  # the server reports the field...
    assert again.usage.cached_tokens is not None  # ...and the repeat hits the cache
    assert 0 < again.usage.cached_tokens <= again.usage.prompt_tokens
    assert first.usage.cached_tokens < again.usage.cached_tokens


@pytest.mark.integration
def test_mlx_server_wrong_model_name_is_http_4xx(mlx_server):
    client = OpenAIChatClient(mlx_server.base_url, "no-such-model")
    error = fail_with(client, HTTP_4XX)
    assert "HTTP 404" in str(error) and "no-such-model" in str(error)
    assert "model.model" in str(error)
    # The facts the UI words it by, without reading the message.
    assert error.endpoint == mlx_server.base_url and error.fix and "model.model" in error.fix


@pytest.mark.integration
def test_mlx_server_killed_mid_stream(tiny_model, hf_offline_env, tmp_path):
    """Our own server (the shared one must live on), SIGKILLed during a long reply."""
    port = free_port()
    root = f"http://127.0.0.1:{port}"
    model = str(tiny_model.fp32)
    log_path = tmp_path / "server.log"
    command = [
        sys.executable, "-m", "mlx_lm", "server",
        "--model", model, "--host", "127.0.0.1", "--port", str(port),
    ]
    env = {**os.environ, **hf_offline_env, "PYTHONUNBUFFERED": "1"}
    with open(log_path, "wb") as log:
        process = subprocess.Popen(
            command, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, env=env
        )
    try:
        try:
            wait_until_serving(process, root, model, log_path, time.monotonic() + SERVER_START_TIMEOUT_S)
        except Exception as exc:  # noqa: BLE001 - reported with the server's log
            pytest.fail(f"could not start the server: {exc}\n{server_log_tail(log_path)}")

        client = OpenAIChatClient(f"{root}/v1", model, timeout=30)
        received: list[str] = []
        killed_at = None
        with pytest.raises(ChatError) as info:
            for event in client.stream(MESSAGES, max_tokens=2000):
                assert isinstance(event, ChatDelta), "the reply finished before the kill"
                received.append(event.text)
                if len(received) == 3:
                    process.kill()
                    process.wait(timeout=10)
                    killed_at = time.monotonic()
        assert killed_at is not None
        assert time.monotonic() - killed_at < 2  # not the 30 s timeout
        error = info.value
        assert error.kind == MALFORMED, str(error)
        chars = sum(map(len, received))
        assert f"after {chars} characters" in str(error)
        assert "did the server crash" in str(error)
        assert client.base_url in str(error) and "\n" not in str(error)

        # The server is gone: the next request is refused.
        fail_with(client, REFUSED)
    finally:
        stop_server(process)


def test_closed_port_is_refused():
    port = free_port()
    client = OpenAIChatClient(f"http://127.0.0.1:{port}/v1", "m", timeout=5)
    error = fail_with(client, REFUSED)
    assert str(error) == (
        f"model endpoint http://127.0.0.1:{port}/v1 refused the connection: is the server running?"
    )
    assert error.endpoint == f"http://127.0.0.1:{port}/v1"


# -- misbehaving endpoints ----------------------------------------------------------


@pytest.fixture
def endpoint() -> Iterator[FakeEndpoint]:
    fake = FakeEndpoint()
    yield fake
    fake.close()


def test_request_shape_usage_and_cached_tokens(endpoint):
    endpoint.reply = sse_reply(
        chunk(),
        chunk("Hello"),
        chunk(", world"),
        chunk("", "stop"),
        usage_chunk(40, 3, cached=32),
        "[DONE]",
    )
    client = OpenAIChatClient(endpoint.base_url, "chat-model")
    deltas, done = drain(client, max_tokens=64, stop=["\nUser:"])

    assert [d.text for d in deltas] == ["Hello", ", world"]
    assert done.text == "Hello, world"
    assert done.usage == Usage(
        prompt_tokens=40,
        completion_tokens=3,
        cached_tokens=32,
        finish_reason="stop",
        duration_s=done.usage.duration_s,
        time_to_first_token_s=done.usage.time_to_first_token_s,
    )
    assert 0 < done.usage.time_to_first_token_s <= done.usage.duration_s
    (request,) = endpoint.requests
    assert request["path"] == "/v1/chat/completions"
    assert request["headers"]["authorization"] == f"Bearer {PLACEHOLDER_API_KEY}"
    body = request["body"]
    assert body["model"] == "chat-model"
    assert body["messages"] == MESSAGES
    assert body["max_tokens"] == 64
    assert body["stop"] == ["\nUser:"]
    assert body["stream"] is True
    assert body["stream_options"] == {"include_usage": True}
    assert "temperature" not in body  # None: the server's default


def test_temperature_and_api_key(endpoint):
    endpoint.reply = sse_reply(chunk("ok", "stop"), "[DONE]")
    client = OpenAIChatClient(endpoint.base_url + "/", "m", api_key="sk-test", temperature=0.7)
    assert client.base_url == endpoint.base_url  # trailing slash normalized
    drain(client)
    request = endpoint.requests[0]
    assert request["headers"]["authorization"] == "Bearer sk-test"
    assert request["body"]["temperature"] == 0.7
    assert "stop" not in request["body"]


def test_missing_usage_is_none_not_invented(endpoint):
    endpoint.reply = sse_reply(chunk("one"), chunk(" two", "length"), "[DONE]")
    _, done = drain(OpenAIChatClient(endpoint.base_url, "m"))
    usage = done.usage
    assert (usage.prompt_tokens, usage.completion_tokens, usage.cached_tokens) == (None, None, None)
    assert usage.finish_reason == "length"


def test_keepalives_crlf_and_multiline_events(endpoint):
    def reply(handler) -> None:
        start_stream(handler)
        handler.wfile.write(b": keepalive 1/2\r\n\r\n")
        handler.wfile.write(b"event: message\r\ndata: " + json.dumps(chunk("a")).encode() + b"\r\n\r\n")
        # one JSON object split over two data lines (joined with a newline)
        handler.wfile.write(b'data: {"choices": [{"delta": {"content": "b"},\ndata:  "finish_reason": "stop"}]}\n\n')
        handler.wfile.write(b"data: [DONE]\n\n")

    endpoint.reply = reply
    deltas, done = drain(OpenAIChatClient(endpoint.base_url, "m"))
    assert done.text == "ab" and done.usage.finish_reason == "stop"


def test_finished_reply_without_done_marker_is_accepted(endpoint):
    endpoint.reply = sse_reply(chunk("all"), chunk(None, "stop"))  # then the connection closes
    _, done = drain(OpenAIChatClient(endpoint.base_url, "m"))
    assert (done.text, done.usage.finish_reason) == ("all", "stop")


def test_http_500_is_http_5xx(endpoint):
    endpoint.reply = lambda h: send(h, 500, json.dumps({"error": {"message": "out of memory"}}).encode())
    error = fail_with(OpenAIChatClient(endpoint.base_url, "m"), HTTP_5XX)
    assert "HTTP 500" in str(error) and "out of memory" in str(error)
    assert len(endpoint.requests) == 1  # no retries


@pytest.mark.parametrize(
    "status, body, needles",
    [
        (404, {"error": {"message": "model 'm' not found"}}, ["HTTP 404", "model 'm' not found", "model.model ('m')", "model.base_url"]),
        (400, {"error": {"message": "max_tokens is too large"}}, ["HTTP 400", "max_tokens is too large"]),
        (401, {"error": "bad key"}, ["HTTP 401", "model.api_key_env"]),
    ],
    ids=["404", "400", "401"],
)
def test_http_4xx_has_server_text_and_hint(endpoint, status, body, needles):
    endpoint.reply = lambda h: send(h, status, json.dumps(body).encode())
    error = fail_with(OpenAIChatClient(endpoint.base_url, "m"), HTTP_4XX)
    for needle in needles:
        assert needle in str(error)


def test_error_inside_the_stream_is_http_5xx(endpoint):
    endpoint.reply = sse_reply(chunk("par"), {"error": {"message": "KV cache exhausted"}})
    received: list[str] = []
    error = fail_with(OpenAIChatClient(endpoint.base_url, "m"), HTTP_5XX, received)
    assert received == ["par"]
    assert "mid-stream" in str(error) and "KV cache exhausted" in str(error)


@pytest.mark.parametrize("framing", ["http/1.0 eof", "http/1.1 chunked"])
def test_connection_closed_mid_stream(endpoint, framing):
    """Two chunks, then the socket closes: an incomplete reply, whatever the framing."""

    def reply(handler) -> None:
        frames = [f"data: {json.dumps(chunk(text))}\n\n".encode() for text in ("Hel", "lo")]
        if framing == "http/1.0 eof":
            start_stream(handler)
            for frame in frames:
                handler.wfile.write(frame)
        else:
            handler.protocol_version = "HTTP/1.1"
            handler.send_response(200)
            handler.send_header("Content-Type", "text/event-stream")
            handler.send_header("Transfer-Encoding", "chunked")
            handler.end_headers()
            for frame in frames:
                handler.wfile.write(b"%x\r\n%s\r\n" % (len(frame), frame))
        handler.wfile.flush()
        time.sleep(0.05)
        hang_up(handler)

    endpoint.reply = reply
    received: list[str] = []
    started = time.monotonic()
    error = fail_with(OpenAIChatClient(endpoint.base_url, "m", timeout=10), MALFORMED, received)
    assert time.monotonic() - started < 2
    assert received == ["Hel", "lo"]
    assert "after 5 characters" in str(error) and "did the server crash" in str(error)


def test_connection_closed_without_reply_is_refused(endpoint):
    endpoint.reply = hang_up
    error = fail_with(OpenAIChatClient(endpoint.base_url, "m"), REFUSED)
    assert "closed the connection without a reply" in str(error)


def test_stall_mid_stream_is_timeout(endpoint):
    def stall(handler) -> None:
        start_stream(handler)
        event(handler, chunk("first"))
        endpoint.release.wait(30)  # far longer than the timeout; released at teardown

    endpoint.reply = stall
    received: list[str] = []
    started = time.monotonic()
    error = fail_with(OpenAIChatClient(endpoint.base_url, "m", timeout=1), TIMEOUT, received)
    elapsed = time.monotonic() - started
    assert 0.9 < elapsed < 2.5, elapsed
    assert received == ["first"]
    assert "nothing for 1 s after 5 characters" in str(error)


def test_stall_is_timeout_while_a_cancel_is_armed(endpoint):
    """A cancel that is never set does not stop the idle timeout from ending a stall."""

    def stall(handler) -> None:
        start_stream(handler)
        event(handler, chunk("first"))
        endpoint.release.wait(30)

    endpoint.reply = stall
    started = time.monotonic()
    error = fail_with(OpenAIChatClient(endpoint.base_url, "m", timeout=1), TIMEOUT, cancel=threading.Event())
    assert 0.9 < time.monotonic() - started < 2.5
    assert "nothing for 1 s after 5 characters" in str(error)


def test_no_answer_is_timeout(endpoint):
    endpoint.reply = lambda h: endpoint.release.wait(30)
    started = time.monotonic()
    error = fail_with(OpenAIChatClient(endpoint.base_url, "m", timeout=1), TIMEOUT)
    assert 0.9 < time.monotonic() - started < 2.5
    assert "did not answer within 1 s" in str(error)
    assert error.endpoint == endpoint.base_url


@pytest.mark.parametrize(
    "events, what",
    [
        (['{"choices": [{"delta": {"content": "x"'], "not JSON"),
        (["[1, 2]"], "JSON list"),
        ([{"object": "list", "data": []}], "no choices"),
        ([{"choices": ["x"]}], "choice is not an object"),
        ([{"choices": [{"delta": {"content": 7}}]}], "content is a int"),
    ],
    ids=["truncated-json", "list", "no-choices", "choice-string", "content-int"],
)
def test_malformed_chunk_is_malformed(endpoint, events, what):
    endpoint.reply = sse_reply(chunk("ok"), *events, "[DONE]")
    received: list[str] = []
    error = fail_with(OpenAIChatClient(endpoint.base_url, "m"), MALFORMED, received)
    assert received == ["ok"]
    assert what in str(error) and "model.base_url" in str(error)


@pytest.mark.parametrize(
    "body, content_type, what",
    [
        (b"hello, this is not an event stream\n", "text/plain", "'hello, this is not"),
        (b"<html>proxy login</html>", "text/html", "'<html>proxy login</html>'"),
        (b'{"error": "streaming is disabled"}', "application/json", "streaming is disabled"),
        (json.dumps({"choices": [{"message": {"content": "hi"}}]}).encode(), "application/json", "choices"),
        (b"", "text/event-stream", "after 0 characters"),
    ],
    ids=["garbage", "html", "json-error", "non-streaming-reply", "empty"],
)
def test_body_that_is_not_a_stream_is_malformed(endpoint, body, content_type, what):
    endpoint.reply = lambda h: send(h, 200, body, content_type)
    error = fail_with(OpenAIChatClient(endpoint.base_url, "m"), MALFORMED)
    assert what in str(error)


def test_cancel_during_keepalives(endpoint):
    """Prompt processing: the server sends only keep-alive comments; cancel still works."""

    def prefill(handler) -> None:
        start_stream(handler)
        while not endpoint.release.wait(0.05):
            handler.wfile.write(b": keepalive\n\n")
            handler.wfile.flush()

    endpoint.reply = prefill
    cancel = threading.Event()
    threading.Timer(0.3, cancel.set).start()
    started = time.monotonic()
    error = fail_with(OpenAIChatClient(endpoint.base_url, "m"), CANCELLED, cancel=cancel)
    assert time.monotonic() - started < 1
    assert "cancelled after 0 characters" in str(error)


@pytest.mark.timeout(60)
@pytest.mark.parametrize("headers", [False, True], ids=["no-headers", "headers-then-nothing"])
def test_cancel_while_the_server_sends_nothing(endpoint, headers):
    """Esc stops a reply at once, not at the next byte or the 30 s timeout."""

    def silent(handler) -> None:
        if headers:
            start_stream(handler)
        endpoint.release.wait(30)  # released at teardown

    endpoint.reply = silent
    cancel = threading.Event()
    timer = threading.Timer(0.3, cancel.set)
    timer.start()
    started = time.monotonic()
    error = fail_with(OpenAIChatClient(endpoint.base_url, "m", timeout=30), CANCELLED, cancel=cancel)
    timer.join()
    assert time.monotonic() - started < 1.5
    assert "cancelled after 0 characters" in str(error)


@pytest.mark.timeout(60)
def test_cancel_while_a_line_drips_in():
    """A server that sends a byte every 0.5 s never completes a line for long: the cancel
    is noticed between bytes, the connection is closed and no thread is left behind."""
    with DripServer("sse") as server:
        threads_before = set(threading.enumerate())
        cancel = threading.Event()
        timer = threading.Timer(1.0, cancel.set)
        timer.start()
        started = time.monotonic()
        fail_with(OpenAIChatClient(server.base_url, "m", timeout=30), CANCELLED, cancel=cancel)
        timer.join()
        assert time.monotonic() - started < 1.0 + 2
        assert not server.finished.is_set()
        assert server.hung_up.wait(5) and server.handled.wait(5)
        assert wait_until(lambda: set(threading.enumerate()) == threads_before), (
            set(threading.enumerate()) - threads_before
        )


@pytest.mark.timeout(60)
def test_a_dripping_reply_is_not_cut_by_the_idle_timeout():
    """The chat's timeout is the longest silence, not a limit on a reply's length: a
    reply whose bytes keep coming is read whole even when it takes longer than that."""
    with DripServer("sse", interval=0.01, drip_s=2.5) as server:
        started = time.monotonic()
        deltas, done = drain(OpenAIChatClient(server.base_url, "m", timeout=1))
    assert time.monotonic() - started > 1.5
    assert done.text.startswith("word word") and server.finished.is_set()


def test_cancel_before_the_call_sends_nothing(endpoint):
    cancel = threading.Event()
    cancel.set()
    fail_with(OpenAIChatClient(endpoint.base_url, "m"), CANCELLED, cancel=cancel)
    assert endpoint.requests == []


def test_closing_the_stream_early_closes_the_connection(endpoint):
    hung_up = threading.Event()

    def endless(handler) -> None:
        start_stream(handler)
        try:
            while not endpoint.release.is_set():
                event(handler, chunk("x"))
                time.sleep(0.01)
        except (BrokenPipeError, ConnectionResetError):
            hung_up.set()

    endpoint.reply = endless
    stream = OpenAIChatClient(endpoint.base_url, "m").stream(MESSAGES, max_tokens=16)
    assert isinstance(next(stream), ChatDelta)
    stream.close()
    assert hung_up.wait(2)


def test_collect_requires_exactly_one_done():
    done = ChatDone("ab", Usage(prompt_tokens=None, completion_tokens=None))
    assert collect([ChatDelta("a"), ChatDelta("b"), done]) is done
    with pytest.raises(ChatError) as info:
        collect([ChatDelta("a")], model_name="m")
    assert info.value.kind == MALFORMED
    with pytest.raises(ChatError):
        collect([done, done])


def test_lone_surrogates_in_a_streamed_reply_are_repaired_and_the_reply_stores(endpoint, tmp_path):
    from hermes_tui.core.transcript import Message
    from hermes_tui.store import Store

    # The server escapes each half of a pair in its own chunk, and sends one half alone.
    endpoint.reply = sse_reply(
        chunk(), '{"choices": [{"index": 0, "delta": {"content": "Tests pass \\ud83d"}}]}',
        '{"choices": [{"index": 0, "delta": {"content": "\\ude00 but \\ud800"}}]}',
        '{"choices": [{"index": 0, "delta": {"content": " is odd \\ud83d"}}]}',
        chunk(finish_reason="stop"), "[DONE]",
    )
    _, done = drain(OpenAIChatClient(endpoint.base_url, "m"))

    assert done.text == "Tests pass \U0001F600 but \ufffd is odd \ufffd"
    with Store(tmp_path / "state.db") as store:
        session = store.create_session("t")
        store.flush(session.id, [Message(role="user", content="Run the tests."),
                                 Message(role="assistant", content=done.text)])
        assert store.load_active(session.id)[-1].content == done.text


@pytest.mark.parametrize("data, problem", [
    ('{"choices": ' * 5000 + "null" + "}" * 5000, "too deeply nested"),
    ('{"choices": [{"index": 0, "delta": {"content": "hi"}}], "created": ' + "7" * 5000 + "}", "number too long"),
])
def test_an_unreadable_stream_chunk_is_malformed_in_one_line(endpoint, data, problem):
    endpoint.reply = sse_reply(chunk(), data, chunk(finish_reason="stop"), "[DONE]")
    error = fail_with(OpenAIChatClient(endpoint.base_url, "m"), MALFORMED)
    assert problem in str(error) and endpoint.base_url in str(error) and "\n" not in str(error)


def test_the_configured_temperature_is_sent_and_none_leaves_the_servers(scripted):
    from hermes_tui.config import Config
    from hermes_tui.providers.openai import make_chat_client

    server = scripted([{"text": ["a"], "finish_reason": "stop"}, {"text": ["b"], "finish_reason": "stop"}])
    for temperature in (0.2, None):
        config = Config().with_overrides({"model.provider": "openai-api", "model.model": "m",
                                          "model.base_url": server.base_url, "model.temperature": temperature})
        make_chat_client(config.model).complete([{"role": "user", "content": "hi"}], max_tokens=4)
    first, second = server.requests()
    assert first["temperature"] == 0.2 and "temperature" not in second
