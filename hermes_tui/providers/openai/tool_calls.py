"""Streamed ``delta.tool_calls`` pieces of an OpenAI-compatible reply, assembled into calls.

Pieces are assembled by their ``index`` (a server that sends none continues the last call
unless a piece brings a new ``id``): the id and name come with a call's first piece, the
arguments in pieces. The assembled calls are kept as they came (arguments never checked
here); a call without an id gets a generated one.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from hermes_tui.chat.client import ChatToolDelta, tool_call
from hermes_tui.util.untrusted import model_text


@dataclass
class PartialCall:
    id: str | None
    name: str
    arguments: list[str]


class ToolCallAssembler:
    """Streamed ``tool_calls`` pieces → complete calls, in the order they began."""

    def __init__(self) -> None:
        self.calls: list[PartialCall] = []
        self._by_index: dict[int, int] = {}  # the server's index → position in ``calls``

    def add(self, piece: dict[str, Any]) -> ChatToolDelta:
        call_id = piece.get("id") if isinstance(piece.get("id"), str) and piece.get("id") else None
        function = piece.get("function")
        function = function if isinstance(function, dict) else {}
        name = function.get("name") if isinstance(function.get("name"), str) else None
        arguments = function.get("arguments")
        if arguments is None:
            arguments = ""
        elif not isinstance(arguments, str):  # some servers send the object itself
            arguments = json.dumps(arguments, ensure_ascii=False)
        position = self._position(piece.get("index"), call_id)
        call = self.calls[position]
        if call_id and call.id is None:
            call.id = call_id
        if name and name != call.name:
            # The name comes whole in the first piece; a server that repeats it is not
            # taken to extend it, one that splits it is.
            call.name += name
        call.arguments.append(arguments)
        return ChatToolDelta(index=position, id=call_id, name=name, arguments=arguments)

    def _position(self, index: Any, call_id: str | None) -> int:
        if isinstance(index, int) and not isinstance(index, bool):
            if index not in self._by_index:
                self._by_index[index] = len(self.calls)
                self.calls.append(PartialCall(None, "", []))
            return self._by_index[index]
        # No index: a new id starts a call, anything else continues the last one.
        if call_id is not None:
            for position, call in enumerate(self.calls):
                if call.id == call_id:
                    return position
        if not self.calls or (call_id is not None and self.calls[-1].id is not None):
            self.calls.append(PartialCall(None, "", []))
        return len(self.calls) - 1

    def result(self) -> list[dict[str, Any]] | None:
        if not self.calls:
            return None
        # "" for a call without arguments would be sent back as it is; "{}" is what it means.
        # model_text: a surrogate pair split between pieces is joined, a lone half replaced.
        return [tool_call(c.id, model_text([c.name]), model_text(c.arguments) or "{}") for c in self.calls]
