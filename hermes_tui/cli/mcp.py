"""``hermes-tui mcp list | test NAME``: the configured MCP servers, and whether one starts.

``list`` reads the config only (nothing is started). ``test`` starts one server (even a
disabled one), waits for it within its timeout, prints its state and the tools it
offers, and stops it: exit 0 when it started, 2 with one line on stderr when not.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

# The manager finishes a start within the server's timeout; this only covers a stuck stop.
WAIT_MARGIN_S = 10.0


def add_parser(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> argparse.ArgumentParser:
    mcp = subparsers.add_parser("mcp", help="the MCP servers in config.yaml: list them, test one")
    actions = mcp.add_subparsers(dest="mcp_command", metavar="ACTION", required=True)
    listing = actions.add_parser("list", help="configured servers: enabled, transport, trust")
    listing.add_argument("--json", action="store_true", help="machine-readable output")
    listing.set_defaults(run=run_list)
    test = actions.add_parser("test", help="start one server, show its state and tools, stop it")
    test.add_argument("name", help="the server's name under mcp_servers")
    test.set_defaults(run=run_test)
    return mcp


def _servers(args: argparse.Namespace) -> dict[str, Any] | None:
    path = getattr(args, "config", None)
    if path is not None and not path.is_file():
        _fail(f"--config {path}: no such file")
        return None
    from hermes_tui.config import load_config

    return load_config(path).mcp_servers


def _fail(message: str) -> int:
    print(f"hermes-tui: {message}", file=sys.stderr)
    return 2


def run_list(args: argparse.Namespace) -> int:
    servers = _servers(args)
    if servers is None:
        return 2
    rows = [{"name": name, "enabled": s.enabled, "transport": s.transport, "trust": s.trust,
             "target": s.command if s.transport == "stdio" else s.url} for name, s in servers.items()]
    if args.json:
        print(json.dumps(rows, indent=2))
        return 0
    if not rows:
        print("no MCP servers configured (add them under mcp_servers: in config.yaml)")
        return 0
    width = max(len(r["name"]) for r in rows)
    for r in rows:
        state = "enabled " if r["enabled"] else "disabled"
        print(f"{r['name']:<{width}}  {state}  {r['transport']:<5}  trust {r['trust']:<9}  {r['target']}")
    return 0


def run_test(args: argparse.Namespace) -> int:
    from hermes_tui.tools.mcp import McpManager, ServerStatus

    servers = _servers(args)
    if servers is None:
        return 2
    if args.name not in servers:
        known = ", ".join(servers) or "none"
        return _fail(f"mcp test {args.name}: no such server under mcp_servers (configured: {known})")
    config = servers[args.name]
    manager = McpManager({args.name: config})
    try:
        manager.restart(args.name)  # a disabled server too: it is being tested
        manager.wait(timeout=config.timeout + WAIT_MARGIN_S)
        state = manager.state(args.name)
        tools = {tool.name: tool for tool in manager.tools()}
    finally:
        manager.close()
    if state.status is not ServerStatus.READY:
        return _fail(f"mcp test {args.name}: {state.status.value}: {state.reason or 'did not start'}")
    print(f"{args.name}: ready in {state.startup_ms:.0f} ms, {len(tools)} tool{'s' if len(tools) != 1 else ''}"
          f" ({config.transport}, trust {config.trust})")
    for name, tool in tools.items():
        marked = " [read-only]" if tool.read_only_hint else ""
        print(f"  {name}{marked}  {tool.description}")
    for note in state.notes:
        print(f"  note: {note}")
    return 0
