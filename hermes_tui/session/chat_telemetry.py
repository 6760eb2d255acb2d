"""One content-free telemetry line per chat-model request: what the chat model had to prefill.

A pass rewrites the context right after the head, so the request after it can reuse
less of the chat model's prefix cache; these lines are how ``hermes-tui report``
shows what that costs (prefill per turn, cache reuse). ``prompt_tokens`` and
``cached_tokens`` are what the provider reported (null when it did not say: never a
guess); ``prefill_tokens`` is their difference, with no cached tokens reported taken
as none cached; ``context_tokens`` is our own count of the request, so occupancy is
known even where the provider reports no usage.

``hermes_tui.analysis.report`` parses these lines back: keep the prefix stable.
"""

from __future__ import annotations

import json
from typing import Any

from hermes_tui.chat.client import ChatDone
from hermes_tui.util.logs import get_logger

logger = get_logger("chat")

CHAT_PREFIX = "chat request telemetry: "
CHAT_FIELDS = (
    "event", "session_id", "turn", "context_tokens", "occupancy_pct", "threshold_tokens", "context_limit",
    "prompt_tokens", "cached_tokens", "prefill_tokens", "completion_tokens", "finish_reason",
    "duration_ms", "prompt_tps", "main_model",
)


def prefill_tokens(prompt_tokens: int | None, cached_tokens: int | None) -> int | None:
    if prompt_tokens is None:
        return None
    return max(0, prompt_tokens - (cached_tokens or 0))


def chat_fields(done: ChatDone, **context: Any) -> dict[str, Any]:
    """The line's payload: the request's usage and ``context`` (session_id, turn, tokens...)."""
    usage = done.usage
    return {
        **context,
        "event": "chat_request",
        "prompt_tokens": usage.prompt_tokens,
        "cached_tokens": usage.cached_tokens,
        "prefill_tokens": prefill_tokens(usage.prompt_tokens, usage.cached_tokens),
        "completion_tokens": usage.completion_tokens,
        "finish_reason": usage.finish_reason,
        "duration_ms": round(usage.duration_s * 1000) if usage.duration_s else None,
        "prompt_tps": None if usage.prompt_tps is None else round(usage.prompt_tps, 1),
    }


def log_chat(payload: dict[str, Any]) -> str:
    line = CHAT_PREFIX + json.dumps({key: payload.get(key) for key in CHAT_FIELDS}, separators=(",", ":"))
    logger.info(line)
    return line
