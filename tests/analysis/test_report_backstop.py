"""A batch attempt that finds nothing to absorb is a failure, in telemetry and in the report.

The backstop runs because the window is full; finding nothing to absorb leaves it full.
The telemetry line comes from the real engine (its log record), the report from the
real ``hermes-tui report`` entry point.
"""

from __future__ import annotations

import logging

from helpers import ScriptedSummarizer, make_compactor, user

from hermes_tui.analysis import report
from hermes_tui.analysis.telemetry_log import parse_line


def test_nothing_to_absorb_is_a_failed_batch_attempt(tmp_path, caplog, capsys):
    compactor, conv = make_compactor(ScriptedSummarizer(lambda r: "- condensed."), micro=False)
    conv.extend([user("Only a question, nothing to absorb yet.")])
    with caplog.at_level(logging.INFO, logger="hermes_tui.compaction"):
        outcome = compactor.compress(conv).outcome
    assert outcome == "nothing_to_absorb"
    lines = [r.getMessage() for r in caplog.records if "context compression attempt telemetry" in r.getMessage()]
    assert len(lines) == 1
    record = parse_line(lines[0])
    assert (record["outcome"], record["failure"]) == ("nothing_to_absorb", "nothing_to_absorb")

    log = tmp_path / "agent.log"
    log.write_text("2026-01-01 INFO hermes_tui.compaction: " + lines[0] + "\n")
    assert report.main([str(log)]) == 0
    out = capsys.readouterr().out
    assert "batch compactions: 0 fired, 1 failed (1 found nothing to absorb)" in out
    assert report.summarize([record])["batch_compactions"] == {"fired": 0, "failed": 1, "nothing_to_absorb": 1}
