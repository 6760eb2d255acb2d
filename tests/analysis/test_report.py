"""The telemetry report: real log files in, figures worked out by hand out."""

from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path

import pytest

from hermes_tui.analysis import report

REPO = Path(__file__).resolve().parents[2]
SCRIPT = REPO / "scripts" / "micro_compaction_report.py"


# --- building realistic logs ----------------------------------------------------------

MODELS = {"main_model": "qwen3-32b", "aux_model": "gemma-3-1b"}


def micro(session, outcome, msgs, tokens, *, exchange, occupancy, duration_ms, saved_total, passes_total,
          failure=None, threshold=320000, limit=400000):
    before, after = tokens
    return {
        "event": "micro_compaction", "session_id": session, "outcome": outcome,
        "messages_before": msgs[0], "messages_after": msgs[1],
        "tokens_before": before, "tokens_after": after, "tokens_delta": after - before,
        "exchange_tokens": exchange, "rolling_summary_tokens": 31, "cursor": 12,
        "passes_total": passes_total, "tokens_saved_total": saved_total, "duration_ms": duration_ms,
        "threshold_tokens": threshold, "context_limit": limit, "occupancy_pct": occupancy,
        **MODELS, "failure": failure, "prompt_tokens": 900, "completion_tokens": 40, "cached_tokens": None,
    }


def batch(session, outcome, failure=None):
    return {
        "event": "batch_compaction", "session_id": session, "outcome": outcome,
        "messages_before": 300, "messages_after": 40 if outcome == "compressed" else 300,
        "tokens_before": 120000, "tokens_after": 30000 if outcome == "compressed" else 120000,
        "tokens_delta": -90000 if outcome == "compressed" else 0, "duration_ms": 5000,
        "threshold_tokens": 100000, "context_limit": 125000, "occupancy_pct": 30.0, **MODELS, "failure": failure,
    }


def std_line(payload, marker=report.MICRO_MARKER, stamp="2026-11-30 03:01:02,123"):
    """The engine's own format: ``%(asctime)s %(levelname)s %(name)s: %(message)s``."""
    return f"{stamp} INFO hermes_tui.compaction: {marker} {json.dumps(payload)}"


def syslog_line(payload, marker=report.MICRO_MARKER):
    """Another prefix, compact JSON, and trailing text after the object."""
    return f"Nov 30 03:01:02 studio hermes-tui[4242]: <info> {marker}{json.dumps(payload, separators=(',', ':'))}  [pid 4242]"


# Session "review" is the spec's "What it looks like when it is working" table, plus a
# final pass that found nothing to absorb.
REVIEW = [
    micro("review", "absorbed", (40, 39), (27479, 27778), exchange=868, occupancy=8.7, duration_ms=2200,
          saved_total=-299, passes_total=1),
    micro("review", "absorbed", (61, 59), (48676, 48128), exchange=1200, occupancy=15.0, duration_ms=4500,
          saved_total=249, passes_total=2),
    micro("review", "absorbed", (70, 67), (58309, 55915), exchange=3000, occupancy=17.5, duration_ms=9100,
          saved_total=2643, passes_total=3),
    micro("review", "absorbed", (84, 80), (75251, 69818), exchange=6000, occupancy=21.8, duration_ms=36200,
          saved_total=8076, passes_total=4),
    micro("review", "absorbed", (84, 80), (74659, 70264), exchange=5000, occupancy=22.0, duration_ms=31200,
          saved_total=12471, passes_total=5),
    micro("review", "nothing_to_absorb", (80, 80), (70264, 70264), exchange=0, occupancy=22.0, duration_ms=5,
          saved_total=12471, passes_total=6),
]

