"""What a configured server is started with: its command and environment, or its URL and headers.

A stdio server gets only the variables its config names, read from our environment
when it starts (plus PATH and HOME, and the few the SDK always passes: LOGNAME, SHELL,
TERM, USER): never our whole environment, which holds keys for other services. A header
value's ``${NAME}`` references are filled in the same way. A variable that is not set is
a start failure naming it, never an empty value sent in its place.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

from mcp.client.stdio import StdioServerParameters

from hermes_tui.config import ENV_REFERENCE, McpServerConfig, env_reference
from hermes_tui.util.errors import AppError

# Beyond the SDK's fixed set (which already has PATH and HOME on POSIX).
ALWAYS_PASSED = ("PATH", "HOME")


class LaunchError(AppError):
    """The server cannot be started as configured (one line)."""


def _lookup(name: str, environ: Mapping[str, str], what: str) -> str:
    value = environ.get(name)
    if value is None:
        raise LaunchError(f"{what} names ${name}, which is not set in the environment")
    return value


def stdio_parameters(config: McpServerConfig, environ: Mapping[str, str] = os.environ) -> StdioServerParameters:
    env = {name: environ[name] for name in ALWAYS_PASSED if name in environ}
    for name, ref in config.env.items():
        env[name] = _lookup(env_reference(ref) or "", environ, f"env {name}")
    cwd = Path(config.cwd).expanduser() if config.cwd else None
    if cwd is not None and not cwd.is_dir():
        raise LaunchError(f"cwd {config.cwd}: no such directory")
    return StdioServerParameters(command=config.command, args=list(config.args), env=env, cwd=cwd)


def http_headers(config: McpServerConfig, environ: Mapping[str, str] = os.environ) -> dict[str, str]:
    def fill(name: str, template: str) -> str:
        return ENV_REFERENCE.sub(lambda m: _lookup(m.group(1) or m.group(2), environ, f"header {name}"), template)

    return {name: fill(name, template) for name, template in config.headers.items()}
