"""Tool calls through the OpenAI-compatible chat client: a scripted server in a
subprocess (tests/support/scripted_openai_server.py) driven through the real openai SDK, and
the real ``mlx_lm.server`` given tools for a model without a tool template."""

from __future__ import annotations

import json

import pytest

from hermes_tui.chat.call_schema import response_format
from hermes_tui.chat.client import (
    HTTP_4XX,
    MALFORMED,
    NO_TOOLS,
    ChatDelta,
    ChatDone,
    ChatError,
    ChatToolDelta,
)
from hermes_tui.providers.openai.chat import OpenAIChatClient
from hermes_tui.tools.builtin import builtin_tools
from hermes_tui.tools.registry import ToolRegistry

START_TIMEOUT_S = 30.0

MESSAGES = [
    {"role": "system", "content": "You work in a repository."},
    {"role": "user", "content": "What is in README.md?"},
]


def tool_specs() -> list[dict]:
    return ToolRegistry(builtin_tools()).specs()


def drain(client: OpenAIChatClient, **kwargs) -> tuple[list, ChatDone]:
    events = list(client.stream(MESSAGES, **{"max_tokens": 64, **kwargs}))
    assert isinstance(events[-1], ChatDone)
    assert not any(isinstance(e, ChatDone) for e in events[:-1])
    return events[:-1], events[-1]


def test_tools_are_sent_and_streamed_calls_are_assembled(scripted):
    server = scripted([{
        "text": ["Let me look."],
        "tool_calls": [
            {"id": "call_a", "name": "read_file", "arguments": ['{"pa', 'th": "READ', 'ME.md"}']},
            {"id": "call_b", "name": "grep", "arguments": ['{"pattern": ', '"TODO"}']},
        ],
        "finish_reason": "tool_calls",
    }])
    client = OpenAIChatClient(server.base_url, "scripted")
    assert client.supports_tools is True
    specs = tool_specs()

    events, done = drain(client, tools=specs)

    assert [e.text for e in events if isinstance(e, ChatDelta)] == ["Let me look."]
    pieces = [e for e in events if isinstance(e, ChatToolDelta)]
    # the first piece of each call brings id and name; the rest are arguments pieces
    assert pieces[0] == ChatToolDelta(0, "call_a", "read_file", "")
    assert pieces[1] == ChatToolDelta(0, None, None, '{"pa')
    assert [p.index for p in pieces] == [0, 0, 0, 0, 1, 1, 1]
    assert "".join(p.arguments for p in pieces if p.index == 1) == '{"pattern": "TODO"}'
    assert done.text == "Let me look."
    assert done.usage.finish_reason == "tool_calls"
    assert done.tool_calls == [
        {"id": "call_a", "type": "function", "function": {"name": "read_file", "arguments": '{"path": "README.md"}'}},
        {"id": "call_b", "type": "function", "function": {"name": "grep", "arguments": '{"pattern": "TODO"}'}},
    ]
    (request,) = server.requests()
    assert request["tools"] == specs
    assert {t["function"]["name"] for t in request["tools"]} >= {"read_file", "grep", "run_shell"}


def test_interleaved_calls_without_ids_get_unique_ids(scripted):
    server = scripted([{
        "interleave": True,
        "tool_calls": [
            {"id": None, "name": "list_dir", "arguments": ['{"path":', ' "."}']},
            {"id": None, "name": "read_file", "arguments": ['{"path":', ' "a.txt"}']},
            {"id": None, "name": "read_file", "arguments": ['{"path":', ' "b.txt"}']},
        ],
        "finish_reason": "tool_calls",
    }])
    client = OpenAIChatClient(server.base_url, "scripted")

    events, done = drain(client, tools=tool_specs())

    assert [e.index for e in events if isinstance(e, ChatToolDelta)] == [0, 1, 2] * 3
    calls = done.tool_calls
    assert [c["function"]["name"] for c in calls] == ["list_dir", "read_file", "read_file"]
    assert [json.loads(c["function"]["arguments"]) for c in calls] == [
        {"path": "."}, {"path": "a.txt"}, {"path": "b.txt"}]
    ids = [c["id"] for c in calls]
    assert all(isinstance(i, str) and i for i in ids) and len(set(ids)) == 3
    assert done.text == ""