# Session "rough": a first pass that costs tokens (window unresolved), then every kind of trouble.
ROUGH = [
    micro("rough", "absorbed", (20, 19), (10000, 10330), exchange=500, occupancy=None, duration_ms=1500,
          saved_total=-330, passes_total=1, threshold=25600, limit=None),
    micro("rough", "summarize_failed", (19, 19), (10330, 10330), exchange=2400, occupancy=40.0,
          duration_ms=120000, saved_total=-330, passes_total=2, failure="timeout", threshold=25600, limit=32000),
    micro("rough", "defrag", (19, 19), (10500, 9800), exchange=0, occupancy=39.0, duration_ms=8000,
          saved_total=370, passes_total=3, threshold=25600, limit=32000),
    micro("rough", "defrag_failed", (19, 19), (9800, 9800), exchange=0, occupancy=39.0, duration_ms=6000,
          saved_total=370, passes_total=4, failure="not_shrunk", threshold=25600, limit=32000),
    micro("rough", "exchange_skipped", (19, 19), (9800, 9800), exchange=2400, occupancy=39.0, duration_ms=100,
          saved_total=370, passes_total=5, threshold=25600, limit=32000),
    micro("rough", "store_failed", (19, 19), (9800, 9800), exchange=800, occupancy=39.0, duration_ms=4000,
          saved_total=370, passes_total=6, failure="cut_off", threshold=25600, limit=32000),
]

NOISE = [
    "2026-11-30 03:00:58,001 INFO hermes_tui.chat: turn started",
    "2026-11-30 03:01:00,400 INFO hermes_tui.compaction: Micro-compaction: 37 -> 36 messages",
    "2026-11-30 03:01:01,000 INFO hermes_tui.compaction: Micro-compaction defrag: rolling summary re-summarized (1843 chars)",
    "2026-11-30 03:01:01,200 WARNING hermes_tui.compaction: Micro-compaction: skipping exchange at cursor 12 after 3 consecutive failures",
    "2026-11-30 03:01:01,300 INFO httpx: HTTP Request: POST http://127.0.0.1:8080/v1/chat/completions \"HTTP/1.1 200 OK\"",
    "Traceback (most recent call last):",
    '  File "hermes_tui/chat/session.py", line 88, in finalize_turn',
    "",
]

MALFORMED = [
    "2026-11-30 03:02:00,000 INFO hermes_tui.compaction: micro compaction telemetry: {\"event\": \"micro_compaction\", \"outc",
    "2026-11-30 03:02:01,000 INFO hermes_tui.compaction: micro compaction telemetry: [1, 2, 3]",
    "2026-11-30 03:02:02,000 INFO hermes_tui.compaction: context compression attempt telemetry: not json at all",
]


def write_logs(tmp_path: Path) -> tuple[Path, Path]:
    """Two files: the second continues session "rough" in another log format."""
    first = [
        NOISE[0], std_line(REVIEW[0]), NOISE[1], std_line(ROUGH[0]), std_line(REVIEW[1]), NOISE[4],
        std_line(ROUGH[1]), MALFORMED[0], std_line(REVIEW[2]), NOISE[2], std_line(ROUGH[2]),
        std_line(REVIEW[3]), NOISE[5], NOISE[6], std_line(REVIEW[4]), std_line(REVIEW[5]), NOISE[7],
        std_line(batch("rough", "compressed"), marker=report.BATCH_MARKER), MALFORMED[1],
    ]
    second = [
        NOISE[3], syslog_line(ROUGH[3]), syslog_line(ROUGH[4]), MALFORMED[2], syslog_line(ROUGH[5]),
        syslog_line(batch("rough", "failed", failure="timeout"), marker=report.BATCH_MARKER),
        syslog_line(batch("only-batch", "compressed"), marker=report.BATCH_MARKER),
    ]
    a, b = tmp_path / "agent.log", tmp_path / "agent.log.1"
    a.write_text("\n".join(first) + "\n", encoding="utf-8")
    b.write_text("\n".join(second) + "\n", encoding="utf-8")
    return a, b


@pytest.fixture
def logs(tmp_path):
    return write_logs(tmp_path)


# --- parsing --------------------------------------------------------------------------


def test_parse_line_finds_the_marker_behind_any_prefix():
    payload = REVIEW[0]
    assert report.parse_line(std_line(payload)) == payload
    assert report.parse_line(syslog_line(payload)) == payload
    assert report.parse_line(f"micro compaction telemetry:{json.dumps(payload)}") == payload


