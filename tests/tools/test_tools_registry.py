"""The registry turns every call into exactly one result: bad JSON, unknown tools,
schema mismatches, tools that raise or are stopped, and output over the cap."""

from __future__ import annotations

import threading
import time

import pytest

from hermes_tui.tools import (
    Status,
    Tool,
    ToolContext,
    ToolError,
    ToolKind,
    ToolRegistry,
    ToolResult,
    Workspace,
    builtin_registry,
    builtin_tools,
)


class Boom(Tool):
    name = "boom"
    description = "Raises."
    kind = ToolKind.READ
    parameters = {"type": "object", "properties": {}, "additionalProperties": False}

    def run(self, arguments, context):
        raise RuntimeError("no such thing\nsecond line")


class Expected(Boom):
    name = "expected"

    def run(self, arguments, context):
        raise ToolError("the file changed; read it again")


class Wait(Boom):
    name = "wait"

    def __init__(self) -> None:
        self.started = threading.Event()

    def run(self, arguments, context):
        self.started.set()
        while True:
            context.check_cancel()
            time.sleep(0.01)


class Loud(Boom):
    name = "loud"

    def run(self, arguments, context):
        return ToolResult(content="h" * 50_000 + "TAIL")


class Refs(Tool):
    """An MCP-style schema: $defs and $ref, oneOf, nested objects."""

    name = "mcp__notes__add"
    description = "Add a note."
    kind = ToolKind.EXTERNAL
    parameters = {
        "type": "object",
        "$defs": {"tag": {"type": "string", "pattern": "^[a-z]+$"}},
        "properties": {
            "note": {"oneOf": [{"type": "string"}, {"type": "object", "required": ["text"],
                                                     "properties": {"text": {"type": "string"}}}]},
            "tags": {"type": "array", "items": {"$ref": "#/$defs/tag"}},
        },
        "required": ["note"],
    }

    def run(self, arguments, context):
        return ToolResult(content=f"added {arguments['note']!r}")


@pytest.fixture
def ctx(tmp_path) -> ToolContext:
    return ToolContext(workspace=Workspace(tmp_path))


def test_specs_are_openai_function_tools():
    specs = builtin_registry().specs()
    assert [s["function"]["name"] for s in specs] == [
        "read_file", "list_dir", "glob", "grep", "edit_file", "write_file", "run_shell"]
    for spec in specs:
        assert spec["type"] == "function"
        assert set(spec["function"]) == {"name", "description", "parameters"}
        assert spec["function"]["parameters"]["type"] == "object"


def test_invalid_json_is_an_error_result(ctx):
    result = builtin_registry().dispatch("read_file", '{"path": "a.txt"', ctx)
    assert result.is_error and result.status is Status.ERROR
    assert result.content.startswith("arguments for read_file are not valid JSON (")
    assert "line 1 column" in result.content


def test_json_that_is_not_an_object_is_an_error_result(ctx):
    result = builtin_registry().dispatch("read_file", '["a.txt"]', ctx)
    assert result.content == "arguments for read_file must be a JSON object, not list"


@pytest.mark.parametrize("arguments,message", [
    ('{}', "invalid arguments for read_file: 'path' is a required property"),
    ('{"path": 7}', "invalid arguments for read_file at 'path': 7 is not of type 'string'"),
    ('{"path": "a", "offset": -1}', "invalid arguments for read_file at 'offset': -1 is less than the minimum of 0"),
    ('{"path": "a", "colour": "red"}', "invalid arguments for read_file: Additional properties are not allowed ('colour' was unexpected)"),
])
def test_schema_mismatch_is_an_error_result_that_says_what_to_fix(ctx, arguments, message):
    result = builtin_registry().dispatch("read_file", arguments, ctx)
    assert result.is_error and result.content == message


def test_unknown_tool_lists_the_tools(ctx):
    result = builtin_registry().dispatch("delete_everything", "{}", ctx)
    assert result.is_error
    assert result.content.startswith("unknown tool 'delete_everything'; available tools: read_file, ")


def test_empty_arguments_mean_an_empty_object(ctx):
    assert not builtin_registry().dispatch("list_dir", "", ctx).is_error
    assert not builtin_registry().dispatch("list_dir", None, ctx).is_error


def test_a_tool_that_raises_gives_its_one_line_message(ctx):
    result = ToolRegistry([Boom()]).dispatch("boom", "{}", ctx)
    assert result.is_error and result.status is Status.ERROR
    assert result.content == "boom failed: RuntimeError: no such thing second line"
    assert result.duration_ms is not None


def test_an_expected_failure_is_its_message_alone(ctx):
    result = ToolRegistry([Expected()]).dispatch("expected", "{}", ctx)
    assert result.content == "the file changed; read it again"


