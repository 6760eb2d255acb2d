"""Tool calls written as text: what is recovered as a call, and what stays an answer.

The recorded replies (tests/chat/fixtures/text_calls_*.json, from real models through
benchmarks/record_text_calls.py) are the forms seen in practice; the written ones below
are the other forms the module reads and the near-misses that must never run.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from hermes_tui.chat.text_tool_calls import (
    FUNCTION_PARAMETERS,
    FUNCTION_TAG,
    JSON,
    JSON_BLOCK,
    JSON_DOUBLED,
    TOOL_CALL_TAG,
    TOOLS_TAG,
    XML_FUNCTION,
    recover_calls,
)
from hermes_tui.tools.builtin import builtin_registry

TOOLS = builtin_registry().specs()
FIXTURES = sorted((Path(__file__).parent / "fixtures").glob("text_calls_*.json"))


def recorded() -> list:
    """Each recorded reply that carries a call as text and that a reader would run:
    (fixture, task, reply). Which they are is written in the fixture's "expect" field."""
    cases = []
    for path in FIXTURES:
        fixture = json.loads(path.read_text())
        for reply in fixture["replies"]:
            if reply.get("expect"):
                cases.append(pytest.param(fixture, reply, id=f"{fixture['model']}: {reply['task']}"))
    return cases


def arguments(call: dict) -> dict:
    return json.loads(call["function"]["arguments"])


@pytest.mark.parametrize(("fixture", "reply"), recorded())
def test_every_recorded_text_call_is_recovered(fixture, reply):
    expect = reply["expect"]
    recovered = recover_calls(reply["content"], TOOLS)
    if expect["form"] is None:  # recorded as a near-miss: the reply stays an answer
        assert recovered is None
        return
    assert recovered is not None, reply["content"]
    assert recovered.form == expect["form"]
    assert [c["function"]["name"] for c in recovered.calls] == expect["names"]
    for call in recovered.calls:
        assert call["type"] == "function" and call["id"].startswith("call_")
        assert isinstance(arguments(call), dict)  # arguments as JSON text, OpenAI's layout
    assert recovered.content == expect.get("content", "")


def test_the_recordings_hold_text_calls_and_near_misses():
    forms = {reply["expect"]["form"] for path in FIXTURES
             for reply in json.loads(path.read_text())["replies"] if reply.get("expect")}
    assert JSON_BLOCK in forms
    assert None in forms  # at least one recorded reply that must not run


# --- every form the module reads ----------------------------------------------------------

READ = {"name": "read_file", "arguments": {"path": "setup.cfg"}}


@pytest.mark.parametrize(("text", "form"), [
    (json.dumps(READ), JSON),
    ("```\n" + json.dumps(READ, indent=2) + "\n```", JSON_BLOCK),
    ("```json\n" + json.dumps(READ) + "\n```", JSON_BLOCK),
    ("<tool_call>\n" + json.dumps(READ) + "\n</tool_call>", TOOL_CALL_TAG),
    ("<tool_call>\n" + json.dumps(READ), TOOL_CALL_TAG),  # the end tag is a stop token some servers drop
    ('<function=read_file>{"path": "setup.cfg"}</function>', FUNCTION_TAG),
    ("<tool_call>\n<function=read_file>\n<parameter=path>\nsetup.cfg\n</parameter>\n</function>\n</tool_call>",
     FUNCTION_PARAMETERS),
    ("{" + json.dumps(READ) + "}", JSON_DOUBLED),
    ("{{ " + json.dumps(READ)[1:-1] + " }}", JSON_DOUBLED),
    ("{" + json.dumps(READ) + "\n", JSON_DOUBLED),  # the outer brace missing at the end
    ("<tools>\n" + json.dumps(READ) + "\n</tools>", TOOLS_TAG),
    ("<tools>\n" + json.dumps(READ), TOOLS_TAG),
    ('{"name": "read_file", "parameters": {"path": "setup.cfg"}}', JSON),  # Llama's key
    ('{"name": "read_file", "arguments": "{\\"path\\": \\"setup.cfg\\"}"}', JSON),  # arguments as JSON text
    ("<tools>\n  <function>\n    <name>read_file</name>\n    <arguments>\n      <path>setup.cfg</path>\n"
     "    </arguments>\n  </function>\n</tools>", XML_FUNCTION),
    ("<tool_call><function><name>read_file</name><arguments><path>setup.cfg</path></arguments></function></tool_call>",
     XML_FUNCTION),
    ("<tools></tools>\n```json\n" + json.dumps(READ) + "\n```", JSON_BLOCK),  # an empty pair holds nothing
])
def test_each_form_is_read(text, form):
    recovered = recover_calls(text, TOOLS)
    assert recovered is not None and recovered.form == form
    assert [(c["function"]["name"], arguments(c)) for c in recovered.calls] == [("read_file", {"path": "setup.cfg"})]
    assert recovered.content == ""