def test_parse_line_takes_the_event_from_the_marker_when_missing():
    record = report.parse_line('x context compression attempt telemetry: {"outcome": "failed"}')
    assert record == {"outcome": "failed", "event": "batch_compaction"}


@pytest.mark.parametrize("line", NOISE)
def test_parse_line_ignores_unrelated_lines(line):
    assert report.parse_line(line) is None


@pytest.mark.parametrize("line", MALFORMED)
def test_parse_line_rejects_malformed_payloads(line):
    with pytest.raises(report.MalformedTelemetry):
        report.parse_line(line)


def test_read_logs_collects_records_in_order_and_counts_malformed(logs):
    scan = report.read_logs(list(logs))
    assert scan.malformed == 3
    micro_records = [r for r in scan.records if r["event"] == "micro_compaction"]
    assert [r for r in micro_records if r["session_id"] == "review"] == REVIEW
    assert [r for r in micro_records if r["session_id"] == "rough"] == ROUGH
    assert sum(r["event"] == "batch_compaction" for r in scan.records) == 3


# --- figures, worked out by hand --------------------------------------------------------


def test_summarize_overall(logs):
    figures = report.summarize(report.read_logs(list(logs)).records)

    assert figures["sessions"] == 3
    assert figures["passes"] == 11  # 12 lines; the one that found nothing to absorb is not a pass
    assert {k: v["count"] for k, v in figures["outcomes"].items()} == {
        "absorbed": 6, "defrag": 1, "defrag_failed": 1, "summarize_failed": 1,
        "exchange_skipped": 1, "nothing_to_absorb": 1, "store_failed": 1,
    }
    assert list(figures["outcomes"]) == list(report.MICRO_OUTCOMES)  # the spec's order
    assert figures["outcomes"]["absorbed"]["pct"] == pytest.approx(50.0)
    assert figures["outcomes"]["defrag"]["pct"] == pytest.approx(100 / 12)
    # review: -(299 - 548 - 2394 - 5433 - 4395 + 0) = 12471; rough: -(330 - 700) = 370
    assert figures["net_tokens_saved"] == 12471 + 370
    # absorbed exchanges: 868, 1200, 3000, 6000, 5000 (review) and 500 (rough)
    assert figures["mean_absorbed_exchange_tokens"] == pytest.approx(16568 / 6)
    # 11 passes called the model (nothing_to_absorb's 5 ms is out):
    # 100 1500 2200 4000 4500 [6000] 8000 9100 31200 36200 120000; p90 = rank ceil(9.9) = 10th
    assert figures["duration_ms"] == {"count": 11, "min": 100, "median": 6000, "p90": 36200, "max": 120000}
    # 11 non-null occupancies: 8.7 15 17.5 21.8 22 [22] 39 39 39 39 40
    assert figures["occupancy_pct"] == {"count": 11, "min": 8.7, "median": 22.0, "max": 40.0}
    assert figures["batch_compactions"] == {"fired": 2, "failed": 1, "nothing_to_absorb": 0}


def test_summarize_sessions(logs):
    sessions = report.summarize_sessions(report.read_logs(list(logs)).records)
    assert list(sessions) == ["review", "rough", "only-batch"]  # first-seen order

    review = sessions["review"]
    assert review["passes"] == 5  # its nothing_to_absorb line is not a pass
    assert review["net_tokens_saved"] == 12471 == review["last_tokens_saved_total"]
    assert review["duration_ms"]["median"] == 9100  # 2200 4500 [9100] 31200 36200
    assert review["duration_ms"]["p90"] == 36200
    assert review["occupancy_pct"]["median"] == pytest.approx((17.5 + 21.8) / 2)
    assert review["batch_compactions"] == {"fired": 0, "failed": 0, "nothing_to_absorb": 0}
    assert [row["pass"] for row in review["trajectory"]] == [1, 2, 3, 4, 5]  # nothing_to_absorb is not a row

    rough = sessions["rough"]
    assert rough["net_tokens_saved"] == 370 == rough["last_tokens_saved_total"]
    assert rough["mean_absorbed_exchange_tokens"] == 500
    assert rough["duration_ms"]["median"] == 5000  # 100 1500 [4000 6000] 8000 120000
    assert rough["duration_ms"]["p90"] == 120000
    assert rough["occupancy_pct"] == {"count": 5, "min": 39.0, "median": 39.0, "max": 40.0}
    assert rough["batch_compactions"] == {"fired": 1, "failed": 1, "nothing_to_absorb": 0}
    assert [(row["pass"], row["outcome"]) for row in rough["trajectory"]] == [(1, "absorbed"), (3, "defrag")]
    assert rough["trajectory"][0]["occupancy_pct"] is None

    only_batch = sessions["only-batch"]
    assert only_batch["passes"] == 0 and only_batch["trajectory"] == []
    assert only_batch["batch_compactions"] == {"fired": 1, "failed": 0, "nothing_to_absorb": 0}


