"""``hermes-tui eval TRANSCRIPT``: how much of a session's facts the rolling summary keeps.

The logic lives in ``hermes_tui.analysis.evaluate``; this module is the command line. Nothing
is stored and no telemetry is written: an evaluation is not a session.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from hermes_tui.cli.common import (
    CHAT_PROVIDERS,
    COMPRESSION_PROVIDERS,
    FALLBACK_CONTEXT_LIMIT,
    MICRO_MODES,
    POLICIES,
    TURN_MODES,
)
from hermes_tui.util.errors import AppError

if TYPE_CHECKING:
    from hermes_tui.compaction.engine import PassReport
    from hermes_tui.config import Config


def add_eval_parser(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = subparsers.add_parser(
        "eval",
        help="replay a transcript and measure which facts the rolling summary keeps",
        description="Replay a transcript through compaction and report, per fact kind, how many facts of the "
        "absorbed exchanges the rolling summary still carries after 10, 50 and 100 passes.",
    )
    p.add_argument("transcript", type=Path, help="JSON array (or JSONL) of OpenAI chat messages")
    p.add_argument("--provider", choices=COMPRESSION_PROVIDERS, help="compression provider")
    p.add_argument("--model", help="compression model (a name the endpoint serves, or an MLX model)")
    p.add_argument("--base-url", help="OpenAI-compatible endpoint for the compression model")
    p.add_argument("--mode", choices=MICRO_MODES, help="micro-compaction mode (default: compression.micro_compact_mode)")
    p.add_argument("--policy", choices=POLICIES, help="when passes run (default: compression.policy)")
    p.add_argument("--fact-guard", action=argparse.BooleanOptionalAction, default=None,
                   help="keep dropped facts in a Facts section (default: compression.fact_guard)")
    p.add_argument("--turns", choices=TURN_MODES, default="step",
                   help="a pass after every agent step (default) or after each user turn")
    p.add_argument("--context-limit", type=int, default=FALLBACK_CONTEXT_LIMIT, metavar="TOKENS",
                   help=f"the main model's context window (default {FALLBACK_CONTEXT_LIMIT:,})")
    p.add_argument("--plant-every", type=int, default=8, metavar="N",
                   help="plant a decision or an open question in every N-th assistant message (0: none)")
    p.add_argument("--seed", type=int, default=0, help="seed for the planted facts")
    p.add_argument("--probe", action="store_true", help="ask the chat model questions about early facts")
    p.add_argument("--chat-provider", choices=CHAT_PROVIDERS, help="chat model provider for --probe")
    p.add_argument("--chat-model", help="chat model for --probe (default: model.model)")
    p.add_argument("--chat-base-url", help="endpoint of the chat model for --probe")
    p.add_argument("--probe-max-tokens", type=int, default=256, metavar="N", help="answer length cap per probe")
    p.add_argument("--json", action="store_true", help="print the figures as JSON")
    p.set_defaults(run=run_eval)


class EvalError(AppError):
    """A problem with the command line or its input: printed as one line, exit 2.

    Its own class, caught here, because ``python -m hermes_tui.cli`` runs cli.py as
    ``__main__``: exceptions imported from ``hermes_tui.cli`` would not be the ones its
    ``main`` catches.
    """


def run_eval(args: argparse.Namespace) -> int:
    # "auto" (or the config) may resolve to MLX: only a named non-MLX provider skips it.
    if args.probe or args.provider not in ("extractive", "openai-api"):
        from hermes_tui.providers.mlx.runtime import import_mlx_on_main_thread

        import_mlx_on_main_thread()
    try:
        return _run_eval(args)
    except EvalError as exc:
        print(f"hermes-tui: {exc}", file=sys.stderr)
        return 2


def _run_eval(args: argparse.Namespace) -> int:
    from hermes_tui.analysis.evaluate import evaluate, format_result, make_probes, run_probes
    from hermes_tui.core.conversation import Conversation
    from hermes_tui.core.transcript import parse_transcript
    from hermes_tui.providers.selection import make_summarizer
    from hermes_tui.session.wiring import make_compactor, make_counter

    if args.context_limit < 256:
        raise EvalError(f"--context-limit must be at least 256 tokens, got {args.context_limit}")
    if args.plant_every < 0:
        raise EvalError(f"--plant-every must be 0 or more, got {args.plant_every}")
    config = _config(args, {
        "auxiliary.compression.provider": args.provider,
        "auxiliary.compression.model": args.model,
        "auxiliary.compression.base_url": args.base_url,
        "compression.micro_compact_mode": args.mode,
        "compression.policy": args.policy,
        "compression.fact_guard": args.fact_guard,
        "model.provider": args.chat_provider,
        "model.model": args.chat_model,
        "model.base_url": args.chat_base_url,
    })
    try:
        text = args.transcript.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise EvalError(f"{args.transcript}: no such file") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise EvalError(f"{args.transcript}: cannot read ({exc})") from None
    messages = parse_transcript(text, source=str(args.transcript))
    from hermes_tui.util.logs import setup_logging

    setup_logging()  # each pass and each policy decision logs its line, as compact does
    counter = make_counter(config)
    summarizer = make_summarizer(config.auxiliary.compression)  # fails early, before any work
    chat = None
    if args.probe:
        from hermes_tui.providers.selection import make_chat_client

        chat = make_chat_client(config.model)
    compactor = make_compactor(
        config, counter=counter, summarizer=summarizer, context_limit=args.context_limit, session_id="eval"
    )
    conv = Conversation(counter=counter)
    progress = _progress if sys.stderr.isatty() and not args.json else None
    result, tracker = evaluate(
        messages, compactor, conv, transcript=str(args.transcript), turns=args.turns,
        plant_every=args.plant_every, seed=args.seed, on_turn=progress,
    )
    if progress:
        sys.stderr.write("\n")
    if chat is not None:
        result.probes = run_probes(chat, conv.messages, make_probes(tracker), max_tokens=args.probe_max_tokens)
    print(json.dumps(result.to_json(), indent=1) if args.json else format_result(result))
    return 0


# The flags and the config keys they override, so errors name what was typed.
_FLAG_OF_KEY = {
    "auxiliary.compression.provider": "--provider",
    "auxiliary.compression.model": "--model",
    "auxiliary.compression.base_url": "--base-url",
    "compression.micro_compact_mode": "--mode",
    "compression.policy": "--policy",
    "compression.fact_guard": "--fact-guard",
    "model.provider": "--chat-provider",
    "model.model": "--chat-model",
    "model.base_url": "--chat-base-url",
}


def _config(args: argparse.Namespace, overrides: dict[str, Any]) -> Config:
    """The config file (a named one must exist) with the flags applied on top."""
    from hermes_tui.config import ConfigError, apply_overrides, load_config

    if args.config is not None and not args.config.is_file():
        raise EvalError(f"--config {args.config}: no such file")
    config = load_config(args.config)
    overrides = {k: v for k, v in overrides.items() if v is not None}
    try:
        return apply_overrides(config, overrides, origin="command line") if overrides else config
    except ConfigError as exc:
        raise EvalError(f"{_FLAG_OF_KEY.get(exc.key or '', exc.key)}: {exc.message}") from None


def _progress(done: int, total: int, reports: list[PassReport]) -> None:
    if done % 5 == 0 or done == total:
        sys.stderr.write(f"\r  replayed {done}/{total} turns")
        sys.stderr.flush()
