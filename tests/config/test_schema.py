"""hermes_tui.config.schema: the config's strict sections (types, bounds, checks, every problem found).

Pure logic; the config's own messages for these problems are tests/test_config.py's.
"""

from __future__ import annotations

from typing import Literal

import pytest

from hermes_tui.config.schema import (
    Section,
    SettingError,
    ValidationError,
    field_check,
    section_check,
    setting,
)


class Inner(Section):
    size: int = setting(3, "a size", ge=1)
    names: list[str] = setting([], "names")


class Outer(Section):
    flag: bool = setting(True, "a flag")
    ratio: float = setting(0.5, "a share", gt=0, le=1, allow_inf_nan=False)
    kind: Literal["a", "b"] = setting("a", "a choice")
    limit: int | None = setting(None, "optional", ge=10)
    inner: Inner = setting(default_factory=Inner, description="a section")
    named: dict[str, Inner] = setting({}, "sections by name")
    url: str = setting("", "a url")

    @field_check("url")
    @classmethod
    def _http(cls, value: str) -> str:
        if value and not value.startswith("http"):
            raise SettingError("http_url", "must start with http, got {got}", {"got": repr(value)})
        return value

    @field_check("named", before=True)
    @classmethod
    def _null_is_empty(cls, value):
        return {} if value is None else value

    @section_check()
    def _consistent(self) -> None:
        if self.kind == "b" and self.limit is None:
            raise SettingError("needs_limit", "kind b needs a limit")


def kinds(data) -> list[tuple[tuple, str]]:
    with pytest.raises(ValidationError) as caught:
        Outer.model_validate(data)
    return [(e["loc"], e["type"]) for e in caught.value.errors()]


def test_defaults_and_values_as_given():
    made = Outer.model_validate({"ratio": 1, "inner": {"size": 5, "names": ["x"]}, "named": {"n": {}}})
    assert made.ratio == 1.0 and type(made.ratio) is float       # a whole number is a number
    assert made.inner == Inner(size=5, names=["x"]) and made.named == {"n": Inner()}
    assert made.flag is True and made.limit is None and made.kind == "a"


@pytest.mark.parametrize(("data", "expected"), [
    ({"flag": 1}, [(("flag",), "bool_type")]),                   # 1 is not true
    ({"inner": {"size": 2.0}}, [(("inner", "size"), "int_type")]),  # 2.0 is not 2
    ({"inner": {"size": True}}, [(("inner", "size"), "int_type")]),  # nor is true
    ({"ratio": "0.5"}, [(("ratio",), "float_type")]),            # text is not a number
    ({"ratio": 0}, [(("ratio",), "greater_than")]),
    ({"ratio": 1.5}, [(("ratio",), "less_than_equal")]),
    ({"ratio": float("inf")}, [(("ratio",), "finite_number")]),
    ({"limit": 9}, [(("limit",), "greater_than_equal")]),
    ({"kind": "c"}, [(("kind",), "literal_error")]),
    ({"inner": {"names": "x"}}, [(("inner", "names"), "list_type")]),
    ({"inner": {"names": ["x", 2]}}, [(("inner", "names", 1), "string_type")]),
    ({"inner": 3}, [(("inner",), "model_type")]),
    ({"named": {"n": {"size": 0}}}, [(("named", "n", "size"), "greater_than_equal")]),
    ({"named": []}, [(("named",), "dict_type")]),
    ({"url": "ftp://x"}, [(("url",), "http_url")]),
    ({"extra": 1, "inner": {"other": 2}}, [(("inner", "other"), "extra_forbidden"), (("extra",), "extra_forbidden")]),
])
def test_each_problem_names_its_key_and_kind(data, expected):
    assert kinds(data) == expected


def test_every_problem_is_found_not_only_the_first():
    assert len(kinds({"flag": 0, "ratio": 2, "kind": "z", "inner": {"size": 0}})) == 4


def test_a_section_check_runs_once_its_fields_are_good():
    assert kinds({"kind": "b"}) == [((), "needs_limit")]
    assert kinds({"kind": "b", "limit": 1}) == [(("limit",), "greater_than_equal")]  # not needs_limit too
    assert Outer.model_validate({"kind": "b", "limit": 10}).limit == 10


def test_a_check_before_the_type_sees_the_raw_value():
    assert Outer.model_validate({"named": None}).named == {}


def test_messages_fill_only_their_fields():
    error = SettingError("k", 'like "Bearer ${TOKEN}", got {got}', {"got": "'x'"})
    assert error.message == """like "Bearer ${TOKEN}", got 'x'"""


def test_dump_copy_and_defaults_not_shared():
    a, b = Outer(), Outer()
    a.inner.names.append("mine")
    assert b.inner.names == []                                   # each section its own list
    assert Outer(ratio=0.25).model_dump(exclude_defaults=True) == {"ratio": 0.25}
    assert Outer.model_validate(a.model_dump()) == a
    copied = a.model_copy(update={"flag": False})
    assert copied.flag is False and a.flag is True and copied.inner is a.inner
    assert Outer() != Inner() and Outer() == Outer()


def test_fields_keep_their_order_types_and_comments():
    assert list(Outer.model_fields) == ["flag", "ratio", "kind", "limit", "inner", "named", "url"]
    info = Outer.model_fields["ratio"]
    assert info.annotation is float and info.description == "a share" and info.default == 0.5
    assert [(b.gt, b.ge, b.lt, b.le) for b in info.metadata] == [(0, None, None, 1)]
    assert Outer.model_fields["inner"].annotation is Inner