def test_pieces_without_an_index_follow_the_ids(scripted):
    # Some servers send no index: a piece with a new id starts a call, others continue it.
    server = scripted([{
        "tool_calls": [
            {"id": "c1", "index": None, "name": "read_file", "arguments": ['{"path": ', '"a.txt"}']},
            {"id": "c2", "index": None, "name": "read_file", "arguments": ['{"path": "b.txt"}']},
        ],
        "finish_reason": "tool_calls",
    }])
    events, done = drain(OpenAIChatClient(server.base_url, "scripted"), tools=tool_specs())
    assert [e.index for e in events if isinstance(e, ChatToolDelta)] == [0, 0, 0, 1, 1]
    assert [(c["id"], json.loads(c["function"]["arguments"])) for c in done.tool_calls] == [
        ("c1", {"path": "a.txt"}), ("c2", {"path": "b.txt"})]


def test_server_indexes_need_not_start_at_zero(scripted):
    server = scripted([{
        "tool_calls": [
            {"id": "c1", "index": 3, "name": "list_dir", "arguments": ["{}"]},
            {"id": "c2", "index": 7, "name": "glob", "arguments": ['{"pattern": "*.py"}']},
        ],
        "finish_reason": "tool_calls",
    }])
    events, done = drain(OpenAIChatClient(server.base_url, "scripted"), tools=tool_specs())
    assert {e.index for e in events if isinstance(e, ChatToolDelta)} == {0, 1}
    assert [c["function"]["name"] for c in done.tool_calls] == ["list_dir", "glob"]


def test_malformed_arguments_come_back_raw(scripted):
    server = scripted([{
        "tool_calls": [
            {"id": "call_x", "name": "read_file", "arguments": ['{"path": "README.md"', ", oops"]},
            {"id": "call_y", "name": "list_dir", "arguments": []},
        ],
        "finish_reason": "tool_calls",
    }])
    client = OpenAIChatClient(server.base_url, "scripted")

    _, done = drain(client, tools=tool_specs())

    first, second = done.tool_calls
    assert first["function"]["arguments"] == '{"path": "README.md", oops'
    with pytest.raises(json.JSONDecodeError):
        json.loads(first["function"]["arguments"])
    assert second["function"]["arguments"] == "{}"  # a call sent without arguments
    # the registry turns the raw text into an error result the model can correct
    result = ToolRegistry(builtin_tools()).prepare("read_file", first["function"]["arguments"])
    assert "not valid JSON" in result.content


def test_calls_ended_with_stop_end_with_tool_calls(scripted):
    server = scripted([{
        "tool_calls": [{"id": "c1", "name": "list_dir", "arguments": ["{}"]}],
        "finish_reason": "stop",
    }])
    _, done = drain(OpenAIChatClient(server.base_url, "scripted"), tools=tool_specs())
    assert done.usage.finish_reason == "tool_calls"
    assert [c["id"] for c in done.tool_calls] == ["c1"]


def test_text_reply_has_no_calls_and_no_tools_key_without_tools(scripted):
    server = scripted([{"text": ["Hello", "."], "finish_reason": "stop"}])
    client = OpenAIChatClient(server.base_url, "scripted")

    _, done = drain(client)
    _, done_empty = drain(client, tools=[])

    for reply in (done, done_empty):
        assert (reply.text, reply.tool_calls, reply.usage.finish_reason) == ("Hello.", None, "stop")
    assert ["tools" in body for body in server.requests()] == [False, False]


def test_history_with_calls_and_results_is_sent_as_it_is(scripted):
    server = scripted([{"text": ["It says hello."], "finish_reason": "stop"}])
    history = MESSAGES + [
        {"role": "assistant", "content": None, "tool_calls": [
            {"id": "call_a", "type": "function", "function": {"name": "read_file", "arguments": '{"path": "README.md"}'}}]},
        {"role": "tool", "tool_call_id": "call_a", "content": "1\thello"},
    ]
    client = OpenAIChatClient(server.base_url, "scripted")

    done = client.complete(history, tools=tool_specs())

    assert done.text == "It says hello." and done.tool_calls is None
    (request,) = server.requests()
    assert request["messages"] == history


