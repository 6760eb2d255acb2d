"""The provider that needs no model: the extractive summarizer, the built-in fallback for passes.

A provider like the others (``auxiliary.compression.provider: extractive``), and the one that
always works: the app runs passes with it when no compression model can be set up. It serves
compaction only (it cannot hold a conversation) and imports nothing but compaction and core.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from hermes_tui.compaction.summarizer import Summarizer
    from hermes_tui.config import AuxiliaryCompressionConfig


def make_summarizer(cfg: AuxiliaryCompressionConfig) -> Summarizer:
    from hermes_tui.providers.extractive.summarizer import ExtractiveSummarizer

    return ExtractiveSummarizer()
