"""What compaction asks a summarizer (``SummaryRequest``) and one call with it (``run_summarizer``).

Model backends complete chat prompts, so the request is rendered with
``prompts``. A backend that works on the structure itself (the extractive
summarizer) offers ``summarize(request, max_tokens=...)`` and gets it directly.
The interface every summarizer offers is ``compaction.summarizer``.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from hermes_tui.compaction import prompts
from hermes_tui.compaction.redaction import redact
from hermes_tui.compaction.sizing import ModelSpeed
from hermes_tui.compaction.summarizer import Completion, Summarizer, SummarizerError
from hermes_tui.core.failures import TIMEOUT
from hermes_tui.core.transcript import Message
from hermes_tui.util.faults import crash_point


@dataclass(frozen=True)
class SummaryRequest:
    kind: str                      # "absorb" (merge) | "append" | "defrag" | "batch"
    summary: str                   # the current rolling summary, already redacted
    messages: list[Message] = field(default_factory=list)  # already redacted
    focus: str | None = None       # batch only: what to give most room to
    strict: bool = False           # a second try, after an answer that misread the task (or a defrag that failed)

    def to_chat(self) -> list[dict[str, str]]:
        if self.kind == "absorb":
            return prompts.absorb_prompt(self.summary, self.messages, strict=self.strict)
        if self.kind == "append":
            return prompts.append_prompt(self.summary, self.messages, strict=self.strict)
        if self.kind == "defrag":
            return prompts.defrag_prompt(self.summary, self.messages, strict=self.strict)
        return prompts.batch_prompt(self.summary, self.messages, self.focus)


# Room for the endpoint, the model, the problem and the config key to change.
MAX_DETAIL_CHARS = 400


def failure_detail(exc: SummarizerError) -> str:
    """What a summarizer said went wrong, for the user: one line, redacted (it may quote a
    server's answer), cut to a status line's worth."""
    text = redact(" ".join(str(exc).split()))
    return text if len(text) <= MAX_DETAIL_CHARS else text[: MAX_DETAIL_CHARS - 1] + "…"


def run_summarizer(
    summarizer: Summarizer, request: SummaryRequest, *, max_tokens: int, speed: ModelSpeed | None = None
) -> Completion:
    """One call; ``speed`` learns from it (or from its timing out) how fast the model is."""
    crash_point("summarizer.call")
    structured = getattr(summarizer, "summarize", None)
    completion: Completion
    try:
        if callable(structured):
            completion = structured(request, max_tokens=max_tokens)
        else:
            completion = summarizer.complete(request.to_chat(), max_tokens=max_tokens)
    except SummarizerError as exc:
        if speed is not None and exc.kind == TIMEOUT:
            speed.timed_out()
        raise
    if speed is not None and completion.prompt_tokens is not None:
        speed.observe(completion.prompt_tokens - (completion.cached_tokens or 0), completion.completion_tokens,
                      completion.duration_s, completion.prompt_tps, completion.generation_tps)
    return completion