def test_parameters_take_their_type_from_the_schema():
    text = ("<function=read_file><parameter=path>42</parameter><parameter=offset>10</parameter>"
            "<parameter=limit>\n5\n</parameter></function>")
    recovered = recover_calls(text, TOOLS)
    assert recovered is not None
    assert arguments(recovered.calls[0]) == {"path": "42", "offset": 10, "limit": 5}


def test_a_list_of_calls_and_several_tags_run_in_order():
    listed = json.dumps([READ, {"name": "grep", "arguments": {"pattern": "class Cart"}}])
    recovered = recover_calls(listed, TOOLS)
    assert recovered is not None and [c["function"]["name"] for c in recovered.calls] == ["read_file", "grep"]
    tags = f"<tool_call>{json.dumps(READ)}</tool_call>\n<tool_call>{json.dumps(READ)}</tool_call>"
    recovered = recover_calls(tags, TOOLS)
    assert recovered is not None and len(recovered.calls) == 2
    assert recovered.calls[0]["id"] != recovered.calls[1]["id"]


def test_calls_one_per_line_run_in_order_and_a_broken_one_after_them_never_runs():
    grep = {"name": "grep", "arguments": {"pattern": "class Cart"}}
    lines = json.dumps(READ) + "\n" + json.dumps(grep) + "\n\n  " + json.dumps(READ)
    recovered = recover_calls(lines, TOOLS)
    assert recovered is not None and recovered.form == "json"
    assert [c["function"]["name"] for c in recovered.calls] == ["read_file", "grep", "read_file"]
    assert recovered.content == ""
    broken = '{"name": "write_file", "arguments": {"path": "a.py", "content": "x = 1"}'  # one brace short
    recovered = recover_calls(json.dumps(READ) + "\n" + broken, TOOLS)
    assert recovered is not None and [c["function"]["name"] for c in recovered.calls] == ["read_file"]
    assert recovered.content == broken


def test_short_prose_around_the_call_is_kept_as_the_content():
    text = "I'll read the config first.\n\n```json\n" + json.dumps(READ) + "\n```\n\nThis shows its settings."
    recovered = recover_calls(text, TOOLS)
    assert recovered is not None
    assert recovered.content == "I'll read the config first.\n\nThis shows its settings."


# --- near-misses: none of these runs ------------------------------------------------------

EXPLANATION = (
    "The read_file tool reads a text file from the workspace and returns its lines, numbered. "
    "You give it the path relative to the workspace, and for a long file an offset and a limit.\n\n"
    "For example, to read the project's configuration you would write:\n\n"
    "```json\n" + json.dumps(READ, indent=2) + "\n```\n\n"
    "The result starts with line 1. To read the next part of a long file, call it again with "
    "offset set to the first line you have not seen yet.\n"
)


