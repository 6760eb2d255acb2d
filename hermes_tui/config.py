"""Load, validate and write ``config.yaml``.

The schema is a tree of pydantic models, strict on purpose: ``threshold: "0.5"`` or
``protect_first_n: 2.0`` is a mistake to point at, not a value to guess at. Every
problem becomes a :class:`ConfigError` whose text is one line naming the file, the
line and the dotted key, because the person reading it is fixing a YAML file by hand.

The documented default file is rendered from the models themselves (each field's
``description`` is its comment), so the file and the schema cannot drift apart.
"""

from __future__ import annotations

import difflib
import json
import os
import re
import tempfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal, get_args, get_origin

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator
from pydantic.fields import FieldInfo
from pydantic_core import PydanticCustomError

from hermes_tui import paths
from hermes_tui.untrusted import InputError, load_yaml

__all__ = [
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
    "default_config_text",
    "foreign_config_problem",
    "load_config",
    "parse_override",
    "refuse_foreign_config",
    "render_config_text",
    "save_config",
    "write_default_config",
]

ChatProvider = Literal["auto", "mlx", "openai-api"]
# "extractive" is the built-in deterministic summarizer: it needs no model, which
# makes it the fallback that always works. It cannot hold a conversation, so only
# the compression model may be one.
CompressionProvider = Literal["auto", "mlx", "openai-api", "extractive"]
MicroCompactMode = Literal["merge", "append"]
CompactionPolicyName = Literal["watermark", "per_exchange", "per_turn"]
ApprovalMode = Literal["read-only", "ask", "auto-edit", "full"]

# Servers people name as a provider; each one speaks the OpenAI API.
_OPENAI_COMPATIBLE = {"openai", "ollama", "llama.cpp", "llamacpp", "llama-server", "lmstudio", "lm-studio", "vllm"}
_ENV_VAR_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def _setting(default: Any = None, comment: str = "", *, note: str | None = None, **kw: Any) -> Any:
    """A field with its config-file comment (``note``: extra lines written above the key)."""
    extra = {"note": note} if note else None
    return Field(default, description=comment, json_schema_extra=extra, **kw)


def _section(cls: type[BaseModel], comment: str = "") -> Any:
    return Field(default_factory=cls, description=comment)


class _Section(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)

    @model_validator(mode="before")
    @classmethod
    def _empty_section_means_defaults(cls, data: Any) -> Any:
        # `compression:` with every key under it commented out is YAML null; the
        # user meant "defaults", not "an error".
        if isinstance(data, dict):
            empty = [
                name
                for name, info in cls.model_fields.items()
                if data.get(name, ...) is None and _section_class(info) is not None
            ]
            if empty:
                data = {**data, **{name: {} for name in empty}}
        return data


class _Endpoint(_Section):
    """Fields shared by the chat model and the compression model."""

    @field_validator("api_key_env", check_fields=False)
    @classmethod
    def _names_a_variable(cls, value: str) -> str:
        if value and not _ENV_VAR_NAME.fullmatch(value):
            # Never echo the value: it is most likely the key itself.
            raise PydanticCustomError(
                "env_var_name",
                "must be the name of an environment variable (like OPENAI_API_KEY), "
                "not the key itself; put the key in the environment or a .env file",
            )
        return value

    @field_validator("base_url", check_fields=False)
    @classmethod
    def _is_http_url(cls, value: str) -> str:
        if value and not value.startswith(("http://", "https://")):
            raise PydanticCustomError(
                "http_url", "must start with http:// or https:// (or be empty), got {got}", {"got": repr(value)}
            )
        return value


class ModelConfig(_Endpoint):
    provider: ChatProvider = _setting("auto", "auto | mlx | openai-api")
    model: str = _setting("", "mlx: local dir or HF repo id; openai-api: model name")
    base_url: str = _setting("", "openai-api endpoint, e.g. http://localhost:8080/v1")
    api_key_env: str = _setting("OPENAI_API_KEY", "the key itself is read from the environment / .env")
    context_length: int | None = _setting(
        None, "override (>= 256); null = resolve (model config, /v1/models, table)", ge=256
    )
    max_tokens: int = _setting(1024, "longest reply, in generated tokens (>= 1)", ge=1)


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
    # append by default, from benchmarks/bench_pass_cost.py (merge vs append, 50 passes of a
    # real session): a pass generates only the exchange's new lines instead of the whole
    # summary, and the summary stays a byte-stable prefix for the prefix cache. Generated
    # tokens, the part that grows with the summary in merge, dominate a pass's model time.
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
    tokenizer: str = _setting(
        "",
        "tokenizer.json, or a model folder holding one",
        note=(
            'Token counts use this tokenizer. "" = the chat model\'s tokenizer when\n'
            "that model is a local folder, else an estimate."
        ),
    )


    @model_validator(mode="after")
    def _marks_in_order(self) -> CompressionConfig:
        if self.low_water >= self.high_water:
            raise PydanticCustomError(
                "watermarks", "low_water ({low}) must be under high_water ({high})",
                {"low": self.low_water, "high": self.high_water},
            )
        return self


