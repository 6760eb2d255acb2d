"""An MCP ``CallToolResult`` as the one ``ToolResult`` the transcript holds.

Text blocks are joined; images, audio and binary resources become placeholders such as
``[image: image/png, 12 KB]`` (the payload never goes into the transcript); a text
resource is its text. ``isError`` makes an error result. Structured content stands in
when a tool returns no blocks at all.
"""

from __future__ import annotations

import base64
import binascii
import json
from typing import Any

import mcp_types as types

from hermes_tui.core.content_parts import Attachment, human_size

from ..base import ToolResult

NO_OUTPUT = "(no output)"


def _base64_size(data: str) -> str:
    try:
        return human_size(len(base64.b64decode(data, validate=False)))
    except (binascii.Error, ValueError):
        return "undecodable base64"


def _block_text(block: Any) -> str:
    if isinstance(block, types.TextContent):
        return block.text
    if isinstance(block, (types.ImageContent, types.AudioContent)):
        kind = "image" if isinstance(block, types.ImageContent) else "audio"
        return Attachment(kind, f"{block.mime_type[:40]}, {_base64_size(block.data)}").placeholder()
    if isinstance(block, types.EmbeddedResource):
        resource = block.resource
        if isinstance(resource, types.TextResourceContents):
            return resource.text
        mime = (resource.mime_type or "application/octet-stream")[:40]
        return Attachment("resource", f"{mime}, {_base64_size(resource.blob)}").placeholder()
    if isinstance(block, types.ResourceLink):
        # The URI is not shown: a link can carry a signature or a token.
        detail = ", ".join(x for x in (block.name[:60], (block.mime_type or "")[:40]) if x)
        return Attachment("resource link", detail).placeholder()
    return Attachment(str(getattr(block, "type", "unknown"))[:20]).placeholder()


def to_tool_result(result: types.CallToolResult) -> ToolResult:
    parts = [_block_text(block) for block in result.content]
    if not parts and result.structured_content is not None:
        parts = [json.dumps(result.structured_content, ensure_ascii=False)]
    text = "\n".join(parts)
    size = len(text.encode("utf-8"))
    if result.is_error:
        return ToolResult.error(text or "the tool reported an error (no message)", bytes=size)
    return ToolResult(content=text or NO_OUTPUT, bytes=size)
