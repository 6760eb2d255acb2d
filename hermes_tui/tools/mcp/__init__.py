"""MCP servers as tools: the config's ``mcp_servers`` started in the background, each
server's tools offered as ``Tool``s of kind ``external``. See ``manager``."""

from .manager import McpManager, McpTool, ServerState, ServerStatus

__all__ = ["McpManager", "McpTool", "ServerState", "ServerStatus"]
