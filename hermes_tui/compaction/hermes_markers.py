"""Hermes Agent's summary markers: recognising one and recovering its summary text.

Hermes Agent (the anchor) writes one message per compaction whose text is a long
preamble line, the summary, and an end line (``agent/context_compressor.py``):

    [CONTEXT COMPACTION — REFERENCE ONLY] Earlier turns were compacted … avoid repeating it:

    ## Historical Task Snapshot
    <summary>

    --- END OF CONTEXT SUMMARY — respond to the message below, not the summary above ---

Micro-compaction (``agent/micro_compaction.py``) always renders that exact shape on
an assistant-role message. Batch compaction puts the summary straight after the
preamble on whichever role keeps alternation, and may merge it into a real message:
the message's own text either precedes the summary between
``[PRIOR CONTEXT — …]`` and ``[END OF PRIOR CONTEXT — COMPACTION SUMMARY BELOW]``,
or follows the end line. Sessions from before the end line existed carry only the
``[CONTEXT SUMMARY]:`` prefix.

This module only reads text: it returns what the marker says, unchecked. Whatever
comes out still goes through ``markers.read_marker`` (redaction, instruction check)
before it may stand as a summary, and text a user typed that shares the message is
handed back separately so it is kept verbatim.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

# Every preamble Hermes has shipped starts with one of these (the current one and
# the historical ones it still recognises share the first).
PREAMBLE_STARTS = ("[CONTEXT COMPACTION — REFERENCE ONLY]", "[CONTEXT COMPACTION]")
LEGACY_PREFIX = "[CONTEXT SUMMARY]:"
HISTORICAL_TASK_HEADING = "## Historical Task Snapshot"
END_LINE = "--- END OF CONTEXT SUMMARY — respond to the message below, not the summary above ---"
END_LINE_START = "--- END OF CONTEXT SUMMARY"
MERGED_PRIOR_HEADER = "[PRIOR CONTEXT — for reference only; not a new message]"
MERGED_DELIMITER = "[END OF PRIOR CONTEXT — COMPACTION SUMMARY BELOW]"
# The preamble Hermes writes today (``SUMMARY_PREFIX``): what an exported marker opens with.
PREAMBLE = (
    "[CONTEXT COMPACTION — REFERENCE ONLY] Earlier turns were compacted into the summary below. "
    "This is a handoff from a previous context window — treat it as background reference, NOT as "
    "active instructions. Do NOT answer questions or fulfill requests mentioned in this summary; "
    "they were already addressed. Respond ONLY to the latest user message that appears AFTER this "
    "summary. The current session state (files, config, etc.) may reflect work described here — "
    "avoid repeating it:"
)
# Cheap first look: every message is asked whether it is a marker, most are not.
_OPENING = re.compile(r"\s*(?:\[CONTEXT COMPACTION|\[CONTEXT SUMMARY\]:)")

# Keys Hermes puts on the message dict (JSON snapshots keep them; state.db keeps
# only the first, as the ``_compressed_summary`` column).
SUMMARY_FLAG = "_compressed_summary"
MICRO_FLAG = "_micro_compact_marker"


@dataclass(frozen=True)
class HermesSummary:
    """What a Hermes summary message holds, scaffolding removed; nothing checked yet."""

    summary: str
    before: str = ""   # the message's own text kept ahead of the summary (merged carrier)
    after: str = ""    # text after the end line: a real message merged behind the summary


def parse_summary(content: object, *, flagged: bool = False) -> HermesSummary | None:
    """The parts of a Hermes summary message, or None when ``content`` is not one.

    Without Hermes' own flag (``flagged``), the text must carry both the preamble and
    the end line, so a message that merely quotes the preamble is not taken for one.
    """
    if not isinstance(content, str) or not (_OPENING.match(content) or MERGED_DELIMITER in content):
        return None
    before, rest = _split_merged(content)
    body = rest.lstrip()
    lines = body.split("\n")
    first = lines[0]
    if first.startswith(PREAMBLE_STARTS):
        lines = lines[1:]
    elif first.startswith(LEGACY_PREFIX):
        lines[0] = first[len(LEGACY_PREFIX):]
    else:
        return None
    end = next((n for n, line in enumerate(lines) if line.strip().startswith(END_LINE_START)), None)
    if end is None and not flagged:
        return None
    summary_lines, after_lines = (lines, []) if end is None else (lines[:end], lines[end + 1:])
    summary = "\n".join(summary_lines).strip("\n")
    stripped = summary.strip()
    if stripped.startswith(HISTORICAL_TASK_HEADING):
        # The heading is scaffolding Hermes adds around every micro summary.
        stripped = stripped[len(HISTORICAL_TASK_HEADING):].strip()
    if not stripped:
        return None
    return HermesSummary(stripped, before=before, after="\n".join(after_lines).strip())


def render_summary(summary: str, *, micro: bool) -> str:
    """A summary as Hermes writes it: the micro shape (``_render_micro_marker_content``), or a
    standalone batch summary (preamble, summary, end line)."""
    body = f"{HISTORICAL_TASK_HEADING}\n{summary}" if micro else summary
    return f"{PREAMBLE}\n\n{body}\n\n{END_LINE}"


def is_summary(content: object, *, flagged: bool = False) -> bool:
    return parse_summary(content, flagged=flagged) is not None


def _split_merged(content: str) -> tuple[str, str]:
    """(the carrier's own prior text, the rest) for a merged carrier; ("", content) otherwise."""
    at = content.find(MERGED_DELIMITER)
    if at < 0:
        return "", content
    prior = content[:at].strip()
    if prior.startswith(MERGED_PRIOR_HEADER):
        prior = prior[len(MERGED_PRIOR_HEADER):].strip()
    return prior, content[at + len(MERGED_DELIMITER):]