@pytest.mark.parametrize("text", [
    pytest.param(EXPLANATION, id="a JSON example inside an explanation"),
    pytest.param("For example:\n```json\n" + json.dumps(READ) + "\n```", id="short prose calling it an example"),
    pytest.param("Use it as in this sample:\n" + json.dumps(READ), id="a sample"),
    pytest.param("Here is the call.\n" + "\n".join(f"Line {n} of the plan." for n in range(4)) + "\n"
                 + json.dumps(READ), id="more than three lines of prose"),
    pytest.param("Here is how:\n```python\nopen('setup.cfg').read()\n```\n```json\n" + json.dumps(READ) + "\n```",
                 id="beside a code block that is not a call"),
    pytest.param(json.dumps({"name": "delete_everything", "arguments": {}}), id="a tool not offered"),
    pytest.param(json.dumps({"name": "read_file", "arguments": {"file": "setup.cfg"}}), id="an unknown key"),
    pytest.param(json.dumps({"name": "read_file", "arguments": {}}), id="a required key missing"),
    pytest.param(json.dumps({"name": "read_file", "arguments": {"path": 7}}), id="a wrong type"),
    pytest.param(json.dumps({"name": "read_file", "arguments": {"path": "a", "offset": -1}}), id="out of bounds"),
    pytest.param(json.dumps({"name": "read_file", "arguments": ["setup.cfg"]}), id="arguments not an object"),
    pytest.param(json.dumps({"name": "read_file"}), id="no arguments"),
    pytest.param(json.dumps({"name": "read_file", "arguments": {"path": "a"}, "why": "x"}), id="more than a call"),
    pytest.param('```json\n{"name": "read_file", "arguments": {"path": "setup.cfg"\n```', id="partial JSON"),
    pytest.param('{"name": "read_file", "arguments": {"path": "setup.cfg"}', id="unclosed bare JSON"),
    pytest.param("<tool_call>\n{'name': 'read_file'}\n</tool_call>", id="a tag that holds no JSON"),
    pytest.param(f"<tool_call>{json.dumps(READ)}</tool_call><tool_call>nope</tool_call>", id="one bad tag of two"),
    pytest.param(json.dumps([READ, {"name": "rm", "arguments": {}}]), id="one call of a list not offered"),
    pytest.param(json.dumps(READ) + "\n" + json.dumps({"name": "rm", "arguments": {}}), id="one call of two lines not offered"),
    pytest.param(json.dumps(READ) + "\n" + json.dumps({"name": "read_file", "arguments": {"path": 7}}),
                 id="one call of two lines whose arguments do not validate"),
    pytest.param("<function=read_file><parameter=path>a</parameter>and some words</function>", id="text between parameters"),
    pytest.param('Set `{"name": "read_file", "arguments": {"path": "x"}}` in your config.', id="inline, mid-sentence"),
    pytest.param('The answer is {"a": 1}.', id="JSON that is no call"),
    pytest.param(json.dumps({"name": "read_file", "function": "read_file", "arguments": {"path": "a"}}),
                 id="the name given twice"),
    pytest.param("<tools></tools>", id="an empty tools tag"),
    pytest.param('<tools>\n{"type": "function", "function": {"name": "grep", "description": "Search", "parameters": {}}}'
                 "\n</tools>", id="a tool's definition echoed in a tools tag"),
    pytest.param("{" + json.dumps(READ) + " and more}", id="doubled braces around more than a call"),
    pytest.param('{{"name": "src/InventoryLedger.java", "arguments": null}}', id="doubled braces naming a file"),
    pytest.param("{" + json.dumps(READ) + "\nThat reads it.", id="doubled braces, unclosed, words after"),
    pytest.param("<tools>\n  <function>\n    <name>glob</name>\n    <description>Find files</description>\n"
                 "    <parameters><type>object</type></parameters>\n  </function>\n</tools>",
                 id="a tool's definition echoed as XML"),
    pytest.param("<tools><function><name>read_file</name><arguments><path>a</path>more words</arguments>"
                 "</function></tools>", id="text between XML arguments"),
    pytest.param("<tools><function><name>read_file</name><arguments><file>a</file></arguments></function></tools>",
                 id="an XML argument the tool does not have"),
    pytest.param("<tools></tools><tool_call></tool_call>", id="empty tags only"),
])
def test_near_misses_stay_answers(text):
    assert recover_calls(text, TOOLS) is None


def test_nothing_is_recovered_without_tools_offered():
    assert recover_calls(json.dumps(READ), None) is None
    assert recover_calls(json.dumps(READ), []) is None


def test_only_the_tools_offered_in_that_request_count():
    only_grep = [spec for spec in TOOLS if spec["function"]["name"] == "grep"]
    assert recover_calls(json.dumps(READ), only_grep) is None