@pytest.mark.parametrize("status, error", [
    (400, "tools param requires --jinja flag"),  # llama-server
    (400, "registry.ollama.ai/library/gemma:2b does not support tools"),  # Ollama
    (400, '"auto" tool choice requires --enable-auto-tool-choice and --tool-call-parser to be set'),  # vLLM
    (422, "Tool use is not supported for this model"),
])
def test_server_refusing_tools_is_no_tools_then_runs_without(scripted, status, error):
    server = scripted([
        {"status": status, "error": error},
        {"text": ["Plain answer."], "finish_reason": "stop"},
    ])
    client = OpenAIChatClient(server.base_url, "scripted")

    with pytest.raises(ChatError) as info:
        drain(client, tools=tool_specs())

    assert info.value.kind == NO_TOOLS
    message = str(info.value)
    assert "does not accept tools" in message and server.base_url in message
    assert error in message and f"HTTP {status}" in message and "\n" not in message
    assert client.supports_tools is False
    # the same call again: the tools are left out and the reply comes
    _, done = drain(client, tools=tool_specs())
    assert done.text == "Plain answer."
    assert ["tools" in body for body in server.requests()] == [True, False]


def test_other_4xx_with_tools_is_not_no_tools(scripted):
    server = scripted([{"status": 401, "error": "tools require a valid api key"},
                       {"status": 400, "error": "max_tokens is too large"},
                       {"status": 400, "error": "messages[3]: tool_call_id 'c9' has no matching tool call"}])
    client = OpenAIChatClient(server.base_url, "scripted")
    for _ in range(3):
        with pytest.raises(ChatError) as info:
            drain(client, tools=tool_specs())
        assert info.value.kind == HTTP_4XX, str(info.value)
    assert client.supports_tools is True


@pytest.mark.integration
def test_mlx_server_accepts_tools_for_a_model_without_a_tool_template(mlx_server):
    # The tiny model's template ignores tools: mlx_lm.server logs a warning and
    # answers with text, so the request is accepted and no call comes back.
    client = OpenAIChatClient(mlx_server.base_url, mlx_server.model, temperature=0)

    events, done = drain(client, max_tokens=8, tools=tool_specs())

    assert done.tool_calls is None
    assert (done.usage.completion_tokens, done.usage.finish_reason) == (8, "length")
    assert not any(isinstance(e, ChatToolDelta) for e in events)
    assert client.supports_tools is True
    assert "does not support tool calling" in mlx_server.log_path.read_text()


MALFORMED_HISTORY = MESSAGES + [
    {"role": "assistant", "content": None, "tool_calls": [
        {"id": "c1", "type": "function", "function": {"name": "read_file", "arguments": '{"path": "a", oops'}},
        {"id": "c2", "type": "function", "function": {"name": "list_dir", "arguments": '{"path": "."}'}},
    ]},
    {"role": "tool", "tool_call_id": "c1", "content": "arguments for read_file are not valid JSON"},
    {"role": "tool", "tool_call_id": "c2", "content": "a.txt"},
]


def test_history_call_with_arguments_that_are_not_json_goes_out_as_a_json_string(scripted):
    server = scripted([{"text": ["Retrying."], "finish_reason": "stop"}])
    client = OpenAIChatClient(server.base_url, "scripted")

    client.complete(MALFORMED_HISTORY, tools=tool_specs())

    (request,) = server.requests()
    sent = request["messages"][2]["tool_calls"]
    assert sent[0]["function"]["arguments"] == json.dumps('{"path": "a", oops')
    assert json.loads(sent[0]["function"]["arguments"]) == '{"path": "a", oops'  # the model's text, kept
    assert sent[1]["function"]["arguments"] == '{"path": "."}'  # valid JSON: as it was
    assert request["messages"][3:] == MALFORMED_HISTORY[3:]
    assert MALFORMED_HISTORY[2]["tool_calls"][0]["function"]["arguments"] == '{"path": "a", oops'  # not changed


@pytest.mark.integration
def test_mlx_server_accepts_a_history_call_whose_arguments_are_not_json(mlx_server):
    # mlx_lm.server parses every call's arguments in the history; text that is not
    # JSON made it reject the whole request (HTTP 404), so the turn could never go on.
    client = OpenAIChatClient(mlx_server.base_url, mlx_server.model, temperature=0)

    done = client.complete(MALFORMED_HISTORY, max_tokens=4, tools=tool_specs())

    assert (done.usage.completion_tokens, done.usage.finish_reason) == (4, "length")


def test_tool_calls_that_are_not_a_list_of_objects_are_malformed(scripted):
    bad = {"id": "x", "object": "chat.completion.chunk",
           "choices": [{"index": 0, "delta": {"tool_calls": "read_file"}, "finish_reason": None}]}
    server = scripted([{"raw": [bad]}])
    client = OpenAIChatClient(server.base_url, "scripted")
    with pytest.raises(ChatError) as info:
        drain(client, tools=tool_specs())
    assert info.value.kind == MALFORMED and "tool_calls" in str(info.value)


