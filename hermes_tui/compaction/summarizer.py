"""The summarizer protocol: one small interface for every backend (``providers/``).

Compaction renders a request (``compaction.summary_request``) into chat messages
(``compaction.prompts``) and hands them to a backend, which returns the text and what the
call cost. Backends raise ``SummarizerError`` with a ``kind`` so callers (telemetry, the UI)
can say what went wrong without parsing messages.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

from hermes_tui.util.errors import AppError


class SummarizerError(AppError):
    """A summarizer call that failed; ``kind`` is one of ``core.failures``' kinds, ``endpoint``
    the server's base URL when the call went to one, ``fix`` what its answer says to do. A
    model that is not on this machine is the ``__cause__``."""

    def __init__(
        self, kind: str, message: str, *, endpoint: str | None = None, model: str | None = None, fix: str | None = None
    ) -> None:
        super().__init__(message, kind=kind, endpoint=endpoint, model=model, fix=fix)


@dataclass(frozen=True)
class Completion:
    """What one summarizer call returned and cost."""

    text: str
    finish_reason: str | None      # "stop", "length" (cut off by max_tokens), ...
    prompt_tokens: int | None
    completion_tokens: int | None
    duration_s: float
    cached_tokens: int | None = None  # prompt tokens served from a prefix cache, when known
    # Speeds the backend measured itself (MLX does); None when it does not say. With them
    # the report splits a pass's model time into prefill and generation.
    prompt_tps: float | None = None
    generation_tps: float | None = None


def runs_a_model(summarizer: object) -> bool:
    """Whether ``summarizer`` calls a model. One that does not (the extractive summarizer says
    ``no_model = True``) answers by fixed rules, at once: its work is not cut to a model's
    speed (``compaction.sizing``), and its answers are not judged for a model's misreadings
    (a copy of the material, a scrap): its notes quote commands and first lines, and a short
    consolidation is what its rules keep."""
    return not getattr(summarizer, "no_model", False)


@runtime_checkable
class Summarizer(Protocol):
    """A backend that completes a short chat prompt (system + user)."""

    #: model name reported in telemetry (``aux_model``)
    model_name: str
    # Optional, not part of the check: ``speed`` (a ``sizing.ModelSpeed``, the model's measured
    # speeds) and ``speed_key`` (the model's identity, under which the store keeps them). A
    # backend without them starts every session from the assumed speeds.

    def complete(self, messages: list[dict[str, Any]], *, max_tokens: int) -> Completion:
        """Run one chat completion. Raises ``SummarizerError`` on failure."""
        ...
