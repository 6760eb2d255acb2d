"""The ``config.yaml`` schema: every key, its type, bounds, comment and default.

The schema is a tree of sections (``schema.Section``), strict on purpose: ``threshold: "0.5"`` or
``protect_first_n: 2.0`` is a mistake to point at, not a value to guess at. Its defaults are
the only ones: compaction reads the ``compression`` section object itself (a
``ContextWindow``'s ``settings``), never a copy with defaults of its own. Reading the file is
``config.load``, writing it ``config.write``, the one-line problems ``config.problems``.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from hermes_tui.config.load import read_config
from hermes_tui.config.problems import (
    ConfigError,
    ConfigProblem,
    config_error,
    problems_in,
    section_class,
    shown_value,
    unknown_key_message,
)
from hermes_tui.config.provider_registry import AUTO, AUTO_RULE, CHAT, COMPRESSION, names, providers
from hermes_tui.config.schema import (
    Section,
    Setting,
    SettingError,
    ValidationError,
    field_check,
    section_check,
)
from hermes_tui.util.untrusted import InputError, load_yaml

__all__ = [
    "COMPRESSION_DEFAULTS",
    "FALLBACK_CONTEXT_LIMIT",
    "AgentConfig",
    "AuxiliaryCompressionConfig",
    "AuxiliaryConfig",
    "CompressionConfig",
    "Config",
    "ConfigError",
    "ConfigProblem",
    "McpServerConfig",
    "McpToolFilter",
    "ModelConfig",
    "apply_overrides",
    "load_config",
    "parse_override",
    "value_at",
]

# The providers each role may name: "auto" and the registry's (config.provider_registry). The
# schema validates against the Literal built from the registry at import; the type checker,
# which cannot evaluate it, sees the text it is.
if TYPE_CHECKING:
    ChatProvider = str
    CompressionProvider = str
else:
    ChatProvider = Literal[names(CHAT)]
    CompressionProvider = Literal[names(COMPRESSION)]
MicroCompactMode = Literal["merge", "append"]
CompactionPolicyName = Literal["watermark", "per_exchange", "per_turn"]
ApprovalMode = Literal["read-only", "ask", "auto-edit", "full"]

_ENV_VAR_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def _setting(default: Any = None, comment: str = "", *, note: str | None = None, **kw: Any) -> Any:
    """A field with its config-file comment (``note``: extra lines written above the key)."""
    extra = {"note": note} if note else None
    return Setting(default, comment, json_schema_extra=extra, **kw)


def _section(cls: type[Section], comment: str = "") -> Any:
    return Setting(default_factory=cls, description=comment)


class _Section(Section):
    @section_check(before=True)
    @classmethod
    def _empty_section_means_defaults(cls, data: Any) -> Any:
        # `compression:` with every key under it commented out is YAML null; the
        # user meant "defaults", not "an error".
        if isinstance(data, dict):
            empty = [
                name
                for name, info in cls.model_fields.items()
                if data.get(name, ...) is None and section_class(info) is not None
            ]
            if empty:
                data = {**data, **{name: {} for name in empty}}
        return data


class _Endpoint(_Section):
    """Fields shared by the chat model and the compression model."""

    @field_check("api_key_env")
    @classmethod
    def _names_a_variable(cls, value: str) -> str:
        if value and not _ENV_VAR_NAME.fullmatch(value):
            # Never echo the value: it is most likely the key itself.
            raise SettingError(
                "env_var_name",
                "must be the name of an environment variable (like OPENAI_API_KEY), "
                "not the key itself; put the key in the environment or a .env file",
            )
        return value

    @field_check("base_url")
    @classmethod
    def _is_http_url(cls, value: str) -> str:
        if value and not value.startswith(("http://", "https://")):
            raise SettingError(
                "http_url", "must start with http:// or https:// (or be empty), got {got}", {"got": repr(value)}
            )
        return value


# The conversation model's window when nothing says otherwise: budgets use it until the window
# is resolved, and resolution ends here when no source answers. The only such number.
FALLBACK_CONTEXT_LIMIT = 32_768


def _model_comment(role: str) -> str:
    """What ``model`` names under each provider of ``role`` that runs one."""
    return "; ".join(f"{p.name}: {p.model}" for p in providers(role) if p.model)


class ModelConfig(_Endpoint):
    provider: ChatProvider = _setting(AUTO, " | ".join(names(CHAT)))
    model: str = _setting("", _model_comment(CHAT))
    base_url: str = _setting("", "openai-api endpoint, e.g. http://localhost:8080/v1")
    api_key_env: str = _setting("OPENAI_API_KEY", "the key itself is read from the environment / .env")
    context_length: int | None = _setting(
        None, "override (>= 256); null = resolve (model config, /v1/models, table)", ge=256
    )
    max_tokens: int = _setting(1024, "longest reply, in generated tokens (>= 1)", ge=1)
    temperature: float | None = _setting(
        None, "sampling temperature for openai-api (0 <= x <= 2); null = the server's default",
        ge=0, le=2, allow_inf_nan=False,
    )


class CompressionConfig(_Section):
    enabled: bool = _setting(True, "compact when the context fills up")
    threshold: float = _setting(
        0.80, "compact at this share of the context window (0 < x <= 1)", gt=0, le=1, allow_inf_nan=False
    )
    target_ratio: float = _setting(
        0.20, "share of the threshold kept verbatim as the tail (0 < x < 1)", gt=0, lt=1, allow_inf_nan=False
    )
    protect_first_n: int = _setting(3, "messages after the system prompt never compacted (>= 0)", ge=0)
    micro_compact: bool = _setting(True, "after each turn, fold one exchange into a rolling summary")
    # The model-free first stage (compaction/trim.py): it rides on the splices the policy
    # decides anyway, and runs on its own only over the threshold or when a request
    # would not fit, since every in-place change breaks the chat model's prompt cache.
    trim: bool = _setting(
        True, "before any pass, cut old bulky tool results to their first and last lines (originals archived)"
    )
    trim_threshold_tokens: int = _setting(
        600, "trim: a tool result outside the tail over this many tokens (>= 300)", ge=300
    )
    # watermark by default, from benchmarks/bench_cache.py (five real sessions at 32K): a pass
    # per exchange re-prefills 6.5x the chat tokens of batch-only compaction, since every
    # splice breaks the chat model's prompt cache; 0.85/0.55 costs 1.06x with no batch.
    policy: CompactionPolicyName = _setting(
        "watermark",
        "watermark | per_exchange | per_turn",
        note=(
            "When micro passes run. watermark: once the context passes high_water, fold the\n"
            "oldest exchanges in one splice down to low_water (the chat model's prompt cache\n"
            "breaks once per several exchanges). per_exchange: one pass after every N-th\n"
            "completed exchange (agent step or reply). per_turn: one after every N-th user turn."
        ),
    )
    high_water: float = _setting(
        0.85, "watermark: start at this share of the threshold (0 < x <= 1)", gt=0, le=1, allow_inf_nan=False
    )
    low_water: float = _setting(
        0.55, "watermark: fold down to this share of the threshold (< high_water)", gt=0, lt=1,
        allow_inf_nan=False,
    )
    micro_compact_every_n_turns: int = _setting(
        1, "per_exchange / per_turn: a pass every N exchanges / turns (>= 1)", ge=1
    )
    rewarm: bool = _setting(
        True, "after a splice, re-read the context into an in-process (MLX) chat model's cache, in the background"
    )
    rewarm_server: bool = _setting(
        False,
        "after a splice, send an OpenAI-compatible chat server a one-token request",
        note="For servers with prefix caching (llama.cpp, vLLM, mlx_lm.server): they read the\n"
             "new context while the chat is idle instead of at the next message.",
    )
    micro_compact_defrag_threshold_tokens: int = _setting(
        2000, "condense the rolling summary past this size (>= 100)", ge=100
    )
    # append by default: a pass may generate only the exchange's new lines (the engine grants
    # it O(exchange) tokens, merge O(summary + exchange)), and the summary stays a byte-stable
    # prefix for the prefix cache. benchmarks/bench_pass_cost.py measures the prefill side;
    # how much a model really generates per mode only a real model shows.
    micro_compact_mode: MicroCompactMode = _setting(
        "append",
        "append | merge",
        note=(
            "append: a pass adds only the new exchange's lines to the summary (cheap, cache-friendly).\n"
            "merge: a pass rewrites the whole summary (costs O(summary) generated tokens)."
        ),
    )
    fact_guard: bool = _setting(
        True, "keep paths, identifiers, errors, URLs the summary dropped in a bounded Facts section"
    )
    user_verbatim_tokens: int | None = _setting(
        None,
        "recent user messages kept verbatim, in tokens (>= 0)",
        ge=0,
        note=(
            "null = 15% of the compaction threshold, at most 20000. Older user messages are\n"
            "archived and quoted in the summary while the quotes fit half as much, then folded."
        ),
    )
    tokenizer: str = _setting(
        "",
        "tokenizer.json, or a model folder holding one",
        note=(
            'Token counts use this tokenizer. "" = the chat model\'s tokenizer when\n'
            "that model is a local folder, else an estimate."
        ),
    )


    @section_check()
    def _marks_in_order(self) -> CompressionConfig:
        if self.low_water >= self.high_water:
            raise SettingError(
                "watermarks", "low_water ({low}) must be under high_water ({high})",
                {"low": self.low_water, "high": self.high_water},
            )
        return self


class AuxiliaryCompressionConfig(_Endpoint):
    provider: CompressionProvider = _setting(
        AUTO,
        " | ".join(names(COMPRESSION)),
        note="\n".join([f"auto: {AUTO_RULE}.", *(f"{p.name}: {p.note}" for p in providers(COMPRESSION) if p.note)]),
    )
    model: str = _setting("", _model_comment(COMPRESSION))
    base_url: str = _setting("", "openai-api endpoint, e.g. http://localhost:8080/v1")
    api_key_env: str = _setting("OPENAI_API_KEY", "the key itself is read from the environment / .env")
    timeout: float = _setting(120.0, "seconds a pass may take (> 0)", gt=0, allow_inf_nan=False)
    max_tokens: int | None = _setting(None, "cap on a pass's generated tokens; null = automatic", ge=1)


class AuxiliaryConfig(_Section):
    compression: AuxiliaryCompressionConfig = _section(
        AuxiliaryCompressionConfig, "the model that performs compaction passes"
    )


class AgentConfig(_Section):
    approval: ApprovalMode = _setting(
        "ask",
        "read-only | ask | auto-edit | full",
        note=(
            "read-only: reads only. ask: edits and commands ask first. auto-edit: workspace\n"
            "edits run unasked, commands ask. full: everything inside the workspace runs unasked."
        ),
    )
    max_steps: int = _setting(25, "model calls in one turn before it stops (>= 1)", ge=1)
    shell_timeout: float = _setting(
        120.0, "seconds a command may run (0 < x <= 600)", gt=0, le=600, allow_inf_nan=False
    )
    max_output_bytes: int = _setting(32000, "a tool result's cap, head and tail kept (>= 1000)", ge=1000)
    workspace: str = _setting("", 'the folder tools act in; "" = where hermes-tui was started')
    look_first: bool = _setting(
        True,
        "the first reply of a turn must call a tool",
        note=(
            "Small local models answer questions about the workspace without looking;\n"
            "held to a call first, they look. Asked of the server as a JSON schema."
        ),
    )
    result_note: bool = _setting(
        True,
        "after tool results, a line tells the model to answer or call the next tool",
        note="Sent with the request, not stored. Small models otherwise echo the result.",
    )


# --------------------------------------------------------------------------- MCP servers

McpTrust = Literal["ask", "read-only", "trusted"]
SERVER_NAME = re.compile(r"[A-Za-z0-9_-]{1,32}")
# An environment reference: the whole value, $NAME or ${NAME}.
ENV_REFERENCE = re.compile(r"\$(?:([A-Za-z_][A-Za-z0-9_]*)|\{([A-Za-z_][A-Za-z0-9_]*)\})")


def env_reference(value: str) -> str | None:
    """The variable ``value`` names when it is exactly ``$NAME`` or ``${NAME}``, else None."""
    match = ENV_REFERENCE.fullmatch(value)
    return (match.group(1) or match.group(2)) if match else None


def env_references(value: str) -> list[str]:
    """Every variable a header value names with ``${NAME}`` (or ``$NAME``)."""
    return [m.group(1) or m.group(2) for m in ENV_REFERENCE.finditer(value)]


class McpToolFilter(_Section):
    allow: list[str] | None = _setting(None, "only these tools (names or globs); null = all")
    deny: list[str] = _setting([], "never these tools (names or globs)")


class McpServerConfig(_Section):
    """One MCP server: a command to run (stdio) or a URL (streamable HTTP).

    Secrets never sit in the file: ``env`` and ``headers`` values only name variables
    of our environment, which are read when the server starts.
    """

    command: str = _setting("", "stdio: the program to run")
    args: list[str] = _setting([], "stdio: its arguments")
    env: dict[str, str] = _setting(
        {}, "stdio: [NAME, ...] passed as they are, or {NAME: $OTHER}; only these (and PATH, HOME) reach it"
    )
    cwd: str = _setting("", "stdio: working directory (~ allowed); \"\" = ours")
    url: str = _setting("", "streamable HTTP: the endpoint, e.g. https://example.com/mcp")
    headers: dict[str, str] = _setting({}, 'HTTP headers, values naming variables: "Bearer ${TOKEN}"')
    enabled: bool = _setting(True, "start it with the session")
    trust: McpTrust = _setting("ask", "ask | read-only | trusted")
    timeout: float = _setting(30.0, "seconds to start and list tools (> 0)", gt=0, allow_inf_nan=False)
    call_timeout: float = _setting(120.0, "seconds one tool call may take (> 0)", gt=0, allow_inf_nan=False)
    tools: McpToolFilter = _section(McpToolFilter, "which of its tools are offered")

    @field_check("env", before=True)
    @classmethod
    def _env_names_variables(cls, value: Any) -> Any:
        if isinstance(value, list):
            for name in value:
                if not isinstance(name, str) or not _ENV_VAR_NAME.fullmatch(name):
                    raise SettingError(
                        "env_reference", "a list of variable names to pass (like GITHUB_TOKEN), got {got}",
                        {"got": shown_value(name)})
            return {name: f"${name}" for name in value}
        if isinstance(value, dict):
            for name, ref in value.items():
                if not isinstance(name, str) or not _ENV_VAR_NAME.fullmatch(name):
                    raise SettingError("env_reference", "{name} is not a variable name", {"name": repr(name)})
                if not isinstance(ref, str) or env_reference(ref) is None:
                    # Never echo the value: it may be the secret itself.
                    raise SettingError(
                        "env_reference",
                        "{name} must name a variable of our environment ($NAME), not hold a value; "
                        "put the value in the environment or a .env file", {"name": name})
        return value

    @field_check("headers", before=True)
    @classmethod
    def _headers_name_variables(cls, value: Any) -> Any:
        if isinstance(value, dict):
            for name, text in value.items():
                if not isinstance(text, str) or not env_references(text):
                    raise SettingError(
                        "env_reference",
                        "header {name} must take its value from the environment, like "
                        '"Bearer ${TOKEN}"; literal values (secrets) do not belong in the file',
                        {"name": name})
        return value

    @section_check()
    def _one_transport(self) -> McpServerConfig:
        if bool(self.command) == bool(self.url):
            raise SettingError("mcp_transport", "set either command (stdio) or url (streamable HTTP)")
        if self.url and not self.url.startswith(("http://", "https://")):
            raise SettingError("mcp_transport", "url must start with http:// or https://")
        if self.command and self.headers:
            raise SettingError("mcp_transport", "headers are for url servers; a command takes env")
        if self.url and (self.args or self.env or self.cwd):
            raise SettingError("mcp_transport", "args, env and cwd are for command servers")
        return self

    @property
    def transport(self) -> str:
        return "stdio" if self.command else "http"


class Config(_Section):
    model: ModelConfig = _section(ModelConfig, "the conversation model")
    compression: CompressionConfig = _section(CompressionConfig, "when and how the context is compacted")
    auxiliary: AuxiliaryConfig = _section(AuxiliaryConfig, "helper models")
    agent: AgentConfig = _section(AgentConfig, "tools: approval, limits, the workspace")
    mcp_servers: dict[str, McpServerConfig] = _setting(
        {}, "MCP servers whose tools the agent may call, by name",
        note="mcp_servers: {name: {command: ..., args: [...], env: [VAR]} or {url: ..., headers: {...}}}",
    )

    @field_check("mcp_servers", before=True)
    @classmethod
    def _server_names(cls, value: Any) -> Any:
        if value is None:
            return {}  # `mcp_servers:` with every server commented out
        if isinstance(value, dict):
            for name in value:
                if not isinstance(name, str) or not SERVER_NAME.fullmatch(name):
                    raise SettingError(
                        "mcp_server_name", "server name {name}: use 1-32 letters, digits, _ or -",
                        {"name": repr(name)})
        return value

    def with_overrides(self, overrides: Mapping[str, Any] | None = None, /, **dotted: Any) -> Config:
        """A validated copy with dotted keys replaced, e.g. ``{"compression.threshold": 0.5}``.

        Keyword form: ``with_overrides(compression__threshold=0.5)`` (``__`` = ``.``).
        """
        merged = dict(overrides or {})
        merged.update({key.replace("__", "."): value for key, value in dotted.items()})
        return apply_overrides(self, merged)


# --------------------------------------------------------------------------- reading, overrides


def load_config(path: Path | None = None) -> Config:
    """Read and validate ``path`` (default: :func:`paths.config_path`); see ``config.load``."""
    return read_config(Config, path)


def apply_overrides(config: Config, overrides: Mapping[str, Any], *, origin: str | None = None) -> Config:
    """A new, validated Config with dotted keys replaced (CLI flags, the settings screen).

    ``origin`` labels errors (e.g. ``"--set"``). The input config is not modified.
    """
    data = config.model_dump(warnings=False)
    for dotted, value in overrides.items():
        parts = dotted.split(".")
        target = data
        for depth, part in enumerate(parts):
            if not isinstance(target, dict) or part not in target:
                raise config_error(origin, unknown_key_message(Config, parts[: depth + 1]), key=dotted)
            if depth == len(parts) - 1:
                target[part] = value
            else:
                target = target[part]
    try:
        return Config.model_validate(data)
    except ValidationError as exc:
        raise ConfigError(problems_in(Config, exc, origin, None)) from None


def value_at(config: Section, dotted: str) -> Any:
    """The value of the dotted key ``dotted`` (``"compression.threshold"``) in ``config``."""
    value: Any = config
    for part in dotted.split("."):
        value = getattr(value, part)
    return value


def parse_override(text: str) -> tuple[str, Any]:
    """``"compression.threshold=0.5"`` → ``("compression.threshold", 0.5)``; values are read as YAML."""
    key, sep, raw = text.partition("=")
    key = key.strip()
    if not sep or not key:
        raise config_error(None, f"expected KEY=VALUE (like compression.threshold=0.5), got {text!r}")
    try:
        value = load_yaml(raw)[0] if raw.strip() else ""
    except InputError:
        value = raw  # not YAML: keep the text; validation will say if text is wrong here
    return key, value


# The schema's compression defaults as one object, for a default read at import (trim.py's
# threshold). Shared: never to be changed in place.
COMPRESSION_DEFAULTS = CompressionConfig()
