"""A small strict schema for ``config.yaml``: sections of typed settings, each with its comment.

What the config needs of a schema library and no more: strict types (``"0.5"`` is not
0.5, ``2.0`` is not 2, ``1`` is not true), bounds, choices (``Literal``), optional values
(``X | None``), lists and mappings of text, mappings of sections, unknown keys refused,
and checks of one field (before or after its type is checked) or of a whole section.
Every problem in a document is collected, each as ``{"type", "loc", "msg", "input"}``:
``config.problems`` turns them into one line naming the file, the line and the key.

The config is read before the app's first frame; pydantic took ~45 ms to import and
~15 ms to build these models there, a sixth of that time (``benchmarks/bench_startup.py``).
msgspec (measured as a replacement: strict types, ``Meta`` bounds, unknown fields refused,
error paths) stops at the first problem, where this collects every problem of a file into
one report, and costs more to import than it would save: ~39 ms on this machine with the
standard library already loaded (``typing_extensions`` is most of it) against ~3 ms for
this module (``python -X importtime``, best of 8, loaded machine). So the config keeps it.
The names of the section API (``model_fields``, ``model_validate``, ``model_dump``,
``model_copy``) are pydantic's, so code and tests read as they did.
"""

from __future__ import annotations

import copy
import math
import types
import typing
from collections.abc import Callable, Mapping
from typing import Any, ClassVar, Literal, Self, TypedDict, get_args, get_origin

__all__ = ["Bounds", "Problem", "Section", "Setting", "SettingError", "ValidationError", "field_check",
           "section_check", "setting"]

Loc = tuple[str | int, ...]
_MISSING: Any = object()
_REFUSED: Any = object()  # what a refused value becomes while the checks run


class Problem(TypedDict):
    """One problem of a document: its kind, where (the keys and list places down to the value),
    the message, and the value as written."""

    type: str
    loc: Loc
    msg: str
    input: Any


class SettingError(Exception):
    """A check's verdict: ``kind`` names it (``config.problems`` words each kind), ``template``
    is its message with ``{name}`` fields filled from ``context``."""

    def __init__(self, kind: str, template: str, context: Mapping[str, Any] | None = None):
        self.kind = kind
        message = template
        for name, value in (context or {}).items():  # only these fields: a message may show "${TOKEN}"
            message = message.replace("{" + name + "}", str(value))
        self.message = message
        super().__init__(self.message)


class ValidationError(ValueError):
    """Every problem a document has; ``errors()`` lists them in the order they were found."""

    def __init__(self, errors: list[Problem]):
        self._errors = errors
        loc, msg = (errors[0]["loc"], errors[0]["msg"]) if errors else ((), "invalid")
        where = ".".join(str(p) for p in loc)
        super().__init__(f"{where}: {msg}" if where else msg)

    def errors(self) -> list[Problem]:
        return [e.copy() for e in self._errors]


class Bounds:
    """A number's bounds; unset ones are None (``config.problems`` reads gt, ge, lt, le)."""

    def __init__(self, gt: float | None, ge: float | None, lt: float | None, le: float | None):
        self.gt, self.ge, self.lt, self.le = gt, ge, lt, le

    def problem(self, value: float) -> tuple[str, str] | None:
        limits: tuple[tuple[float | None, str, Callable[[float, float], bool], str], ...] = (
            (self.gt, "greater_than", lambda v, b: v <= b, "greater than"),
            (self.ge, "greater_than_equal", lambda v, b: v < b, "greater than or equal to"),
            (self.lt, "less_than", lambda v, b: v >= b, "less than"),
            (self.le, "less_than_equal", lambda v, b: v > b, "less than or equal to"),
        )
        for limit, kind, fails, words in limits:
            if limit is not None and fails(value, limit):
                return kind, f"Input should be {words} {limit}"
        return None


class Setting:
    """One key of a section: its type (``annotation``, set when the class is made), default,
    comment (``description``), extra text for the file (``json_schema_extra["note"]``), bounds."""

    def __init__(self, default: Any = _MISSING, description: str = "", *, default_factory: Callable[[], Any] | None = None,
                 json_schema_extra: dict[str, Any] | None = None, gt: float | None = None, ge: float | None = None,
                 lt: float | None = None, le: float | None = None, allow_inf_nan: bool = True):
        self.default = None if default is _MISSING else default
        self.default_factory = default_factory
        self.description = description
        self.json_schema_extra = json_schema_extra
        bounds = Bounds(gt, ge, lt, le)
        self.metadata: list[Bounds] = [bounds] if any(b is not None for b in (gt, ge, lt, le)) else []
        self.allow_inf_nan = allow_inf_nan
        self.annotation: Any = None

    def make_default(self) -> Any:
        if self.default_factory is not None:
            return self.default_factory()
        return copy.deepcopy(self.default) if isinstance(self.default, (list, dict)) else self.default


