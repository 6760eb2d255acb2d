"""What every command shares: the one-line user error and the config with flags applied."""

from __future__ import annotations

import argparse

from hermes_tui.config import Config, ConfigError, apply_overrides, load_config


class UserError(Exception):
    """A problem the user can fix; printed as one line."""


def cli_config(args: argparse.Namespace, overrides: dict | None = None) -> Config:
    """The config file (a named one must exist), with command-line flags applied on top."""
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
}
