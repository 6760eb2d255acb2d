"""Tools the conversation model can call, confined to a workspace, with approval rules.

No UI and no model loop here: ``registry.ToolRegistry`` lists tools for a request and
turns one call into one result; ``approval.decide`` says whether a call may run;
``workspace.Workspace`` is the boundary. MCP tools plug in as ``base.Tool`` subclasses
of kind ``external``.
"""

from typing import TYPE_CHECKING

from hermes_tui.util.lazy_exports import lazy_exports

if TYPE_CHECKING:
    from .approval import (
        Action,
        ApprovalRequest,
        Decision,
        MemoryRuleStore,
        Mode,
        RepeatTracker,
        Rule,
        RuleStore,
        build_request,
        check_command,
        decide,
    )
    from .base import Status, Tool, ToolContext, ToolError, ToolKind, ToolResult, ToolStopped, Trust
    from .builtin import builtin_registry, builtin_tools
    from .registry import Call, ToolRegistry
    from .workspace import OutsideAccess, Workspace

# Each name's module, imported on first use: the app's first frame needs the approval
# modes, not the built-in tools or the argument validator (jsonschema) behind them.
_MODULE_OF = {
    **dict.fromkeys(("Action", "ApprovalRequest", "Decision", "MemoryRuleStore", "Mode", "RepeatTracker",
                     "Rule", "RuleStore", "build_request", "check_command", "decide"), "approval"),
    **dict.fromkeys(("Status", "Tool", "ToolContext", "ToolError", "ToolKind", "ToolResult", "ToolStopped",
                     "Trust"), "base"),
    **dict.fromkeys(("builtin_registry", "builtin_tools"), "builtin"),
    **dict.fromkeys(("Call", "ToolRegistry"), "registry"),
    **dict.fromkeys(("OutsideAccess", "Workspace"), "workspace"),
}


__getattr__ = lazy_exports(__name__, _MODULE_OF, globals())


__all__ = [
    "Action", "ApprovalRequest", "Call", "Decision", "MemoryRuleStore", "Mode", "OutsideAccess",
    "RepeatTracker", "Rule", "RuleStore", "Status", "Tool", "ToolContext", "ToolError",
    "ToolKind", "ToolRegistry", "ToolResult", "ToolStopped", "Trust", "Workspace", "build_request",
    "builtin_registry", "builtin_tools", "check_command", "decide",
]