def test_summarize_of_nothing():
    figures = report.summarize([])
    assert figures["passes"] == 0 and figures["outcomes"] == {}
    assert figures["net_tokens_saved"] == 0
    assert figures["mean_absorbed_exchange_tokens"] is None
    assert figures["duration_ms"]["median"] is None and figures["duration_ms"]["p90"] is None
    assert figures["occupancy_pct"]["count"] == 0


def test_summarize_tolerates_missing_and_odd_fields():
    records = [
        {"event": "micro_compaction", "outcome": "absorbed", "tokens_before": 100, "tokens_after": 60},
        {"event": "micro_compaction", "outcome": "absorbed", "tokens_delta": "n/a", "duration_ms": True,
         "occupancy_pct": None, "exchange_tokens": None},
    ]
    figures = report.summarize(records)
    assert figures["net_tokens_saved"] == 40  # delta derived from before/after; the string ignored
    assert figures["duration_ms"]["count"] == 0  # a bool is not a duration
    assert figures["mean_absorbed_exchange_tokens"] is None
    assert figures["sessions"] == 1  # both without a session id


def test_percentile_is_nearest_rank():
    assert report.percentile([5], 90) == 5
    assert report.percentile(list(range(1, 11)), 90) == 9
    assert report.percentile(list(range(1, 12)), 90) == 10
    assert report.percentile([], 90) is None


def test_incomplete_log_is_called_out(tmp_path):
    # Only the last pass of a session survived log rotation: the engine's total disagrees.
    log = tmp_path / "agent.log"
    log.write_text(std_line(REVIEW[4]) + "\n")
    sessions = report.summarize_sessions(report.read_logs([log]).records)
    assert sessions["review"]["net_tokens_saved"] == 4395
    assert sessions["review"]["last_tokens_saved_total"] == 12471


# --- the text report ------------------------------------------------------------------


def cells(line: str) -> list[str]:
    return [cell.strip() for cell in line.split("|")]


def test_main_text_report(logs, capsys):
    assert report.main([str(p) for p in logs]) == 0
    out = capsys.readouterr().out
    assert f"{logs[0]}, {logs[1]}" in out.splitlines()[0]
    assert "(3 malformed telemetry lines skipped)" in out
    assert "Overall (3 sessions)" in out
    lines = {line.strip().split("  ")[0]: line for line in out.splitlines() if line.startswith("  ")}
    assert lines["passes"].split()[-1] == "11"
    assert lines["net tokens saved"].split()[-1] == "+12,841"
    assert lines["mean absorbed exchange"].split()[-2:] == ["2,761", "tokens"]
    assert "median 6.0s, p90 36.2s, max 120.0s" in lines["pass duration"]
    assert "(11 passes that called the model)" in lines["pass duration"]
    assert "min 8.7%, median 22.0%, max 40.0%" in lines["occupancy"]
    assert lines["batch compactions"].split()[-4:] == ["2", "fired,", "1", "failed"]
    words = " ".join(out.split())
    assert "outcomes absorbed 6 50.0% defrag 1 8.3% defrag_failed 1 8.3%" in words
    assert "nothing_to_absorb 1 8.3% store_failed 1 8.3%" in words
    assert "Session review" not in out  # only with --per-session
    assert "trajectory" not in out


