"""The provider registry: every provider ``config.yaml`` can name, the roles it serves and the
backend package that implements it.

``model.provider`` and ``auxiliary.compression.provider`` take these names, or ``auto``, which
``providers.selection`` resolves (``AUTO_RULE`` says to what). Config validates the names and
writes them into its comments (``config.settings``) and points a near miss at the right one
(``config.problems``); ``providers.selection`` imports the package an entry names and asks it
for a chat client or a summarizer; the problem texts (``tui.problems``) say what each one needs
set up.

Plain data, with each backend named by its package rather than imported: config sits under
every other package (the backends import it), and a backend, with the SDK under it, is loaded
when a model is first made, not with the config.

Adding a provider is its package under ``hermes_tui/providers/`` (``providers.backend`` says
what the package offers) and an entry here; nothing else lists the names (the command line
reads them here: importing this module loads no schema or YAML). What a new provider does
not join unless it is extended to: ``auto`` (``AUTO_RULE`` and
``providers.selection.resolve_provider``), the ``/model`` picker and the models screen (``providers.choices``: models on this machine run on mlx, models an endpoint
lists on openai-api), the window probe of ``base_url`` (``providers.openai.context_probe``) and
``hermes-tui bench`` (mlx and openai-api).
"""

from __future__ import annotations

from dataclasses import dataclass

# The two roles a model plays, as the hub and the command line name them, and the config
# section that sets up each.
CHAT, COMPRESSION = "chat", "compression"
SECTIONS = {CHAT: "model", COMPRESSION: "auxiliary.compression"}

AUTO = "auto"
# What ``auto`` resolves to (providers.selection.resolve_provider), for the config's comments.
AUTO_RULE = "mlx where MLX has a GPU and a model, else openai-api"


@dataclass(frozen=True)
class Provider:
    name: str                 # what model.provider / auxiliary.compression.provider say
    package: str              # the backend, imported by providers.selection when a model is made
    roles: tuple[str, ...]    # CHAT and/or COMPRESSION
    needs_model: bool = True  # False: it answers by fixed rules, with no model to set up
    model: str = ""           # what the `model` setting names for it (config comment)
    setup: str = ""           # what a user sets up to use it (the problem texts)
    servers: str = ""         # the servers it is used with, named when no chat model is set up
    endpoint: bool = False    # reached over the network: any machine can use it, so it is offered first
    note: str = ""            # a line above auxiliary.compression.provider in config.yaml
    aliases: tuple[str, ...] = ()  # what people write meaning it; config points them at it
    alias_hint: str = ""      # how it does


PROVIDERS: tuple[Provider, ...] = (
    Provider(
        "mlx", "hermes_tui.providers.mlx", (CHAT, COMPRESSION),
        model="local dir or HF repo id", setup="an MLX model",
    ),
    Provider(
        "openai-api", "hermes_tui.providers.openai", (CHAT, COMPRESSION),
        model="model name", setup="the base URL and model name of an OpenAI-compatible server",
        servers="llama.cpp, Ollama, LM Studio, mlx_lm.server", endpoint=True,
        aliases=("openai", "ollama", "llama.cpp", "llamacpp", "llama-server", "lmstudio", "lm-studio", "vllm"),
        alias_hint="for an OpenAI-compatible server use openai-api and set base_url",
    ),
    # The built-in deterministic summarizer: it needs no model, which makes it the fallback that
    # always works. It cannot hold a conversation, so only the compression model may be one.
    Provider(
        "extractive", "hermes_tui.providers.extractive", (COMPRESSION,), needs_model=False,
        note="built-in deterministic summarizer; needs no model.",
    ),
)


def providers(role: str | None = None) -> tuple[Provider, ...]:
    """The providers that serve ``role`` (all of them when None), in the registry's order."""
    return tuple(p for p in PROVIDERS if role is None or role in p.roles)


def names(role: str) -> tuple[str, ...]:
    """What the role's ``provider`` setting accepts: ``auto``, then the providers serving it."""
    return (AUTO, *(p.name for p in providers(role)))


def provider(name: str) -> Provider | None:
    """The entry for ``name``; None for ``auto`` and for a name the registry does not know."""
    return next((p for p in PROVIDERS if p.name == name), None)
