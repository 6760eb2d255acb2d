"""``config.yaml``: its settings (``settings``), how it is read (``load``), written whole
(``write``) or edited in place (``edit``), the problems it can have (``problems``), the small
strict schema the settings are declared with (``schema``) and the provider registry
(``provider_registry``).

The names other packages use are re-exported here, each imported on first use: the provider
registry is plain data that ``--help`` reads, and importing it must not load the schema and
YAML behind the settings. Modules of this package import from each other directly.
"""

from typing import TYPE_CHECKING

from hermes_tui.util.lazy_exports import lazy_exports

if TYPE_CHECKING:
    from .problems import ConfigError, ConfigProblem
    from .settings import (
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

_MODULE_OF = {
    **dict.fromkeys(("ConfigError", "ConfigProblem"), "problems"),
    **dict.fromkeys((
        "COMPRESSION_DEFAULTS", "ENV_REFERENCE", "FALLBACK_CONTEXT_LIMIT", "SERVER_NAME", "AgentConfig",
        "ApprovalMode", "AuxiliaryCompressionConfig", "AuxiliaryConfig", "ChatProvider", "CompactionPolicyName",
        "CompressionConfig", "CompressionProvider", "Config", "McpServerConfig", "McpToolFilter", "McpTrust",
        "MicroCompactMode", "ModelConfig", "apply_overrides", "env_reference", "env_references", "load_config",
        "parse_override", "value_at",
    ), "settings"),
}
__getattr__ = lazy_exports(__name__, _MODULE_OF, globals())
__all__ = [
    "COMPRESSION_DEFAULTS", "ENV_REFERENCE", "FALLBACK_CONTEXT_LIMIT", "SERVER_NAME", "AgentConfig",
    "ApprovalMode", "AuxiliaryCompressionConfig", "AuxiliaryConfig", "ChatProvider", "CompactionPolicyName",
    "CompressionConfig", "CompressionProvider", "Config", "ConfigError", "ConfigProblem", "McpServerConfig",
    "McpToolFilter", "McpTrust", "MicroCompactMode", "ModelConfig", "apply_overrides", "env_reference",
    "env_references", "load_config", "parse_override", "value_at",
]