def test_main_per_session_trajectory_matches_the_spec_table(logs, capsys):
    assert report.main(["--per-session", *map(str, logs)]) == 0
    out = capsys.readouterr().out
    review = out.split("Session review")[1].split("Session rough")[0]
    table = [cells(line) for line in review.splitlines() if "|" in line]
    assert table == [
        ["pass", "messages", "tokens", "delta", "occupancy", "duration"],
        ["1", "40 -> 39", "27,479 -> 27,778", "+299", "8.7%", "2.2s"],
        ["2", "61 -> 59", "48,676 -> 48,128", "-548", "15.0%", "4.5s"],
        ["3", "70 -> 67", "58,309 -> 55,915", "-2,394", "17.5%", "9.1s"],
        ["4", "84 -> 80", "75,251 -> 69,818", "-5,433", "21.8%", "36.2s"],
        ["5", "84 -> 80", "74,659 -> 70,264", "-4,395", "22.0%", "31.2s"],
    ]
    assert "net tokens saved        +12,471" in review
    assert "running total" not in review

    rough = out.split("Session rough")[1].split("Session only-batch")[0]
    rows = [cells(line) for line in rough.splitlines() if "|" in line][1:]
    assert rows == [
        ["1", "20 -> 19", "10,000 -> 10,330", "+330", "-", "1.5s"],
        ["3 (defrag)", "19 -> 19", "10,500 -> 9,800", "-700", "39.0%", "8.0s"],
    ]
    assert "1 fired, 1 failed" in rough

    only_batch = out.split("Session only-batch")[1]
    assert "1 fired, 0 failed" in only_batch


def test_main_per_session_notes_an_incomplete_log(tmp_path, capsys):
    log = tmp_path / "agent.log"
    log.write_text(std_line(REVIEW[4]) + "\n")
    assert report.main(["--per-session", str(log)]) == 0
    out = capsys.readouterr().out
    assert "net tokens saved        +4,395" in out
    assert "running total says +12,471 saved" in out


def test_main_json_has_the_same_figures(logs, capsys):
    assert report.main(["--json", "--per-session", *map(str, logs)]) == 0
    document = json.loads(capsys.readouterr().out)
    records = report.read_logs(list(logs)).records
    assert document["files"] == [str(p) for p in logs]
    assert document["malformed_lines"] == 3
    assert document["overall"] == json.loads(json.dumps(report.summarize(records)))
    assert document["overall"]["net_tokens_saved"] == 12841
    assert list(document["sessions"]) == ["review", "rough", "only-batch"]
    assert document["sessions"]["review"]["trajectory"][0]["tokens_delta"] == 299


def test_main_json_without_per_session_has_no_sessions(logs, capsys):
    assert report.main(["--json", str(logs[0])]) == 0
    document = json.loads(capsys.readouterr().out)
    assert "sessions" not in document
    assert document["malformed_lines"] == 2


def test_main_empty_log(tmp_path, capsys):
    log = tmp_path / "agent.log"
    log.write_text("")
    assert report.main([str(log)]) == 0
    assert capsys.readouterr().out.strip() == f"no micro-compaction telemetry found in {log}"


def test_main_log_without_micro_telemetry_still_shows_batch_and_malformed(tmp_path, capsys):
    log = tmp_path / "agent.log"
    log.write_text("\n".join([*NOISE, MALFORMED[0], std_line(batch("s", "compressed"), marker=report.BATCH_MARKER)]))
    assert report.main([str(log)]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0] == f"no micro-compaction telemetry found in {log}"
    assert "batch compactions: 1 fired, 0 failed" in out
    assert "(1 malformed telemetry line skipped)" in out