def test_history_arguments_nested_too_deep_go_out_as_a_string(scripted):
    # json.loads raises RecursionError here, not ValueError: checked with the bounded loader
    server = scripted([{"text": ["ok"], "finish_reason": "stop"}])
    deep = "[" * 100_000
    history = MESSAGES + [
        {"role": "assistant", "content": None, "tool_calls": [
            {"id": "c1", "type": "function", "function": {"name": "grep", "arguments": deep}}]},
        {"role": "tool", "tool_call_id": "c1", "content": "not valid JSON"},
    ]
    OpenAIChatClient(server.base_url, "scripted").complete(history, tools=tool_specs())
    (request,) = server.requests()
    assert json.loads(request["messages"][2]["tool_calls"][0]["function"]["arguments"]) == deep


def test_a_surrogate_pair_split_between_argument_pieces_is_rebuilt(scripted):
    server = scripted([{"raw": [
        '{"choices": [{"index": 0, "delta": {"tool_calls": [{"index": 0, "id": "c1", "type": "function", '
        '"function": {"name": "write_file", "arguments": "{\\"content\\": \\"\\ud83d"}}]}}]}',
        '{"choices": [{"index": 0, "delta": {"tool_calls": [{"index": 0, "function": {"arguments": '
        '"\\ude00 \\ud800\\"}"}}]}, "finish_reason": "tool_calls"}]}',
    ]}])
    _, done = drain(OpenAIChatClient(server.base_url, "scripted"), tools=tool_specs())
    arguments = done.tool_calls[0]["function"]["arguments"]
    assert json.loads(arguments) == {"content": "\U0001F600 \ufffd"}
    arguments.encode("utf-8")  # storable


def test_a_required_call_is_asked_for_as_a_json_schema_and_read_from_text(scripted):
    reply = '{"name": "read_file", "arguments": {"path": "README.md"}}'
    server = scripted([{"text": [reply], "finish_reason": "stop"}, {"text": ["Hello."], "finish_reason": "stop"}])
    client = OpenAIChatClient(server.base_url, "scripted")
    specs = tool_specs()

    _, done = drain(client, tools=specs, must_call=specs)
    drain(client, tools=specs)

    assert done.text == reply  # the agent reads the call (chat.text_tool_calls)
    first, second = server.requests()
    assert first["response_format"] == response_format(specs) and first["tools"] == specs
    assert "response_format" not in second


@pytest.mark.parametrize("status", [400, 500])
def test_a_server_refusing_the_schema_is_asked_again_without_it_and_not_again(scripted, status):
    server = scripted([
        {"status": status, "error": "response_format type json_schema is not supported"},
        {"text": ["Plain answer."], "finish_reason": "stop"},
        {"text": ["Again."], "finish_reason": "stop"},
    ])
    client = OpenAIChatClient(server.base_url, "scripted")

    _, done = drain(client, tools=tool_specs(), must_call=tool_specs())
    _, later = drain(client, tools=tool_specs(), must_call=tool_specs())

    assert (done.text, later.text) == ("Plain answer.", "Again.")
    assert ["response_format" in body for body in server.requests()] == [True, False, False]
    assert all(body["tools"] for body in server.requests()) and client.supports_tools is True
    assert client.supports_call_schema is False


def test_a_failure_that_is_not_the_schemas_is_raised_and_the_schema_kept(scripted):
    server = scripted([
        {"status": 404, "error": "model not found"},
        {"status": 404, "error": "model not found"},
    ])
    client = OpenAIChatClient(server.base_url, "scripted")

    with pytest.raises(ChatError) as info:
        drain(client, tools=tool_specs(), must_call=tool_specs())

    assert info.value.kind == HTTP_4XX and "model not found" in str(info.value)
    assert client.supports_call_schema is True


def test_a_server_refusing_tools_is_no_tools_even_when_a_call_is_required(scripted):
    server = scripted([{"status": 400, "error": "tools param requires --jinja flag"}])
    client = OpenAIChatClient(server.base_url, "scripted")

    with pytest.raises(ChatError) as info:
        drain(client, tools=tool_specs(), must_call=tool_specs())

    assert info.value.kind == NO_TOOLS and client.supports_tools is False
    assert len(server.requests()) == 1