def setting(default: Any = _MISSING, description: str = "", **kwargs: Any) -> Any:
    """A ``Setting`` as a class attribute (typed ``Any`` so annotations stay the value's type)."""
    return Setting(default, description, **kwargs)


def field_check(*names: str, before: bool = False) -> Callable[[Any], Any]:
    """Mark a classmethod as a check of the named fields: ``before`` their type is checked (it
    gets the raw value and returns what to check), else after (it gets the checked value).
    It raises ``SettingError``; a check on a base class applies where a subclass has the field."""

    def mark(method: Any) -> Any:
        function: Any = method.__func__ if isinstance(method, classmethod) else method
        function.__field_check__ = (names, before)
        return method

    return mark


def section_check(*, before: bool = False) -> Callable[[Any], Any]:
    """Mark a check of a whole section: ``before`` (a classmethod given the raw data, returning
    the data to check) or after every field checked out (a method of the made section)."""

    def mark(method: Any) -> Any:
        function: Any = method.__func__ if isinstance(method, classmethod) else method
        function.__section_check__ = before
        return method

    return mark


class Section:
    """A section of settings: each annotated class attribute given ``setting(...)`` is a key.

    Made from a mapping with ``model_validate`` (or keywords), every value checked; unknown
    keys are refused. Values may be assigned afterwards unchecked (``save_config`` checks
    them all again).
    """

    model_fields: ClassVar[dict[str, Setting]] = {}
    _field_checks: ClassVar[dict[tuple[str, bool], list[Callable[..., Any]]]] = {}
    _section_checks: ClassVar[dict[bool, list[Callable[..., Any]]]] = {}

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        hints = typing.get_type_hints(cls)
        fields: dict[str, Setting] = {}
        for base in reversed(cls.__mro__[1:]):
            fields.update(getattr(base, "model_fields", {}))
        for name in cls.__dict__.get("__annotations__", {}):
            if name.startswith("_") or get_origin(hints[name]) is ClassVar:
                continue
            found = cls.__dict__.get(name, _MISSING)
            info = found if isinstance(found, Setting) else Setting(found)
            info.annotation = hints[name]
            fields[name] = info
            if name in cls.__dict__:
                delattr(cls, name)  # the value lives on each section, the Setting in model_fields
        cls.model_fields = fields
        field_checks: dict[tuple[str, bool], list[Callable[..., Any]]] = {}
        section_checks: dict[bool, list[Callable[..., Any]]] = {True: [], False: []}
        for klass in reversed(cls.__mro__):
            for attribute in vars(klass).values():
                function = attribute.__func__ if isinstance(attribute, classmethod) else attribute
                if hasattr(function, "__field_check__"):
                    names, before = function.__field_check__
                    for name in names:
                        field_checks.setdefault((name, before), []).append(function)
                if hasattr(function, "__section_check__"):
                    section_checks[function.__section_check__].append(function)
        cls._field_checks, cls._section_checks = field_checks, section_checks

    def __init__(self, **values: Any):
        errors: list[Problem] = []
        checked = self._checked(values, (), errors)
        if errors or checked is None:  # None comes with a problem in errors
            raise ValidationError(errors)
        self.__dict__.update(checked.__dict__)

    # --- made from data -------------------------------------------------------------------
    @classmethod
    def model_validate(cls, data: Any) -> Self:
        errors: list[Problem] = []
        made = cls._checked(data, (), errors)
        if errors or made is None:  # None comes with a problem in errors
            raise ValidationError(errors)
        return made

    @classmethod
    def _checked(cls, data: Any, loc: Loc, errors: list[Problem]) -> Self | None:
        """The section ``data`` makes, its problems added to ``errors`` (then None)."""
        if isinstance(data, cls):
            return data
        data = cls._through(cls._section_checks[True], data, loc, errors)
        if data is _REFUSED:
            return None
        if not isinstance(data, Mapping):
            errors.append(_problem("model_type", loc, f"Input should be a valid dictionary or instance of {cls.__name__}", data))
            return None
        found = len(errors)
        values: dict[str, Any] = {}
        for name, info in cls.model_fields.items():
            values[name] = cls._field(name, info, data[name], (*loc, name), errors) if name in data else info.make_default()
        for key in data:
            if key not in cls.model_fields:
                errors.append(_problem("extra_forbidden", (*loc, key), "Extra inputs are not permitted", data[key]))
        if len(errors) > found:
            return None
        made = object.__new__(cls)
        made.__dict__.update(values)
        for check in cls._section_checks[False]:
            try:
                check(made)
            except SettingError as exc:
                errors.append(_problem(exc.kind, loc, exc.message, dict(data)))
                return None
        return made

    @classmethod
    def _field(cls, name: str, info: Setting, value: Any, loc: Loc, errors: list[Problem]) -> Any:
        value = cls._through(cls._field_checks.get((name, True), ()), value, loc, errors)
        if value is _REFUSED:
            return None
        found = len(errors)
        value = _typed(info.annotation, value, loc, errors, info)
        if len(errors) > found:
            return None
        value = cls._through(cls._field_checks.get((name, False), ()), value, loc, errors)
        return None if value is _REFUSED else value

    @classmethod
    def _through(cls, checks: Any, value: Any, loc: Loc, errors: list[Problem]) -> Any:
        """``value`` through each of ``checks`` in turn; ``_REFUSED`` (its problem added to
        ``errors``) when one refuses it."""
        for check in checks:
            try:
                value = check(cls, value)
            except SettingError as exc:
                errors.append(_problem(exc.kind, loc, exc.message, value))
                return _REFUSED
        return value

    # --- back to data ---------------------------------------------------------------------
    def model_dump(self, *, mode: str = "python", exclude_defaults: bool = False, warnings: bool = True) -> dict[str, Any]:
        """The section as plain data (``mode`` and ``warnings`` as pydantic takes them: the
        values here are already plain)."""
        out: dict[str, Any] = {}
        for name, info in type(self).model_fields.items():
            value = getattr(self, name)
            if exclude_defaults and value == info.make_default():
                continue
            out[name] = _dumped(value, exclude_defaults)
        return out

    def model_copy(self, *, update: Mapping[str, Any] | None = None) -> Self:
        """A shallow copy with ``update``'s values in place (not checked, as pydantic's)."""
        made = object.__new__(type(self))
        made.__dict__.update(self.__dict__)
        made.__dict__.update(update or {})
        return made

    def __eq__(self, other: object) -> bool:
        return type(other) is type(self) and self.__dict__ == other.__dict__

    __hash__ = None  # type: ignore[assignment]  # mutable, like a dict: no hash

    def __repr__(self) -> str:
        return f"{type(self).__name__}({', '.join(f'{k}={v!r}' for k, v in self.__dict__.items())})"