def test_main_missing_file(tmp_path, capsys):
    missing = tmp_path / "nope.log"
    assert report.main([str(missing)]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err.strip() == f"micro_compaction_report: no such log file: {missing}"


def test_main_default_log_is_under_hermes_tui_home(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("HERMES_TUI_HOME", str(tmp_path))
    monkeypatch.setenv("HERMES_HOME", str(tmp_path / "agent"))  # Hermes Agent's log is never the default
    expected = tmp_path / "logs" / "agent.log"
    assert report.main([]) == 2
    assert str(expected) in capsys.readouterr().err

    expected.parent.mkdir()
    expected.write_text(std_line(REVIEW[0]) + "\n")
    assert report.main([]) == 0
    out = capsys.readouterr().out
    assert str(expected) in out
    assert "net tokens saved        -299" in out  # a first pass costs tokens


def test_main_hermes_reads_hermes_agents_log_and_leaves_it_alone(tmp_path, monkeypatch, capsys):
    ours, agent = tmp_path / "ours", tmp_path / "agent"
    monkeypatch.setenv("HERMES_TUI_HOME", str(ours))
    monkeypatch.setenv("HERMES_HOME", str(agent))
    log = agent / "logs" / "agent.log"
    log.parent.mkdir(parents=True)
    log.write_text(std_line(REVIEW[0]) + "\n")
    log.chmod(0o444)  # read-only: reading it needs no more
    before = log.read_bytes(), log.stat().st_mtime_ns
    assert report.main(["--hermes"]) == 0
    out = capsys.readouterr().out
    assert f"Micro-compaction report: {log}" in out and "net tokens saved        -299" in out
    assert (log.read_bytes(), log.stat().st_mtime_ns) == before
    assert sorted(p.relative_to(agent).as_posix() for p in agent.rglob("*")) == ["logs", "logs/agent.log"]
    assert not ours.exists()
    assert report.main(["--hermes", str(log)]) == 2
    assert capsys.readouterr().err.count("\n") == 1


def test_main_hermes_defaults_to_dot_hermes(tmp_path, monkeypatch, capsys):
    monkeypatch.delenv("HERMES_HOME", raising=False)
    monkeypatch.setenv("HOME", str(tmp_path))
    assert report.main(["--hermes"]) == 2
    assert capsys.readouterr().err.strip() == (
        f"micro_compaction_report: no such log file: {tmp_path / '.hermes' / 'logs' / 'agent.log'}")


# --- the script -------------------------------------------------------------------------


def run_script(*args: str, python_flags: tuple[str, ...] = (), cwd: Path = REPO) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, *python_flags, str(SCRIPT), *args],
        capture_output=True, text=True, cwd=cwd, timeout=60, check=False,
    )


@pytest.mark.integration
def test_script_reports(logs):
    result = run_script("--per-session", *map(str, logs))
    assert result.returncode == 0, result.stderr
    assert "+12,841" in result.stdout
    assert "27,479 -> 27,778" in result.stdout


