"""``config.yaml``: its settings (``settings``), how it is read (``load``), written whole
(``write``) or edited in place (``edit``), the problems it can have (``problems``), the
small strict schema the settings are declared with (``schema``) and the providers a model
setting may name (``provider_registry``).

The names other packages use are re-exported here; modules of this package import from
each other directly.
"""

from hermes_tui.config.problems import ConfigError, ConfigProblem
from hermes_tui.config.settings import (
    COMPRESSION_DEFAULTS,
    ENV_REFERENCE,
    FALLBACK_CONTEXT_LIMIT,
    SERVER_NAME,
    AgentConfig,
    ApprovalMode,
    AuxiliaryCompressionConfig,
    AuxiliaryConfig,
    ChatProvider,
    CompactionPolicyName,
    CompressionConfig,
    CompressionProvider,
    Config,
    McpServerConfig,
    McpToolFilter,
    McpTrust,
    MicroCompactMode,
    ModelConfig,
    apply_overrides,
    env_reference,
    env_references,
    load_config,
    parse_override,
    value_at,
)

__all__ = [
    "COMPRESSION_DEFAULTS", "ENV_REFERENCE", "FALLBACK_CONTEXT_LIMIT", "SERVER_NAME", "AgentConfig",
    "ApprovalMode", "AuxiliaryCompressionConfig", "AuxiliaryConfig", "ChatProvider", "CompactionPolicyName",
    "CompressionConfig", "CompressionProvider", "Config", "ConfigError", "ConfigProblem", "McpServerConfig",
    "McpToolFilter", "McpTrust", "MicroCompactMode", "ModelConfig", "apply_overrides", "env_reference",
    "env_references", "load_config", "parse_override", "value_at",
]