def _dumped(value: Any, exclude_defaults: bool) -> Any:
    if isinstance(value, Section):
        return value.model_dump(exclude_defaults=exclude_defaults)
    if isinstance(value, dict):
        return {k: _dumped(v, exclude_defaults) for k, v in value.items()}
    if isinstance(value, list):
        return [_dumped(v, exclude_defaults) for v in value]
    return value


def _problem(kind: str, loc: Loc, message: str, value: Any) -> Problem:
    return {"type": kind, "loc": loc, "msg": message, "input": value}


# Strict scalar types: the input's own type must be the one named (an int is a number too).
_SCALARS: dict[Any, tuple[str, str, Callable[[Any], bool]]] = {
    str: ("string_type", "Input should be a valid string", lambda v: type(v) is str),
    bool: ("bool_type", "Input should be a valid boolean", lambda v: type(v) is bool),
    int: ("int_type", "Input should be a valid integer", lambda v: type(v) is int),
    float: ("float_type", "Input should be a valid number", lambda v: type(v) in (int, float)),
}


def _typed(annotation: Any, value: Any, loc: Loc, errors: list[Problem], info: Setting | None = None) -> Any:
    """``value`` checked against ``annotation`` (problems added to ``errors``)."""
    origin, args = get_origin(annotation), get_args(annotation)
    if origin in (typing.Union, types.UnionType):
        if value is None and type(None) in args:
            return None
        (inner,) = [a for a in args if a is not type(None)]
        return _typed(inner, value, loc, errors, info)
    if origin is Literal:
        if any(type(value) is type(choice) and value == choice for choice in args):
            return value
        errors.append(_problem("literal_error", loc, f"Input should be {_either(args)}", value))
        return None
    if origin is list:
        if type(value) is not list:
            errors.append(_problem("list_type", loc, "Input should be a valid list", value))
            return None
        return [_typed(args[0], item, (*loc, i), errors) for i, item in enumerate(value)]
    if origin is dict:
        if not isinstance(value, dict):
            errors.append(_problem("dict_type", loc, "Input should be a valid dictionary", value))
            return None
        out = {}
        for key, item in value.items():
            if type(key) is not str:
                errors.append(_problem("string_type", (*loc, key, "[key]"), "Input should be a valid string", key))
                continue
            out[key] = _typed(args[1], item, (*loc, key), errors)
        return out
    if isinstance(annotation, type) and issubclass(annotation, Section):
        return annotation._checked(value, loc, errors)
    kind, message, accepts = _SCALARS[annotation]
    if not accepts(value):
        errors.append(_problem(kind, loc, message, value))
        return None
    given = value  # a problem shows the value as written (0, not 0.0)
    if annotation is float:
        value = float(value)
        if info is not None and not info.allow_inf_nan and not math.isfinite(value):
            errors.append(_problem("finite_number", loc, "Input should be a finite number", given))
            return None
    for bounds in info.metadata if info is not None else ():
        problem = bounds.problem(value)
        if problem is not None:
            errors.append(_problem(problem[0], loc, problem[1], given))
            return None
    return value


def _either(choices: tuple[Any, ...]) -> str:
    shown = [repr(c) for c in choices]
    return shown[0] if len(shown) == 1 else f"{', '.join(shown[:-1])} or {shown[-1]}"
