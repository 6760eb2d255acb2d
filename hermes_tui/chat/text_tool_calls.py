"""Tool calls a model wrote as text, recovered as calls when nothing else can be meant.

Small local models often answer a request that offered tools with the call written out
(``finish_reason: stop``, no ``tool_calls``). The forms read here, each named as
``Recovered.form`` records it (``meta["recovered_calls"]`` in the transcript):

- ``json``: a bare JSON object ``{"name": ..., "arguments": {...}}`` (``"parameters"``
  is read as ``"arguments"``, as Llama writes it, and ``"function"`` as ``"name"``, as
  Qwen2.5-Coder-1.5B wrote it; arguments may also be a JSON string holding the object),
  or a list of such objects, or several such objects one per line (Qwen2.5-Coder-0.5B
  writes a read, an edit and a write so; one that does not decode is left to the prose);
- ``json_block``: the same in a fenced code block (```` ``` ```` or ```` ```json ````);
- ``json_doubled``: a bare call inside one more pair of braces, ``{{"name": ..., ...}}``
  (Qwen2.5-Coder-1.5B writes it, the doubled braces of a template's escaping), the outer
  closing brace possibly missing when nothing follows (it writes that too);
- ``tool_call_tag``: the same between ``<tool_call>`` and ``</tool_call>`` (Qwen and
  Hermes templates; the end tag may be missing at the very end of the reply);
- ``tools_tag``: the same between ``<tools>`` and ``</tools>``, the tag Qwen's template
  lists the tool definitions in (Qwen2.5-Coder-1.5B calls with it); a definition echoed
  back in it is no call, and the reply is not recovered;
- ``function_tag``: ``<function=NAME>{...arguments...}</function>``;
- ``function_parameters``: ``<function=NAME><parameter=KEY>value</parameter>...</function>``
  (Qwen3-Coder), either ``<function=`` form possibly inside ``<tool_call>`` tags. A
  value is text for a ``string`` property and JSON otherwise;
- ``xml_function``: ``<function><name>NAME</name><arguments><KEY>value</KEY>...</arguments>
  </function>`` inside ``<tools>`` or ``<tool_call>`` (Qwen2.5-Coder-1.5B calls with it),
  values typed as for ``function_parameters``. A ``<function>`` with a ``<description>`` or
  ``<parameters>`` is a tool's definition echoed back: no call, and the reply is not recovered.

An empty tag pair (``<tools></tools>``, the residue of Qwen's template that
Qwen2.5-Coder-1.5B writes before a call) holds nothing: it is neither a call nor a block
that keeps the reply an answer, and it is not kept in the prose.

A reply with calls of several forms records them joined by "+", in the order met.

The rule for what runs. A reply's text runs as calls only when all of these hold,
and otherwise it stays an answer and nothing in it runs:

1. every call found validates against the schema of a tool offered in that request:
   the name is offered, the arguments are an object that passes the tool's JSON
   schema (required keys, types, bounds), and it has no key the schema does not list
   (when it lists ``properties`` and does not allow others explicitly);
2. every fenced code block and every tag block in the reply is a call: a block that is
   not (other code, a partial or invalid JSON object, a list that is not all calls)
   means the reply explains something, and its JSON is an example;
3. the prose around the calls is short: at most ``MAX_PROSE_LINES`` non-empty lines and
   ``MAX_PROSE_CHARS`` characters, and it does not call the JSON an example ("example",
   "e.g.", "for instance", "sample"). A reply that explains a tool with a JSON example has
   more to say than that; a reply that calls one says a line before or after it.

The prose (the reply minus the call text) is kept as the assistant message's content.
Nothing here runs a call or checks approval; the agent loop treats recovered calls as
it treats native ones.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

from ..util.untrusted import InputError, decode_json_at, load_json
from .client import tool_call

# Rule 3: a line or two around the call ("I'll search for it:", "This lists the files.").
MAX_PROSE_LINES = 3
MAX_PROSE_CHARS = 300
# Rule 3: words that make the JSON an illustration, however short the prose.
_EXAMPLE = re.compile(r"\bexamples?\b|\be\.g\.|\bfor instance\b|\bsample\b", re.I)

JSON, JSON_DOUBLED, JSON_BLOCK = "json", "json_doubled", "json_block"
TOOL_CALL_TAG, TOOLS_TAG = "tool_call_tag", "tools_tag"
FUNCTION_TAG, FUNCTION_PARAMETERS = "function_tag", "function_parameters"
XML_FUNCTION = "xml_function"

# A fenced block: its info string (language) and body; an unclosed fence runs to the end.
_FENCE = re.compile(r"^[ \t]*```[ \t]*([\w+-]*)[^\n]*\n(.*?)(?:^[ \t]*```[ \t]*$|\Z)", re.S | re.M)
_TOOL_CALL = re.compile(r"<tool_call>(.*?)(?:</tool_call>|\Z)", re.S)
_TOOLS = re.compile(r"<tools>(.*?)(?:</tools>|\Z)", re.S)
_FUNCTION = re.compile(r"<function=([^>\s]+)>(.*?)(?:</function>|\Z)", re.S)
_PARAMETER = re.compile(r"<parameter=([^>\s]+)>(.*?)</parameter>", re.S)
_XML_FUNCTION = re.compile(r"<function>(.*?)</function>", re.S)
_XML_NAME = re.compile(r"\s*<name>\s*([^<\s]+)\s*</name>\s*<arguments>(.*?)</arguments>\s*", re.S)
_XML_ARGUMENT = re.compile(r"<([A-Za-z_][\w.-]*)>(.*?)</\1>", re.S)
# Languages a call's JSON is fenced with; any other block is code, never a call.
_JSON_LANGUAGES = {"", "json", "json5", "tool_call", "tool_code"}
_CALL_KEYS = {"name", "function", "arguments", "parameters"}


@dataclass(frozen=True)
class Recovered:
    """Calls recovered from a reply's text: OpenAI-format ``calls`` (ids generated,
    arguments as JSON text), the ``content`` left (the prose), and the ``form``."""

    calls: list[dict[str, Any]]
    content: str
    form: str


class _NotACall(Exception):
    """A block that cannot be a call: the reply is not recovered."""


def recover_calls(text: str, tools: list[dict[str, Any]] | None) -> Recovered | None:
    """The calls written in ``text`` when it is nothing but calls to the offered ``tools``
    (OpenAI ``tools=[...]`` specs) and short prose, else None (see the module's rule)."""
    if not text or not tools:
        return None
    schemas = {spec["function"]["name"]: spec["function"].get("parameters") or {}
               for spec in tools if isinstance(spec.get("function"), dict) and "name" in spec["function"]}
    try:
        found = _blocks(text)
    except _NotACall:
        return None
    if not found:
        return None
    calls: list[dict[str, Any]] = []
    forms: list[str] = []
    for _start, _end, form, items in found:
        for name, arguments in items:
            if not _valid(name, arguments, schemas):
                return None
            calls.append(tool_call(None, name, json.dumps(arguments, ensure_ascii=False)))
        if items and form not in forms:
            forms.append(form)
    if not calls:  # empty tags only
        return None
    prose = _prose(text, [(start, end) for start, end, _, _ in found])
    lines = [line for line in prose.splitlines() if line.strip()]
    if len(lines) > MAX_PROSE_LINES or len(prose) > MAX_PROSE_CHARS or _EXAMPLE.search(prose):
        return None
    return Recovered(calls=calls, content=prose, form="+".join(forms))


# --- finding the blocks -------------------------------------------------------------------

Block = tuple[int, int, str, list[tuple[str, dict[str, Any]]]]


def _blocks(text: str) -> list[Block]:
    """Every call block in ``text`` (start, end, form, calls), in order. Raises
    ``_NotACall`` for a code or tag block that is not a call (rule 2)."""
    found: list[Block] = []
    taken: list[tuple[int, int]] = []

    def free(start: int, end: int) -> bool:
        return all(end <= s or start >= e for s, e in taken)

    for match in _TOOL_CALL.finditer(text):
        inner = match.group(1)
        if _FUNCTION.search(inner):
            form, items = _function_calls(inner)
        else:
            form, items = _tag_calls(inner, TOOL_CALL_TAG)
        found.append((match.start(), match.end(), form, items))
        taken.append(match.span())
    for match in _TOOLS.finditer(text):
        if not free(*match.span()):
            continue
        form, items = _tag_calls(match.group(1), TOOLS_TAG)
        found.append((match.start(), match.end(), form, items))
        taken.append(match.span())
    for match in _FUNCTION.finditer(text):
        if free(*match.span()):
            form, items = _function_calls(match.group(0))
            found.append((match.start(), match.end(), form, items))
            taken.append(match.span())
    for match in _FENCE.finditer(text):
        if not free(*match.span()):
            continue
        if match.group(1).lower() not in _JSON_LANGUAGES:
            raise _NotACall
        found.append((match.start(), match.end(), JSON_BLOCK, _json_calls(match.group(2))))
        taken.append(match.span())
    if not found:
        found.extend(_bare_json(text))
    return sorted(found, key=lambda block: block[0])


# After a bare call: the next line's JSON value, if the next non-blank line starts with one.
_NEXT_LINE_VALUE = re.compile(r"\s*\n[ \t]*(?=[\[{])")


def _bare_json(text: str) -> list[Block]:
    """Calls as bare JSON: the first value that starts a line and reads as call(s), and the
    ones right after it (one per line, as small models write several calls: JSON Lines).
    JSON that is not a call is left to the prose (an answer may quote a dict), and so is
    whatever follows the last call, a call that does not decode included: it never runs."""
    for match in re.finditer(r"^[ \t]*([\[{])", text, re.M):
        first = _bare_value(text, match.start(1))
        if first is None:
            continue
        found = [(match.start(), *first)]
        while (following := _NEXT_LINE_VALUE.match(text, found[-1][1])) is not None:
            start = following.end()
            value = _bare_value(text, start)
            if value is None:
                break
            found.append((start, *value))
        return found
    return []


def _bare_value(text: str, start: int) -> tuple[int, str, list[tuple[str, dict[str, Any]]]] | None:
    """The call(s) that the JSON value at ``start`` holds (its end, its form), or None."""
    doubled = text.startswith("{{", start)
    try:
        value, end = decode_json_at(text, start + 1 if doubled else start)
    except InputError:
        return None
    if doubled:  # the call's own braces inside one more pair: the outer one must close,
        # or be missing at the very end of the reply (the model stopped one brace short)
        closing = len(text[end:]) - len(text[end:].lstrip())
        if text.startswith("}", end + closing):
            end += closing + 1
        elif text[end:].strip():
            return None
    try:
        items = _items(value)
    except _NotACall:
        return None
    return end, JSON_DOUBLED if doubled else JSON, items


def _tag_calls(body: str, form: str) -> tuple[str, list[tuple[str, dict[str, Any]]]]:
    """The calls in a tag block's ``body``: none for an empty pair, the XML form, or JSON."""
    if not body.strip():
        return form, []
    if _XML_FUNCTION.search(body):
        return XML_FUNCTION, _xml_calls(body)
    return form, _json_calls(body)


def _xml_calls(body: str) -> list[tuple[str, dict[str, Any]]]:
    """``<function><name>N</name><arguments><k>v</k>...</arguments></function>``, each; a
    definition (its description, its parameters' schema) or anything else is ``_NotACall``."""
    matches = list(_XML_FUNCTION.finditer(body))
    if _prose(body, [m.span() for m in matches]).strip():
        raise _NotACall
    items: list[tuple[str, dict[str, Any]]] = []
    for match in matches:
        call = _XML_NAME.fullmatch(match.group(1))
        if call is None:
            raise _NotACall
        values = list(_XML_ARGUMENT.finditer(call.group(2)))
        if _prose(call.group(2), [v.span() for v in values]).strip():
            raise _NotACall
        # Values stay text here; _valid reads non-string properties as JSON.
        items.append((call.group(1), {v.group(1): _RawValue(v.group(2).strip()) for v in values}))
    return items


def _json_calls(body: str) -> list[tuple[str, dict[str, Any]]]:
    try:
        value = load_json(body.strip())
    except InputError:
        raise _NotACall from None
    return _items(value)


def _items(value: Any) -> list[tuple[str, dict[str, Any]]]:
    """(name, arguments) of a call object or a list of them; ``_NotACall`` for anything else."""
    values = value if isinstance(value, list) else [value]
    if not values:
        raise _NotACall
    items = []
    for item in values:
        if not isinstance(item, dict) or not set(item) <= _CALL_KEYS or ("name" in item) == ("function" in item):
            raise _NotACall  # not a call object, or its name given twice or not at all
        name = item.get("name", item.get("function"))
        if not isinstance(name, str):
            raise _NotACall
        if ("arguments" in item) == ("parameters" in item):  # neither, or both: not a call
            raise _NotACall
        arguments = item.get("arguments", item.get("parameters"))
        if isinstance(arguments, str):  # OpenAI's own layout: the object as JSON text
            try:
                arguments = load_json(arguments)
            except InputError:
                raise _NotACall from None
        if not isinstance(arguments, dict):
            raise _NotACall
        items.append((name, arguments))
    return items


def _function_calls(text: str) -> tuple[str, list[tuple[str, dict[str, Any]]]]:
    """The ``<function=NAME>`` calls in ``text`` (a tag block): JSON arguments or parameters."""
    items: list[tuple[str, dict[str, Any]]] = []
    forms = set()
    matches = list(_FUNCTION.finditer(text))
    if not matches or _prose(text, [m.span() for m in matches]).strip():
        raise _NotACall
    for match in matches:
        name, body = match.group(1), match.group(2)
        parameters = list(_PARAMETER.finditer(body))
        if parameters:
            if _prose(body, [p.span() for p in parameters]).strip():
                raise _NotACall
            # Values stay text here; _valid reads non-string properties as JSON.
            items.append((name, {p.group(1): _RawValue(_strip_newline(p.group(2))) for p in parameters}))
            forms.add(FUNCTION_PARAMETERS)
        else:
            try:
                arguments = load_json(body.strip()) if body.strip() else {}
            except InputError:
                raise _NotACall from None
            if not isinstance(arguments, dict):
                raise _NotACall
            items.append((name, arguments))
            forms.add(FUNCTION_TAG)
    return (FUNCTION_PARAMETERS if FUNCTION_PARAMETERS in forms else FUNCTION_TAG), items


class _RawValue(str):
    """A ``<parameter>`` value as written: its JSON type comes from the schema."""


def _strip_newline(value: str) -> str:
    # The template puts the value on its own line: one newline each side is layout.
    return value.removeprefix("\n").removesuffix("\n")


def _prose(text: str, spans: list[tuple[int, int]]) -> str:
    pieces, position = [], 0
    for start, end in sorted(spans):
        pieces.append(text[position:start])
        position = end
    pieces.append(text[position:])
    return re.sub(r"\n{3,}", "\n\n", "".join(pieces)).strip()


# --- validating ---------------------------------------------------------------------------


def _valid(name: str, arguments: dict[str, Any], schemas: dict[str, dict[str, Any]]) -> bool:
    schema = schemas.get(name)
    if schema is None:
        return False
    properties = schema.get("properties") if isinstance(schema.get("properties"), dict) else None
    for key, value in list(arguments.items()):
        if isinstance(value, _RawValue):
            arguments[key] = _typed(str(value), (properties or {}).get(key))
    extra = schema.get("additionalProperties")
    if properties is not None and (extra is None or extra is False) and not set(arguments) <= set(properties):
        return False
    import jsonschema  # on first use, as the registry does: it costs the app's first frame

    try:
        validator = jsonschema.validators.validator_for(schema)(schema)
        return next(iter(validator.iter_errors(arguments)), None) is None
    except Exception:  # noqa: BLE001 - a schema the validator cannot use: nothing is recovered
        return False


def _typed(value: str, schema: Any) -> Any:
    if isinstance(schema, dict) and schema.get("type") == "string":
        return value
    try:
        return load_json(value.strip())
    except InputError:
        return value  # not JSON: the schema then says whether text will do
