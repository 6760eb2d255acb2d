"""The schema a first step's reply is held to (``chat.call_schema``): one call to an offered
tool, its arguments the required ones and the optional strings, and every reply it allows is a
call ``chat.text_tool_calls`` reads."""

from __future__ import annotations

import json

from hermes_tui.chat.call_schema import SCHEMA_NAME, call_schema, response_format
from hermes_tui.chat.text_tool_calls import JSON, recover_calls
from hermes_tui.tools.builtin import builtin_registry

TOOLS = builtin_registry().specs()


def options() -> dict[str, dict]:
    return {option["properties"]["name"]["const"]: option for option in call_schema(TOOLS)["anyOf"]}


def test_one_option_per_offered_tool_named_by_a_constant():
    assert sorted(options()) == sorted(spec["function"]["name"] for spec in TOOLS)
    for option in options().values():
        assert option["required"] == ["name", "arguments"] and option["additionalProperties"] is False


def test_arguments_keep_the_required_and_the_optional_strings_only():
    read = options()["read_file"]["properties"]["arguments"]
    assert read["properties"].keys() == {"path"}  # offset and limit (numbers) are left out
    assert read["required"] == ["path"] and read["additionalProperties"] is False
    grep = options()["grep"]["properties"]["arguments"]
    assert grep["properties"].keys() == {"pattern", "path", "glob"}  # not ignore_case, max_results
    edit = options()["edit_file"]["properties"]["arguments"]
    assert edit["properties"].keys() == {"path", "old_string", "new_string"}  # not replace_all
    assert set(edit["required"]) == {"path", "old_string", "new_string"}


def test_the_tools_own_specs_are_not_changed():
    before = json.dumps(TOOLS, sort_keys=True)
    call_schema(TOOLS)["anyOf"][0]["properties"]["arguments"]["properties"]["path"]["x"] = 1
    assert json.dumps(TOOLS, sort_keys=True) == before


def test_a_reply_the_schema_allows_is_read_as_a_call():
    # What a server held to the schema sends back: the call as JSON text, as recorded from
    # Qwen2.5-Coder-1.5B through llama-server (pretty-printed).
    reply = '{\n  "name": "grep",\n  "arguments": {\n    "pattern": "InventoryLedger"\n  }\n}'
    recovered = recover_calls(reply, TOOLS)
    assert recovered is not None and recovered.form == JSON
    assert [c["function"]["name"] for c in recovered.calls] == ["grep"]


def test_the_response_format_names_the_schema():
    fmt = response_format(TOOLS)
    assert fmt["type"] == "json_schema"
    assert fmt["json_schema"]["name"] == SCHEMA_NAME and fmt["json_schema"]["schema"] == call_schema(TOOLS)


def test_a_spec_without_a_name_or_parameters_is_handled():
    schema = call_schema([{"type": "function", "function": {"name": "ping"}}, {"type": "function", "function": {}}])
    (option,) = schema["anyOf"]
    assert option["properties"]["arguments"] == {"type": "object"}