def test_stop_during_a_call_gives_a_stopped_result(ctx):
    tool = Wait()
    box: dict = {}
    worker = threading.Thread(target=lambda: box.update(r=ToolRegistry([tool]).dispatch("wait", "{}", ctx)))
    worker.start()
    assert tool.started.wait(10)
    ctx.cancel.set()
    worker.join(10)
    assert not worker.is_alive()
    assert box["r"].status is Status.STOPPED and box["r"].content == "[stopped by the user]"


def test_content_over_the_cap_keeps_head_and_tail(tmp_path):
    ctx = ToolContext(workspace=Workspace(tmp_path), max_output_bytes=1000)
    result = ToolRegistry([Loud()]).dispatch("loud", "{}", ctx)
    assert result.truncated and len(result.content.encode()) <= 1000
    head, marker, tail = result.content.split("\n")
    assert head == "h" * len(head) and tail.endswith("hTAIL")
    assert len(head) > 400 and len(tail) > 400
    assert marker == f"[… {50_004 - len(head) - len(tail)} bytes omitted …]"


def test_mcp_style_schemas_are_checked_in_full(ctx):
    registry = ToolRegistry([Refs()])
    ok = registry.dispatch("mcp__notes__add", '{"note": {"text": "hi"}, "tags": ["abc"]}', ctx)
    assert ok.content == "added {'text': 'hi'}"
    bad_ref = registry.dispatch("mcp__notes__add", '{"note": "hi", "tags": ["ABC"]}', ctx)
    assert bad_ref.content == "invalid arguments for mcp__notes__add at 'tags/0': 'ABC' does not match '^[a-z]+$'"
    bad_one_of = registry.dispatch("mcp__notes__add", '{"note": 5}', ctx)
    assert bad_one_of.is_error and bad_one_of.content.startswith("invalid arguments for mcp__notes__add at 'note'")


def test_registration_refuses_bad_names_duplicates_and_bad_schemas():
    registry = ToolRegistry([Boom()])
    with pytest.raises(ValueError, match="already registered"):
        registry.register(Boom())

    class BadName(Boom):
        name = "has space"

    class BadSchema(Boom):
        name = "bad_schema"
        parameters = {"type": "object", "properties": {"x": {"type": "strin"}}}

    class NotObject(Boom):
        name = "not_object"
        parameters = {"type": "string"}

    with pytest.raises(ValueError, match="use 1-64 letters"):
        registry.register(BadName())
    with pytest.raises(ValueError, match="invalid parameters schema"):
        registry.register(BadSchema())
    with pytest.raises(ValueError, match="must be an object schema"):
        registry.register(NotObject())
    assert [t.name for t in registry] == ["boom"]


def test_prepare_then_run_is_how_the_loop_approves_in_between(ctx, tmp_path):
    (tmp_path / "a.txt").write_text("hi\n")
    registry = builtin_registry()
    call = registry.prepare("read_file", '{"path": "a.txt"}')
    assert not isinstance(call, ToolResult)
    assert call.name == "read_file" and call.arguments == {"path": "a.txt"}
    assert registry.run(call, ctx).content == "     1\thi\n"


def test_preview_gives_the_diff_or_the_error_to_return_instead_of_asking(ctx, tmp_path):
    (tmp_path / "m.py").write_text("a = 1\n")
    registry = builtin_registry()
    good = registry.prepare("edit_file", '{"path": "m.py", "old_string": "a = 1", "new_string": "a = 2"}')
    assert registry.preview(good, ctx) == "--- a/m.py\n+++ b/m.py\n@@ -1 +1 @@\n-a = 1\n+a = 2\n"
    stale = registry.prepare("edit_file", '{"path": "m.py", "old_string": "b", "new_string": "c"}')
    result = registry.preview(stale, ctx)
    assert isinstance(result, ToolResult) and result.is_error and "not found" in result.content
    assert registry.preview(registry.prepare("read_file", '{"path": "m.py"}'), ctx) is None


def test_builtin_schemas_are_valid_json_schemas():
    # builtin_registry trusts these schemas (it does not check them at every start): this is their check.
    import jsonschema

    for tool in builtin_tools():
        jsonschema.validators.validator_for(tool.parameters).check_schema(tool.parameters)
        assert tool.parameters["type"] == "object"


def test_a_bad_schema_is_refused_at_registration_unless_marked_checked():
    from hermes_tui.tools.files import ReadFile

    class Bad(ReadFile):
        name = "bad_schema"
        parameters = {"type": "object", "properties": {"x": {"type": "strin"}}}

    with pytest.raises(ValueError, match="invalid parameters schema"):
        ToolRegistry([Bad()])
    assert ToolRegistry([Bad()], schemas_checked=True).get("bad_schema") is not None
