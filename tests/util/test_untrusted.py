"""The bounded JSON and YAML loaders: each hostile input is one InputError saying where.

Pure logic on strings; the commands that read files through these loaders are
tested end to end in test_bad_input.py.
"""

from __future__ import annotations

import time

import pytest

from hermes_tui.util.untrusted import MAX_DEPTH, InputError, decode_json_at, load_json, load_yaml

DIGITS = "1" * 5000
# Nine levels of nine aliases: 9**9 (387 million) strings if anything expands it.
ALIAS_BOMB = "a: &a [" + ", ".join(['"lol"'] * 9) + "]\n" + "".join(
    f"{name}: &{name} [{', '.join([f'*{prev}'] * 9)}]\n" for prev, name in zip("abcdefgh", "bcdefghi")
)


# --- JSON -------------------------------------------------------------------------------


def test_json_within_the_limits_loads_as_json_does():
    text = '[{"role": "user", "content": "caf\\u00e9 \\ud83d\\ude00", "n": 12345678901234567890}]'
    assert load_json(text) == [{"role": "user", "content": "café 😀", "n": 12345678901234567890}]
    nested = "[" * MAX_DEPTH + "]" * MAX_DEPTH
    assert load_json(nested) is not None


def test_json_syntax_error_names_line_and_column():
    with pytest.raises(InputError) as info:
        load_json('[1,\n 2,,]')
    assert str(info.value) == "not valid JSON at line 2, column 4: Expecting value"


def test_json_first_line_shifts_the_reported_line():
    with pytest.raises(InputError) as info:
        load_json('{"a": }', first_line=7)
    assert info.value.line == 7 and info.value.column == 7


@pytest.mark.parametrize("depth", [MAX_DEPTH + 1, 5_000, 100_000])
def test_deep_nesting_is_refused_where_it_crosses_the_limit(depth):
    text = '{"a": ' * depth + "1" + "}" * depth
    with pytest.raises(InputError) as info:
        load_json(text)
    error = info.value
    assert error.kind == "too deeply nested"
    # the first bracket past the limit: 6 characters per level
    assert (error.line, error.column) == (1, 6 * MAX_DEPTH + 1)


def test_brackets_inside_strings_do_not_count_as_nesting():
    text = '["' + "[" * 500 + '", ' + "[" * (MAX_DEPTH + 1) + "]" * (MAX_DEPTH + 1) + "]"
    with pytest.raises(InputError) as info:
        load_json(text)
    assert info.value.column == len('["' + "[" * 500 + '", ') + MAX_DEPTH  # not inside the string


def test_an_integer_of_5000_digits_is_refused_with_its_place():
    text = '[{"a": "' + DIGITS + '"},\n {"n": ' + DIGITS + "}]"
    with pytest.raises(InputError) as info:
        load_json(text)
    error = info.value
    assert error.kind == "number too long"
    assert (error.line, error.column) == (2, 8)  # the digits in the string are not it
    assert "5,000 digits" in str(error)


def test_a_lone_surrogate_is_refused_with_its_path_and_never_printed_raw():
    with pytest.raises(InputError) as info:
        load_json('[{"content": "ok"}, {"content": "bad \\ud800 half"}]')
    error = info.value
    assert error.kind == "not valid text" and error.path == (1, "content")
    assert str(error).startswith("not valid text at [1].content: '\\ud800' is a lone surrogate")
    str(error).encode("utf-8")  # the message itself is printable


def test_a_lone_surrogate_in_a_key_is_refused():
    with pytest.raises(InputError) as info:
        load_json('{"k\\udc00": 1}')
    assert info.value.kind == "not valid text"


def test_decode_json_at_reads_a_prefix_and_applies_the_same_limits():
    assert decode_json_at('log: {"a": [1]} trailing', 5) == ({"a": [1]}, 15)
    with pytest.raises(InputError):
        decode_json_at("log: " + "[" * 100_000, 5)
    with pytest.raises(InputError):
        decode_json_at('log: {"n": ' + DIGITS + "}", 5)


# --- YAML -------------------------------------------------------------------------------


def test_yaml_within_the_limits_loads_as_safe_load_does():
    data, node = load_yaml("a: &base {x: 1}\nb:\n  <<: *base\n  y: 0x1f\n")
    assert data == {"a": {"x": 1}, "b": {"x": 1, "y": 31}}
    assert node is not None and node.start_mark.line == 0
    assert load_yaml("") == (None, None)


def test_an_alias_bomb_loads_in_linear_time_as_shared_nodes():
    started = time.monotonic()
    data, _ = load_yaml(ALIAS_BOMB)
    assert time.monotonic() - started < 5
    assert data["i"][0] is data["h"] and data["h"][0] is data["g"]  # shared, never copied


@pytest.mark.parametrize(
    "text, line",
    [
        ("k: " + "[" * 5000 + "]" * 5000 + "\n", 1),
        ("".join(" " * i + f"k{i}:\n" for i in range(5000)), MAX_DEPTH),
    ],
    ids=["flow", "block"],
)
def test_deep_yaml_is_refused_at_the_line_that_crosses_the_limit(text, line):
    with pytest.raises(InputError) as info:
        load_yaml(text)
    assert info.value.kind == "too deeply nested" and info.value.line == line


def test_a_chain_of_aliases_cannot_build_a_deep_tree():
    text = "a0: &a0 [x]\n" + "".join(f"a{i}: &a{i} [*a{i - 1}]\n" for i in range(1, 300))
    with pytest.raises(InputError) as info:
        load_yaml(text)
    assert info.value.kind == "too deeply nested" and "aliases" in str(info.value)


@pytest.mark.parametrize("text", ["a: &a [*a]\n", "a: &a {b: *a}\n", "a: &a {<<: *a}\n"])
def test_an_alias_inside_its_own_anchor_is_refused(text):
    with pytest.raises(InputError) as info:
        load_yaml(text)
    assert "loop" in str(info.value)


@pytest.mark.parametrize("literal", ["1" * 5000, "0x" + "f" * 5000, "-" + "9" * 5000])
def test_an_integer_python_cannot_print_is_refused(literal):
    with pytest.raises(InputError) as info:
        load_yaml(f"a: 1\nb: {literal}\n")
    assert str(info.value) == "number too long at line 2, column 4: an integer of more than 4,300 digits"


def test_a_nul_byte_is_a_yaml_error_with_its_place():
    with pytest.raises(InputError) as info:
        load_yaml("a: 1\nb: x\x00\n")
    assert str(info.value) == (
        "not valid YAML at line 2, column 5: unacceptable character #x0000: special characters are not allowed"
    )


def test_a_lone_surrogate_escape_is_refused_in_values_and_keys():
    for text in ('a: "x\\ud800"\n', '"k\\udfff": 1\n'):
        with pytest.raises(InputError) as info:
            load_yaml(text)
        assert info.value.kind == "not valid text" and info.value.line == 1


def test_yaml_syntax_errors_keep_their_one_line_form():
    with pytest.raises(InputError) as info:
        load_yaml("a: [1\n")
    assert str(info.value).startswith("not valid YAML at line 2, column 1: ")
    assert "\n" not in str(info.value)


def test_the_first_bad_value_in_document_order_is_the_one_reported():
    with pytest.raises(InputError) as info:
        load_json('[{"a": "ok"}, {"a": "\\ud800", "b": "\\udc00"}, {"a": "\\ud801"}]')
    assert info.value.path == (1, "a")
