"""A stdio "MCP server" that misbehaves on purpose, speaking raw JSON-RPC lines:
``exit`` (dies at start), ``silent`` (never answers initialize), ``malformed`` (answers
initialize and tools/list, then sends tool results of the wrong shape).
"""

from __future__ import annotations

import json
import sys

MODE = sys.argv[1]

if MODE == "exit":
    print("faulty server: cannot start (no database)", file=sys.stderr, flush=True)
    sys.exit(1)


def reply(message_id, result):
    sys.stdout.write(json.dumps({"jsonrpc": "2.0", "id": message_id, "result": result}) + "\n")
    sys.stdout.flush()


for line in sys.stdin:
    message = json.loads(line)
    method, message_id = message.get("method"), message.get("id")
    if MODE == "silent" or message_id is None:
        continue
    if method == "initialize":
        reply(message_id, {"protocolVersion": message["params"]["protocolVersion"], "capabilities": {"tools": {}},
                           "serverInfo": {"name": "faulty", "version": "1"}})
    elif method == "tools/list":
        schema = {"type": "object", "properties": {}}
        reply(message_id, {"tools": [
            {"name": "bad_shape", "description": "content is not a list", "inputSchema": schema},
            {"name": "bad_block", "description": "a content block of no known type", "inputSchema": schema},
            {"name": "bad.schema", "description": "an invalid schema",
             "inputSchema": {"type": "object", "properties": {"a": {"type": "nonsense"}}}},
        ]})
    elif method == "tools/call":
        name = message["params"]["name"]
        result = {"content": "not a list"} if name == "bad_shape" else {"content": [{"type": "hologram"}]}
        reply(message_id, result)
    else:
        sys.stdout.write(json.dumps({"jsonrpc": "2.0", "id": message_id,
                                     "error": {"code": -32601, "message": "no such method"}}) + "\n")
        sys.stdout.flush()
