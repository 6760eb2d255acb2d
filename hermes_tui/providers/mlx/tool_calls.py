"""The tool calls in an in-process MLX model's output, split from its reply text.

mlx-lm picks a tool parser from the model's chat template (or ``tool_parser_type`` in
``tokenizer_config.json``); the tokenizer wrapper then knows the markers around a call
(``tool_call_start``/``tool_call_end``; Mistral's ``[TOOL_CALLS]`` has no end: the call
runs to the end of the reply) and the parser that reads the text between them. The
text is split with mlx-lm's own ``TextStateMachine`` (as ``mlx_lm.server`` does, so a
marker split across decoded pieces is still found and never shown), and each call's
text is read with ``tokenizer.tool_parser``.

A call whose text the parser cannot read (cut off by ``max_tokens``, or not what the
format says) still becomes a call: its name if one can be seen, else "", and the raw
text as its arguments, so the caller answers it with an error the model can correct.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from hermes_tui.chat.client import ChatDelta, ChatToolDelta, tool_call
from hermes_tui.util.untrusted import InputError, load_json

if TYPE_CHECKING:  # imported by the first load: MLX is slow to import
    from mlx_lm.tokenizer_utils import TokenizerWrapper

# mlx-lm leaves TextStateMachine unannotated. Its state is an opaque tuple; the text it splits
# comes back as (state name, text) segments, the state name None for text held back.
_State = Any
_Segment = tuple[str | None, str]

_NORMAL, _TOOL = "normal", "tool"
# A name in a call the parser could not read: `"name": "x"` (JSON formats) or `x[ARGS]` (Mistral).
_NAME_IN_TEXT = re.compile(r'"name"\s*:\s*"([A-Za-z0-9_.-]{1,64})"|([A-Za-z0-9_-]{1,64})\[ARGS\]')


def supports_tool_calls(tokenizer: Any) -> bool:
    """Whether mlx-lm found a tool parser for this tokenizer wrapper."""
    return bool(getattr(tokenizer, "has_tool_calling", False)) and getattr(tokenizer, "tool_parser", None) is not None


class ToolCallSplitter:
    """Feed decoded text in pieces; get reply text and tool-call events back.

    ``feed`` returns ``ChatDelta`` for text outside the markers and a
    ``ChatToolDelta(index, None, None, "")`` when a call begins (for showing it form);
    a call that ends yields one ``ChatToolDelta`` per parsed call with its id, name and
    whole arguments. ``finish`` ends an unterminated call and flushes held-back text;
    ``text`` then holds the reply text and ``tool_calls`` every call in OpenAI message
    format.
    """

    def __init__(self, tokenizer: TokenizerWrapper, tools: list[dict[str, Any]] | None = None) -> None:
        from mlx_lm.generate import TextStateMachine

        start, end = tokenizer.tool_call_start, tokenizer.tool_call_end
        self._machine = TextStateMachine(transitions={  # type: ignore[no-untyped-call]  # see _State
            _NORMAL: [(start, _TOOL)],
            _TOOL: [(end, _NORMAL)] if end else [],
        })
        self._split: Callable[[_State, str], tuple[_State, list[_Segment]]] = TextStateMachine.split
        self._flush: Callable[[_State], tuple[_State, str, str | None]] = TextStateMachine.flush
        self._state: _State = self._machine.make_state(_NORMAL)  # type: ignore[no-untyped-call]  # see _State
        self._parser = tokenizer.tool_parser
        self._tools = tools
        self._in_call = False
        self._call_text: list[str] = []
        self._shown: list[str] = []
        self.tool_calls: list[dict[str, Any]] = []

    def feed(self, text: str) -> list[ChatDelta | ChatToolDelta]:
        self._state, segments = self._split(self._state, text)
        return self._events(segments)

    def finish(self) -> list[ChatDelta | ChatToolDelta]:
        self._state, rest, state = self._flush(self._state)
        events = self._events([(state, rest)])
        if self._in_call:
            events += self._end_call()
        return events

    def _events(self, segments: list[tuple[str | None, str]]) -> list[ChatDelta | ChatToolDelta]:
        events: list[ChatDelta | ChatToolDelta] = []
        for state, text in segments:
            if state == _TOOL:
                if not self._in_call:
                    self._in_call = True
                    events.append(ChatToolDelta(len(self.tool_calls), None, None, ""))
                self._call_text.append(text)
                continue
            if self._in_call:  # back to text: the call's end marker has been read
                events += self._end_call()
            if text:
                self._shown.append(text)
                events.append(ChatDelta(text))
        return events

    @property
    def text(self) -> str:
        """The reply text shown so far: everything outside the calls."""
        return "".join(self._shown)

    def _end_call(self) -> list[ChatToolDelta]:
        text = "".join(self._call_text)
        self._in_call, self._call_text = False, []
        first = len(self.tool_calls)
        for call in self._parse(text):
            self.tool_calls.append(call)
        events = []
        for index in range(first, len(self.tool_calls)):
            function = self.tool_calls[index]["function"]
            events.append(ChatToolDelta(index, self.tool_calls[index]["id"], function["name"], function["arguments"]))
        return events

    def _parse(self, text: str) -> list[dict[str, Any]]:
        try:
            parsed = self._parser(text, self._tools)
        except Exception:  # noqa: BLE001 - every parser fails its own way; the raw text goes back
            return [_unreadable(text)]
        items = parsed if isinstance(parsed, list) else [parsed]
        calls = []
        for item in items:
            name = item.get("name") if isinstance(item, dict) else None
            if not isinstance(name, str) or not name:
                return [_unreadable(text)]
            arguments = item.get("arguments", {})
            if not isinstance(arguments, str):
                arguments = json.dumps(arguments, ensure_ascii=False)
            call_id = item.get("id") if isinstance(item.get("id"), str) else None
            calls.append(tool_call(call_id, name, arguments))
        return calls or [_unreadable(text)]


def _unreadable(text: str) -> dict[str, Any]:
    match = _NAME_IN_TEXT.search(text)
    name = (match.group(1) or match.group(2)) if match else ""
    return tool_call(None, name, text.strip())


def for_chat_template(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Messages as Hugging Face chat templates read them: a call's arguments as an
    object (OpenAI messages carry JSON text; templates render the object), an
    assistant message without content as "". Arguments that are not JSON stay text.
    Messages without calls are passed on as they are."""
    out = []
    for message in messages:
        calls = message.get("tool_calls")
        if message.get("role") != "assistant" or not calls:
            out.append(message)
            continue
        converted = []
        for call in calls:
            function = dict(call.get("function") or {})
            arguments = function.get("arguments")
            if isinstance(arguments, str):
                try:
                    function["arguments"] = load_json(arguments, model_output=True) if arguments.strip() else {}
                except InputError:  # not JSON (or too deep): rendered as the text it is
                    pass
            converted.append({**call, "function": function})
        out.append({**message, "content": message.get("content") or "", "tool_calls": converted})
    return out