class AuxiliaryCompressionConfig(_Endpoint):
    provider: CompressionProvider = _setting(
        "auto",
        "auto | mlx | openai-api | extractive",
        note=(
            "auto: mlx where MLX has a GPU and a model, else openai-api.\n"
            "extractive: built-in deterministic summarizer; needs no model."
        ),
    )
    model: str = _setting("", "mlx: local dir or HF repo id; openai-api: model name")
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


# --------------------------------------------------------------------------- MCP servers

McpTrust = Literal["ask", "read-only", "trusted"]
_SERVER_NAME = re.compile(r"[A-Za-z0-9_-]{1,32}")
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

    @field_validator("env", mode="before")
    @classmethod
    def _env_names_variables(cls, value: Any) -> Any:
        if isinstance(value, list):
            for name in value:
                if not isinstance(name, str) or not _ENV_VAR_NAME.fullmatch(name):
                    raise PydanticCustomError(
                        "env_reference", "a list of variable names to pass (like GITHUB_TOKEN), got {got}",
                        {"got": _shown(name)})
            return {name: f"${name}" for name in value}
        if isinstance(value, dict):
            for name, ref in value.items():
                if not isinstance(name, str) or not _ENV_VAR_NAME.fullmatch(name):
                    raise PydanticCustomError("env_reference", "{name} is not a variable name", {"name": repr(name)})
                if not isinstance(ref, str) or env_reference(ref) is None:
                    # Never echo the value: it may be the secret itself.
                    raise PydanticCustomError(
                        "env_reference",
                        "{name} must name a variable of our environment ($NAME), not hold a value; "
                        "put the value in the environment or a .env file", {"name": name})
        return value

    @field_validator("headers", mode="before")
    @classmethod
    def _headers_name_variables(cls, value: Any) -> Any:
        if isinstance(value, dict):
            for name, text in value.items():
                if not isinstance(text, str) or not env_references(text):
                    raise PydanticCustomError(
                        "env_reference",
                        "header {name} must take its value from the environment, like "
                        '"Bearer ${TOKEN}"; literal values (secrets) do not belong in the file',
                        {"name": name})
        return value

    @model_validator(mode="after")
    def _one_transport(self) -> McpServerConfig:
        if bool(self.command) == bool(self.url):
            raise PydanticCustomError("mcp_transport", "set either command (stdio) or url (streamable HTTP)")
        if self.url and not self.url.startswith(("http://", "https://")):
            raise PydanticCustomError("mcp_transport", "url must start with http:// or https://")
        if self.command and self.headers:
            raise PydanticCustomError("mcp_transport", "headers are for url servers; a command takes env")
        if self.url and (self.args or self.env or self.cwd):
            raise PydanticCustomError("mcp_transport", "args, env and cwd are for command servers")
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

    @field_validator("mcp_servers", mode="before")
    @classmethod
    def _server_names(cls, value: Any) -> Any:
        if value is None:
            return {}  # `mcp_servers:` with every server commented out
        if isinstance(value, dict):
            for name in value:
                if not isinstance(name, str) or not _SERVER_NAME.fullmatch(name):
                    raise PydanticCustomError(
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


# --------------------------------------------------------------------------- errors


@dataclass(frozen=True)
class ConfigProblem:
    """One problem; ``origin`` is the file (or a label such as ``--set``)."""

    origin: str | None
    line: int | None
    key: str | None
    message: str

    def __str__(self) -> str:
        parts = [self.origin] if self.origin else []
        if self.line is not None:
            parts.append(f"line {self.line}")
        if self.key:
            parts.append(self.key)
        parts.append(self.message)
        return ": ".join(parts)


class ConfigError(Exception):
    """Bad configuration. ``str()`` is one line: the first problem in file order."""

    def __init__(self, problems: Sequence[ConfigProblem]):
        if not problems:
            raise ValueError("ConfigError needs at least one problem")
        self.problems: list[ConfigProblem] = list(problems)
        first = self.problems[0]
        self.path, self.line, self.key, self.message = first.origin, first.line, first.key, first.message
        more = len(self.problems) - 1
        text = str(first) + (f" (and {more} more problem{'s' if more > 1 else ''})" if more else "")
        super().__init__(text)


def _error(origin: Path | str | None, message: str, *, line: int | None = None, key: str | None = None) -> ConfigError:
    return ConfigError([ConfigProblem(str(origin) if origin else None, line, key, message)])


# --------------------------------------------------------------------------- schema walking


def _section_class(info: FieldInfo) -> type[_Section] | None:
    ann = info.annotation
    return ann if isinstance(ann, type) and issubclass(ann, _Section) else None


def _named_section_class(info: FieldInfo) -> type[_Section] | None:
    """For a mapping of names to sections (``mcp_servers``), the section class."""
    args = get_args(info.annotation)
    if get_origin(info.annotation) is dict and len(args) == 2:
        cls = args[1]
        return cls if isinstance(cls, type) and issubclass(cls, _Section) else None
    return None


def _model_at(loc: Sequence[Any]) -> type[_Section] | None:
    """The section model reached by following ``loc`` from the root, if any."""
    model: type[_Section] = Config
    parts = list(loc)
    while parts:
        part = parts.pop(0)
        info = model.model_fields.get(part) if isinstance(part, str) else None
        cls = _section_class(info) if info else None
        if cls is None and info is not None and parts:
            cls = _named_section_class(info)
            parts.pop(0)  # the entry's name
        if cls is None:
            return None
        model = cls
    return model


def _field_at(loc: Sequence[Any]) -> FieldInfo | None:
    if not loc:
        return None
    model = _model_at(loc[:-1])
    return model.model_fields.get(loc[-1]) if model and isinstance(loc[-1], str) else None


def _all_keys(model: type[_Section] = Config, prefix: str = "") -> list[str]:
    keys = []
    for name, info in model.model_fields.items():
        keys.append(prefix + name)
        cls = _section_class(info)
        if cls:
            keys.extend(_all_keys(cls, prefix + name + "."))
    return keys


# --------------------------------------------------------------------------- messages


def _shown(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, Mapping):
        return "a section of keys"
    if isinstance(value, (list, tuple, set)):
        return "a list"
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def _bounds(info: FieldInfo | None) -> str:
    words = {"gt": "greater than", "ge": "at least", "lt": "less than", "le": "at most"}
    parts = []
    for item in info.metadata if info else ():
        for attr, word in words.items():
            bound = getattr(item, attr, None)
            if bound is not None:
                parts.append(f"{word} {bound}")
    return " and ".join(parts)


def _unquote_hint(value: Any, wanted: type) -> str:
    if not isinstance(value, str):
        return ""
    if value.strip().endswith("%") and wanted is float:
        return " (write a fraction: 0.8 for 80%)"
    try:
        parsed, _ = load_yaml(value)
    except InputError:
        return ""
    ok = type(parsed) is wanted or (wanted is float and type(parsed) is int)
    return " (remove the quotes)" if ok else ""


def _unknown_key_message(loc: Sequence[Any]) -> str:
    name = str(loc[-1])
    here = ".".join(str(p) for p in loc[:-1])
    model = _model_at(loc[:-1])
    choices = list(model.model_fields) if model else []
    close = difflib.get_close_matches(name, choices, n=1, cutoff=0.6)
    if close:
        return f"unknown key (did you mean {close[0]}?)"
    homes = [k.rpartition(".")[0] for k in _all_keys() if k.rpartition(".")[2] == name]
    homes = [h for h in homes if h != here]
    if homes:
        where = " or ".join(h or "the top level" for h in homes)
        return f"unknown key (it belongs under {where})"
    listing = ", ".join(choices)
    return f"unknown key (known keys here: {listing})" if listing else "unknown key"


def _message(err: Mapping[str, Any]) -> str:
    kind, loc, value = err["type"], err["loc"], err.get("input")
    info = _field_at(loc)
    got = _shown(value)
    if kind in ("extra_forbidden", "invalid_key"):
        return _unknown_key_message(loc)
    if kind in ("float_type", "float_parsing"):
        return f"expected a number, got {got}{_unquote_hint(value, float)}"
    if kind in ("int_type", "int_parsing", "int_from_float"):
        return f"expected a whole number, got {got}{_unquote_hint(value, int)}"
    if kind in ("bool_type", "bool_parsing"):
        return f"expected true or false, got {got}{_unquote_hint(value, bool)}"
    if kind == "string_type":
        hint = f' (put it in quotes: "{value}")' if isinstance(value, (int, float, bool)) else ""
        return f"expected text, got {got}{hint}"
    if kind == "literal_error":
        choices = [str(c) for c in get_args(info.annotation)] if info else []
        message = f"expected one of {', '.join(choices)}; got {got}" if choices else f"{err['msg']}, got {got}"
        if loc[-1] == "provider" and value == "extractive":
            return message + " (extractive is only for auxiliary.compression.provider)"
        if isinstance(value, str) and value.lower() in _OPENAI_COMPATIBLE:
            return message + " (for an OpenAI-compatible server use openai-api and set base_url)"
        if isinstance(value, str):
            close = [c for c in choices if c.lower() == value.lower()] or difflib.get_close_matches(value, choices, 1)
            if close:
                return message + f" (did you mean {close[0]}?)"
        return message
    if kind in ("model_type", "model_attributes_type", "dict_type"):
        return f"expected a section of keys (key: value lines), got {got}"
    if kind in ("greater_than", "greater_than_equal", "less_than", "less_than_equal"):
        bounds = _bounds(info) or err["msg"].lower()
        nullable = " (or null)" if info is not None and info.default is None else ""
        return f"must be {bounds}{nullable}, got {got}"
    if kind == "finite_number":
        return f"must be a finite number, got {got}"
    if kind in ("env_var_name", "http_url", "env_reference", "mcp_transport", "mcp_server_name", "watermarks"):
        return err["msg"]
    message = err["msg"]
    return f"{message[:1].lower()}{message[1:]}, got {got}"


def _problems(exc: ValidationError, origin: str | None, root: yaml.Node | None) -> list[ConfigProblem]:
    found = []
    for err in exc.errors():
        loc = tuple(err["loc"])
        line = _line_of(root, loc, at_key=err["type"] in ("extra_forbidden", "invalid_key")) if root else None
        found.append(ConfigProblem(origin, line, ".".join(str(p) for p in loc) or None, _message(err)))
    return sorted(found, key=lambda p: (p.line is None, p.line or 0))


# --------------------------------------------------------------------------- YAML nodes


def _line_of(root: yaml.Node, loc: Sequence[Any], *, at_key: bool) -> int:
    """1-based line of the node at ``loc`` (its key for unknown keys), or the nearest parent."""
    node, line = root, root.start_mark.line + 1
    for part in loc:
        if not isinstance(node, yaml.MappingNode):
            break
        pair = next(
            ((k, v) for k, v in node.value if isinstance(k, yaml.ScalarNode) and k.value == str(part)), None
        )
        if pair is None:
            break
        key_node, node = pair
        line = key_node.start_mark.line + 1
    else:
        if not at_key:
            line = node.start_mark.line + 1
    return line


def _duplicate_keys(root: yaml.Node, origin: str) -> list[ConfigProblem]:
    # PyYAML keeps the last of two equal keys and drops the first without a word;
    # that silently loses a setting, so it is an error here. An alias is the node it
    # names, shared: each node is checked once, or an alias bomb takes exponential time.
    found: list[ConfigProblem] = []
    visited: set[int] = set()
    pending: list[tuple[yaml.Node, str]] = [(root, "")]
    while pending:
        node, prefix = pending.pop()
        if id(node) in visited:
            continue
        visited.add(id(node))
        if isinstance(node, yaml.MappingNode):
            seen: dict[str, int] = {}
            for key_node, value_node in node.value:
                if not isinstance(key_node, yaml.ScalarNode) or key_node.tag == "tag:yaml.org,2002:merge":
                    continue
                line = key_node.start_mark.line + 1
                dotted = prefix + key_node.value
                if key_node.value in seen:
                    found.append(
                        ConfigProblem(origin, line, dotted, f"duplicate key (also set on line {seen[key_node.value]})")
                    )
                else:
                    seen[key_node.value] = line
                pending.append((value_node, dotted + "."))
        elif isinstance(node, yaml.SequenceNode):
            pending.extend((item, prefix) for item in node.value)
    return found


def _parse(text: str, origin: str) -> tuple[Any, yaml.Node | None]:
    """The document's data and its node tree (for line numbers), from one bounded parse."""
    try:
        return load_yaml(text)
    except InputError as exc:
        raise _error(origin, str(exc)) from None


# --------------------------------------------------------------------------- public API


def load_config(path: Path | None = None) -> Config:
    """Read and validate ``path`` (default: :func:`paths.config_path`).

    A missing file, an empty file or one holding only comments gives the defaults.
    Loading never creates the file.
    """
    path = Path(path) if path is not None else paths.config_path()
    origin = str(path)
    try:
        text = path.read_text(encoding="utf-8-sig")
    except FileNotFoundError:
        return Config()
    except UnicodeDecodeError as exc:
        raise _error(origin, f"not UTF-8 text (bad byte at offset {exc.start})") from None
    except OSError as exc:
        raise _error(origin, f"cannot read: {exc.strerror or exc}") from None

    data, root = _parse(text, origin)
    if data is None:
        return Config()
    if not isinstance(data, dict):
        line = root.start_mark.line + 1 if root is not None else None
        raise _error(
            origin, f"the top level must be sections of keys (model, compression, auxiliary), got {_shown(data)}", line=line
        )
    problems = _duplicate_keys(root, origin) if root is not None else []
    try:
        config = Config.model_validate(data)
    except ValidationError as exc:
        problems += _problems(exc, origin, root)
    if problems:
        raise ConfigError(sorted(problems, key=lambda p: (p.line is None, p.line or 0)))
    return config


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
                raise _error(origin, _unknown_key_message(parts[: depth + 1]), key=dotted)
            if depth == len(parts) - 1:
                target[part] = value
            else:
                target = target[part]
    try:
        return Config.model_validate(data)
    except ValidationError as exc:
        raise ConfigError(_problems(exc, origin, None)) from None


def parse_override(text: str) -> tuple[str, Any]:
    """``"compression.threshold=0.5"`` → ``("compression.threshold", 0.5)``; values are read as YAML."""
    key, sep, raw = text.partition("=")
    key = key.strip()
    if not sep or not key:
        raise _error(None, f"expected KEY=VALUE (like compression.threshold=0.5), got {text!r}")
    try:
        value = load_yaml(raw)[0] if raw.strip() else ""
    except InputError:
        value = raw  # not YAML: keep the text; validation will say if text is wrong here
    return key, value


_HEADER = """\
# hermes-tui configuration.
# Every key is shown with its default; delete a key (or this file) to get the default back.
# HERMES_TUI_HOME, when set, moves this file and every other hermes-tui file.
# The settings screen edits values in place and keeps your comments where it can.
"""
_COMMENT_COLUMN = 40


def _scalar(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        return str(int(value)) if value.is_integer() else repr(value)
    if isinstance(value, int):
        return str(value)
    if value == "":
        return '""'
    dumped = yaml.safe_dump(value, default_flow_style=True, width=10**9)
    dumped = dumped.removesuffix("\n").removesuffix("\n...").strip()
    return dumped if "\n" not in dumped else json.dumps(value)


def _render(model: BaseModel, indent: str, lines: list[str]) -> None:
    for name, info in type(model).model_fields.items():
        value = getattr(model, name)
        note = (info.json_schema_extra or {}).get("note") if isinstance(info.json_schema_extra, dict) else None
        for note_line in (note or "").splitlines():
            lines.append(f"{indent}# {note_line}")
        block = _section_class(info) or (_named_section_class(info) and value)
        text = f"{indent}{name}:" if block else f"{indent}{name}: {_scalar(value)}"
        if info.description:
            text = f"{text.ljust(_COMMENT_COLUMN - 2)}  # {info.description}"
        lines.append(text)
        if _section_class(info):
            _render(value, indent + "  ", lines)
        elif _named_section_class(info):
            for entry, section in value.items():
                lines.append(f"{indent}  {_scalar(entry)}:")
                _render(section, indent + "    ", lines)


def render_config_text(config: Config) -> str:
    """``config`` as a commented config.yaml (every key, with its comment)."""
    lines: list[str] = []
    _render(config, "", lines)
    return _HEADER + "\n".join(lines) + "\n"


def default_config_text() -> str:
    return render_config_text(Config())


def foreign_config_problem(text: str) -> str | None:
    """Why ``text`` is not a hermes-tui config.yaml (then it is never rewritten), or None.

    Ours has only our top-level sections. Another program's config in the same place
    (Hermes Agent's has ``terminal``, ``toolsets`` and more) must survive byte for byte,
    so it is refused before anything is written. A file that is not valid YAML counts as
    ours only while every unindented line is one of our section keys (or a comment).
    """
    ours = set(Config.model_fields)
    try:
        data, _ = load_yaml(text)  # bounded: this runs on files that are not ours
    except InputError:
        for line in text.splitlines():
            if not line.strip() or line[0] in " \t#" or line.rstrip() in ("---", "..."):
                continue
            match = _TOP_LEVEL_KEY.match(line)
            if match is None or match.group(1) not in ours:
                return f"not valid YAML, and its line {line[:40]!r} is not a hermes-tui section"
        return None
    if data is None:
        return None
    if not isinstance(data, dict):
        return f"the top level is {_shown(data)}, not sections of keys"
    foreign = [str(key) for key in data if key not in ours]
    if foreign:
        listed = ", ".join(foreign[:6]) + (", ..." if len(foreign) > 6 else "")
        return f"top-level section{'s' if len(foreign) > 1 else ''} {listed} {'are' if len(foreign) > 1 else 'is'} not hermes-tui's"
    return None


_TOP_LEVEL_KEY = re.compile(r"""["']?([A-Za-z_][\w.-]*)["']?\s*:(?:\s|$)""")


def refuse_foreign_config(path: Path) -> None:
    """Raise ConfigError, naming ``path``, if a file is there that is not ours to rewrite."""
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        return
    except OSError as exc:
        raise _error(path, f"cannot read: {exc.strerror or exc}") from None
    try:
        problem = foreign_config_problem(raw.decode("utf-8-sig"))
    except UnicodeDecodeError as exc:
        problem = f"not UTF-8 text (bad byte at offset {exc.start})"
    if problem:
        raise _error(
            path,
            f"not a hermes-tui config ({problem}); it was left untouched: "
            f"point --config or {paths.HOME_ENV} at a config.yaml of hermes-tui's own",
        )


def _write_atomically(path: Path, text: str | bytes, *, overwrite: bool) -> bool:
    """Write via a temp file in the same directory, so a crash never leaves half a file.

    With ``overwrite=False`` an existing file wins (returns False) even in a race.
    """
    paths.ensure_dir(path.parent)
    fd, tmp_name = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    tmp = Path(tmp_name)
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(text.encode("utf-8") if isinstance(text, str) else text)
            handle.flush()
            os.fsync(handle.fileno())
        if overwrite:
            try:
                os.chmod(tmp, path.stat().st_mode & 0o7777)
            except FileNotFoundError:
                pass  # new file: keep mkstemp's private 0o600
            os.replace(tmp, path)
            return True
        try:
            os.link(tmp, path)  # fails if the file exists: never clobbers it
        except FileExistsError:
            return False
        except OSError:  # a filesystem without hard links
            if path.exists():
                return False
            os.replace(tmp, path)
        return True
    finally:
        tmp.unlink(missing_ok=True)


def write_default_config(path: Path | None = None) -> None:
    """Write the commented default config.yaml unless a file is already there."""
    path = Path(path) if path is not None else paths.config_path()
    try:
        _write_atomically(path, default_config_text(), overwrite=False)
    except OSError as exc:
        raise _error(path, f"cannot write: {exc.strerror or exc}") from None


def save_config(config: Config, path: Path | None = None) -> None:
    """Validate ``config`` and write it to ``path`` atomically (replacing the file).

    A file there that is not ours (:func:`foreign_config_problem`) is refused with a
    ConfigError and left as it is.
    """
    path = Path(path) if path is not None else paths.config_path()
    refuse_foreign_config(path)
    try:
        # Fields may have been assigned after construction; check them all again.
        config = Config.model_validate(config.model_dump(warnings=False))
    except ValidationError as exc:
        raise ConfigError(_problems(exc, str(path), None)) from None
    try:
        _write_atomically(path, render_config_text(config), overwrite=True)
    except OSError as exc:
        raise _error(path, f"cannot write: {exc.strerror or exc}") from None
