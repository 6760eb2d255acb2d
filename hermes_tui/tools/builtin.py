"""The built-in tool set, kept small: small local models do worse with many tools."""

from __future__ import annotations

from .base import Tool
from .files import EditFile, Glob, ListDir, ReadFile, WriteFile
from .registry import ToolRegistry
from .search import Grep
from .shell import RunShell


def builtin_tools() -> list[Tool]:
    return [ReadFile(), ListDir(), Glob(), Grep(), EditFile(), WriteFile(), RunShell()]


def builtin_registry() -> ToolRegistry:
    # Their schemas are checked by tests/tools/test_tools_registry.py, not at every start.
    return ToolRegistry(builtin_tools(), schemas_checked=True)
