"""How benchmarks/bench_agent_tasks.py tells the app's failures from the model's.

An answer that is a call to an offered tool which did not run is the app's failure
(``unparsed call``) only where the app's own rule (chat.text_tool_calls) would have run it:
a line or two around the call. The answers here are Qwen2.5-Coder-0.5B's, from the
sessions a run of the benchmark kept.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]

# A read_file call, then the app's own note and a tool's description written back as JSON.
CALL_THEN_ECHOES = (
    '{"name": "read_file", "arguments": {"path": "subtotal.txt"}}\n'
    '{"message": "That call failed. Call a tool again as the message says, or answer if it cannot be done."}\n'
    '{"response": "If it cannot be done, the next steps are to run a bash command in the workspace directory '
    'and return its output (stdout and stderr), exit code and duration. No stdin; no interactive programs. '
    'Long output is cut in the middle."}\n'
    '{"tools": ["run_shell"]}'
)
# Two calls one per line and a third one brace short.
CALLS_THEN_A_BROKEN_ONE = (
    '{"name": "read_file", "arguments": {"path": "shopkit.pricing"}}\n'
    '{"name": "edit_file", "arguments": {"path": "shopkit.pricing", "old_string": "import shopkit.pricing", '
    '"new_string": "from shopkit.pricing import pricing", "replace_all": true}}\n'
    '{"name": "write_file", "arguments": {"path": "shopkit.pricing", "content": "pricing = 3\\nprint(pricing)}"}'
)


@pytest.fixture(scope="module")
def bench():
    spec = importlib.util.spec_from_file_location("bench_agent_tasks", REPO / "benchmarks" / "bench_agent_tasks.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules["bench_agent_tasks"] = module
    spec.loader.exec_module(module)
    return module


def cause(bench, answer: str) -> str:
    return bench.classify(0, "", answer, (False, "wrong"))[0]


def test_a_call_with_more_than_a_line_or_two_of_other_json_around_it_is_the_models(bench):
    assert cause(bench, CALL_THEN_ECHOES) == "explained"


def test_calls_the_app_should_have_run_are_the_apps(bench):
    assert cause(bench, CALLS_THEN_A_BROKEN_ONE) == "unparsed call"
    assert cause(bench, '{"name": "read_file", "arguments": {"path": "a.py"}}\nThis reads it.') == "unparsed call"


def test_a_call_whose_arguments_do_not_validate_is_the_models(bench):
    answer = '{"name": "run_shell", "arguments": {"command": "ls", "timeout_s": "60", "required": false}}'
    assert cause(bench, answer) == "invalid call"


def test_calls_beside_one_whose_arguments_do_not_validate_are_the_models(bench):
    """The app runs none of a reply's calls when one of them does not validate."""
    answer = (
        '{"name": "read_file", "arguments": {"path": "./config/app.ini", "old_string": "currency = USD", '
        '"new_string": "currency = EUR"}}\n'
        '{"name": "edit_file", "arguments": {"path": "./config/app.ini", "old_string": "currency = USD", '
        '"new_string": "currency = EUR"}}\n'
        '{"name": "write_file", "arguments": {"path": "./config/app.ini", "content": "currency = EUR"}}'
    )
    assert cause(bench, answer) == "invalid call"


def test_a_prose_answer_is_judged_by_its_check(bench):
    assert cause(bench, "The default currency is USD.") == "wrong"