@pytest.mark.integration
def test_script_runs_without_the_package_installed(logs, tmp_path):
    # -S: no site-packages, so hermes_tui is found only through the script's repo-root fallback.
    result = run_script(str(logs[0]), python_flags=("-S",), cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert "Overall (2 sessions)" in result.stdout  # review and rough


@pytest.mark.integration
def test_script_missing_file_exits_2(tmp_path):
    missing = tmp_path / "missing.log"
    result = run_script(str(missing))
    assert result.returncode == 2
    assert result.stdout == ""
    assert str(missing) in result.stderr and len(result.stderr.strip().splitlines()) == 1


@pytest.mark.integration
def test_script_empty_log(tmp_path):
    log = tmp_path / "agent.log"
    log.write_text("2026-11-30 03:00:58,001 INFO hermes_tui.chat: turn started\n")
    result = run_script(str(log))
    assert result.returncode == 0
    assert result.stdout.strip() == f"no micro-compaction telemetry found in {log}"


@pytest.mark.integration
def test_script_json(logs):
    result = run_script("--json", str(logs[1]))
    assert result.returncode == 0, result.stderr
    document = json.loads(result.stdout)
    assert document["overall"]["passes"] == 3
    assert document["malformed_lines"] == 1
    assert math.isclose(document["overall"]["outcomes"]["store_failed"]["pct"], 100 / 3)


# --- through `hermes-tui report` --------------------------------------------------------

HERMES_TUI = Path(sys.executable).parent / "hermes-tui"


def run_hermes_tui(*args: str, cwd: Path = REPO) -> subprocess.CompletedProcess:
    return subprocess.run(
        [str(HERMES_TUI), *args], capture_output=True, text=True, cwd=cwd, timeout=120, check=False,
        stdin=subprocess.DEVNULL,
    )


@pytest.mark.integration
def test_cli_report_per_session_before_the_logs(logs):
    result = run_hermes_tui("report", "--per-session", *map(str, logs))
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith(f"Micro-compaction report: {logs[0]}, {logs[1]}\n")
    assert "Session review" in result.stdout and "Session rough" in result.stdout
    assert "27,479 -> 27,778" in result.stdout  # review's first trajectory row


@pytest.mark.integration
def test_cli_report_json_before_the_log(logs):
    result = run_hermes_tui("report", "--json", str(logs[1]))
    assert result.returncode == 0, result.stderr
    document = json.loads(result.stdout)
    assert document["files"] == [str(logs[1])]
    assert document["overall"]["passes"] == 3
    assert "sessions" not in document


@pytest.mark.integration
def test_cli_report_json_per_session(logs):
    result = run_hermes_tui("report", "--json", "--per-session", *map(str, logs))
    assert result.returncode == 0, result.stderr
    document = json.loads(result.stdout)
    assert list(document["sessions"]) == ["review", "rough", "only-batch"]


@pytest.mark.integration
def test_cli_report_help():
    result = run_hermes_tui("report", "--help")
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith("usage: hermes-tui report ")
    for option in ("--per-session", "--json", "LOGFILE"):
        assert option in result.stdout


@pytest.mark.integration
def test_script_per_session_before_the_logs(logs):
    result = run_script("--per-session", *map(str, logs))
    assert result.returncode == 0, result.stderr
    assert "Session review" in result.stdout and "Session rough" in result.stdout


@pytest.mark.integration
def test_the_command_demo_ends_with_works(hermes_home):
    demo = run_hermes_tui("demo", cwd=hermes_home)
    assert demo.returncode == 0, demo.stderr
    last = demo.stdout.strip().splitlines()[-1]
    command = last.split("summarize it: ")[1].rstrip(")")
    assert command == "hermes-tui report --per-session"
    argv = command.split()
    result = run_hermes_tui(*argv[1:], cwd=hermes_home)
    assert result.returncode == 0, result.stderr
    assert "Micro-compaction report: " in result.stdout
    assert "trajectory (absorbed and defrag passes)" in result.stdout  # the demo's passes, per session


def test_hermes_agents_own_batch_lines_are_counted(tmp_path):
    """Hermes Agent logs batch compactions under the same marker with its own fields
    (agent/conversation_compression.py: event "compression_attempt", commit_status), as
    ``hermes_logging`` formats a record: "%(asctime)s %(levelname)s %(name)s: %(message)s"."""

    def hermes_line(payload: dict) -> str:
        body = json.dumps(payload, sort_keys=True, separators=(",", ":"))
        return f"2026-11-30 03:01:02,345 INFO agent.conversation_compression: context compression attempt telemetry: {body}"

    log = tmp_path / "agent.log"
    log.write_text("\n".join([
        hermes_line({"event": "compression_attempt", "session_id": "20261130_030000_abc", "commit_status": "committed",
                     "split_status": "in_place_committed", "total_duration_ms": 13447, "fallback_used": False}),
        hermes_line({"event": "compression_attempt", "session_id": "20261130_030000_abc", "commit_status": "aborted",
                     "failure_class": "commit_fence_cancelled", "total_duration_ms": 40953}),
        hermes_line({"event": "compression_attempt", "session_id": "20261130_030000_abc", "commit_status": "committed",
                     "total_duration_ms": 9000}),
    ]) + "\n")
    figures = report.summarize(report.read_logs([log]).records)
    assert figures["batch_compactions"] == {"fired": 2, "failed": 1, "nothing_to_absorb": 0}
    assert figures["sessions"] == 1
