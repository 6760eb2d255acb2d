"""What the commands share: the one-line user error, the config with command-line flags on top,
the choices of the parsers. Light: ``--help`` imports it."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING, Any

from hermes_tui.config.provider_registry import CHAT, COMPRESSION, names
from hermes_tui.util.errors import AppError

if TYPE_CHECKING:
    from hermes_tui.config import Config

# Choices the parsers offer, named here so that building them imports no compaction code
# (tests keep them equal to analysis.replay.TURN_MODES and compaction.micro.MODES).
TURN_MODES = ("user", "step")
MICRO_MODES = ("merge", "append")
POLICIES = ("watermark", "per_exchange", "per_turn")
FALLBACK_CONTEXT_LIMIT = 32_768  # config.FALLBACK_CONTEXT_LIMIT, for --help without the config schema
# What --provider and --chat-provider accept: the registry's names (plain data, cheap to import).
COMPRESSION_PROVIDERS = names(COMPRESSION)
CHAT_PROVIDERS = names(CHAT)


class UserError(AppError):
    """A problem the user can fix; printed as one line."""


def config_from(args: argparse.Namespace, overrides: dict[str, Any] | None = None) -> Config:
    """The config file (a named one must exist), with command-line flags applied on top."""
    from hermes_tui.config import ConfigError, apply_overrides, load_config

    if args.config is not None and not args.config.is_file():
        raise UserError(f"--config {args.config}: no such file")
    config = load_config(args.config)
    overrides = {k: v for k, v in (overrides or {}).items() if v is not None}
    try:
        return apply_overrides(config, overrides, origin="command line") if overrides else config
    except ConfigError as exc:
        flag = FLAG_OF_KEY.get(exc.key or "", exc.key)
        raise UserError(f"{flag}: {exc.message}") from None


# The compact flags and the config keys they override, so errors name what was typed.
FLAG_OF_KEY = {
    "auxiliary.compression.provider": "--provider",
    "auxiliary.compression.model": "--model",
    "auxiliary.compression.base_url": "--base-url",
    "compression.threshold": "--threshold",
    "compression.target_ratio": "--target-ratio",
    "compression.protect_first_n": "--protect-first-n",
    "compression.policy": "--policy",
}
