"""``hermes-tui`` as users run it: the real entry point in a subprocess, HERMES_TUI_HOME in a
temp dir, a transcript file on disk, the compacted transcript on stdout (or ``--out``),
telemetry in ``$HERMES_TUI_HOME/logs/agent.log`` and one error line on stderr for bad input.

The integration tests point ``compact`` at a real ``mlx_lm.server`` serving the tiny
random-weight model (``conftest.mlx_server``). That model never emits an end token, so
every summary it writes is cut off by ``max_tokens``: the truthful expectation is that
every pass fails with ``cut_off`` and that the third failure on one exchange skips it.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
from pathlib import Path
from typing import Any

import pytest
from support.cli import CLI_TIMEOUT_S, COMPACT, ENTRY_POINTS, SCRIPT, explain, run_cli, write_json
from support.cli_sessions import (
    GIT_DIFF,
    SYSTEM,
    USER_1,
    USER_2,
    USER_3,
    SessionBuilder,
    agent_session,
    one_request_session,
)
from support.servers import free_port

TELEMETRY_PREFIX = "micro compaction telemetry: "


# --- running the CLI -----------------------------------------------------------------


def telemetry(home: Path) -> list[dict[str, Any]]:
    """The micro telemetry records in ``$HERMES_TUI_HOME/logs/agent.log`` (each line's JSON must parse)."""
    log = home / "logs" / "agent.log"
    records = []
    for line in log.read_text(encoding="utf-8").splitlines():
        if TELEMETRY_PREFIX in line:
            records.append(json.loads(line.split(TELEMETRY_PREFIX, 1)[1]))
    return records


def batch_lines(home: Path) -> list[str]:
    log = home / "logs" / "agent.log"
    return [line for line in log.read_text(encoding="utf-8").splitlines() if "context compression attempt telemetry:" in line]


def result_lines(stderr: str) -> tuple[re.Match, re.Match]:
    turns = re.search(
        r"^turns (\d+), micro passes (\d+) \((.*)\), batch compactions (\d+)$", stderr, re.M
    )
    tokens = re.search(
        r"^tokens ([\d,]+) -> ([\d,]+) \((\d+) messages\), final occupancy (.+)$", stderr, re.M
    )
    assert turns and tokens, stderr
    return turns, tokens


def markers(messages: list[dict], kind: str | None = None) -> list[dict]:
    return [
        m for m in messages
        if isinstance(m.get("meta"), dict) and m["meta"].get("compaction") and (kind is None or m["meta"]["compaction"] == kind)
    ]


def user_contents(messages: list[dict]) -> list[str]:
    return [m["content"] for m in messages if m["role"] == "user"]


def write_jsonl(path: Path, messages: list[dict]) -> Path:
    path.write_text("".join(json.dumps(m) + "\n" for m in messages), encoding="utf-8")
    return path


# --- a small, realistic agent session ---------------------------------------------------

# --- compact with the extractive summarizer -----------------------------------------------


@pytest.fixture
def home(tmp_path) -> Path:
    home = tmp_path / "hermes_home"
    home.mkdir()
    return home


def check_compacted(session: list[dict], out: list[dict]) -> None:
    """What a compacted copy of ``agent_session()`` must look like."""
    assert isinstance(out, list) and out
    for message in out:
        assert message["role"] in ("system", "user", "assistant", "tool")
        assert isinstance(message["content"], str)
    # user messages verbatim and in order; the system prompt untouched
    assert user_contents(out) == [USER_1, USER_2, USER_3]
    assert out[0] == {"role": "system", "content": SYSTEM}
    # exactly one micro marker, with the rolling summary and what it covers
    micro = markers(out, "micro")
    assert len(micro) == 1, json.dumps(markers(out), indent=1)
    assert markers(out) == micro  # no batch compaction at this size
    meta = micro[0]["meta"]
    assert micro[0]["role"] == "assistant"
    assert isinstance(meta["summary"], str) and meta["summary"].strip()
    assert meta["summary"] in micro[0]["content"]
    assert isinstance(meta["covers"], list) and meta["covers"]
    assert len(out) < len(session)
    # every tool result in the output still answers a call right before it
    open_calls: set[str] = set()
    for message in out:
        if message["role"] == "tool":
            assert message["tool_call_id"] in open_calls
        else:
            open_calls = {c["id"] for c in message.get("tool_calls") or []}


def test_compact_json_to_stdout_and_jsonl_to_out(home, tmp_path):
    session = agent_session()
    json_path = write_json(tmp_path / "session.json", session)
    jsonl_path = write_jsonl(tmp_path / "session.jsonl", session)
    out_file = tmp_path / "compacted.json"

    proc = run_cli(home, "compact", str(json_path), *COMPACT)

    assert proc.returncode == 0, explain(proc)
    assert "Traceback" not in proc.stderr
    out = json.loads(proc.stdout)
    check_compacted(session, out)

    turns, tokens = result_lines(proc.stderr)
    assert int(turns.group(1)) == 3  # one per user message
    passes = int(turns.group(2))
    assert passes == 3 and "absorbed" in turns.group(3)
    assert turns.group(4) == "0"
    before, after = (int(tokens.group(i).replace(",", "")) for i in (1, 2))
    assert after < before
    assert int(tokens.group(3)) == len(out)
    assert re.fullmatch(r"\d+\.\d% of threshold", tokens.group(4)), tokens.group(4)

    records = telemetry(home)
    assert len(records) == passes
    assert all(r["event"] == "micro_compaction" for r in records)
    assert len({r["session_id"] for r in records}) == 1 and records[0]["session_id"]
    assert all(r["aux_model"] == "extractive" and r["context_limit"] == 4096 for r in records)
    assert records[-1]["tokens_after"] == after

    # the same session as JSONL, written with --out: the same result, in the file
    proc = run_cli(home, "compact", str(jsonl_path), *COMPACT, "--out", str(out_file))

    assert proc.returncode == 0, explain(proc)
    assert proc.stdout == ""
    assert result_lines(proc.stderr)[1].group(2) == tokens.group(2)
    written = json.loads(out_file.read_text(encoding="utf-8"))
    check_compacted(session, written)
    assert [(m["role"], m["content"]) for m in written] == [(m["role"], m["content"]) for m in out]
    assert len(telemetry(home)) == 2 * passes  # the log is appended to


def test_turns_step_telemetry_and_report(tmp_path):
    """One user request and many agent steps: --turns user makes one pass, --turns step one
    per step; each pass logs one telemetry line, and ``report`` summarizes them."""
    session = one_request_session()
    path = write_json(tmp_path / "session.json", session)
    passes = {}
    for mode in ("user", "step"):
        home = tmp_path / f"home_{mode}"
        home.mkdir()
        proc = run_cli(home, "compact", str(path), *COMPACT, "--turns", mode)
        assert proc.returncode == 0, explain(proc)
        turns, _ = result_lines(proc.stderr)
        passes[mode] = int(turns.group(2))
        assert user_contents(json.loads(proc.stdout)) == [USER_1]
        log = home / "logs" / "agent.log"
        lines = [line for line in log.read_text(encoding="utf-8").splitlines() if "micro compaction telemetry:" in line]
        assert len(lines) == passes[mode]
    assert passes["user"] == 1
    assert passes["step"] > passes["user"]
    assert passes["step"] == sum(m["role"] == "assistant" for m in session)

    records = telemetry(home)  # the --turns step run
    # Each line's passes_total counts the passes so far that found an exchange (Hermes' count).
    found = [r["outcome"] != "nothing_to_absorb" for r in records]
    assert [r["passes_total"] for r in records] == [sum(found[: n + 1]) for n in range(len(records))]
    assert any(found) and not all(found)
    for record in records:
        for key in ("outcome", "messages_before", "messages_after", "tokens_before", "tokens_after",
                    "tokens_delta", "cursor", "duration_ms", "threshold_tokens", "occupancy_pct"):
            assert key in record, key
        assert record["tokens_delta"] == record["tokens_after"] - record["tokens_before"]
    absorbed = sum(r["outcome"] == "absorbed" for r in records)
    assert absorbed >= 2

    report = run_cli(home, "report", str(log))

    assert report.returncode == 0, explain(report)
    assert re.search(rf"^\s*passes\s+{sum(found)}\s*$", report.stdout, re.M), report.stdout  # as passes_total
    assert re.search(rf"absorbed\s+{absorbed}\b", report.stdout), report.stdout
    assert "batch compactions" in report.stdout


def test_console_script_entry_point(home, tmp_path):
    """The ``hermes-tui`` script in the venv behaves as ``python -m hermes_tui.cli`` (used everywhere else)."""
    assert SCRIPT.exists(), f"no console script at {SCRIPT}"
    path = write_json(tmp_path / "session.json", agent_session())
    proc = run_cli(home, "compact", str(path), *COMPACT, entry="script")
    assert proc.returncode == 0, explain(proc)
    assert user_contents(json.loads(proc.stdout)) == [USER_1, USER_2, USER_3]
    missing = run_cli(home, "compact", str(tmp_path / "nope.json"), entry="script")
    assert_one_line_error(missing, str(tmp_path / "nope.json"))


def test_demo(home):
    proc = run_cli(home, "demo")

    assert proc.returncode == 0, explain(proc)
    assert "Traceback" not in proc.stderr
    assert re.search(r"^\s*pass\s+\| messages \|\s+tokens \|\s+delta \| occupancy \| duration$", proc.stdout, re.M), proc.stdout
    # Pass rows may carry their outcome: "1 (defrag) | 76 -> 21 |".
    rows = re.findall(r"^\s*\d+(?: \(\w+\))?\s+\| +\d+ -> \d+ \|", proc.stdout, re.M)
    # The default policy (watermark) folds several exchanges per splice: a few splices.
    assert len(rows) >= 3
    assert "batch compactions 0" in proc.stdout
    assert len(telemetry(home)) > 0


# --- bad input: exit 2, one line, no traceback ------------------------------------------


def assert_one_line_error(proc: subprocess.CompletedProcess, *needles: str) -> str:
    assert proc.returncode == 2, explain(proc)
    assert "Traceback" not in proc.stderr, proc.stderr
    lines = proc.stderr.splitlines()
    assert len(lines) == 1, proc.stderr
    line = lines[0]
    for needle in needles:
        assert needle in line, f"{needle!r} not in {line!r}"
    assert proc.stdout == ""
    return line


def test_missing_transcript(home, tmp_path):
    path = tmp_path / "missing.json"
    proc = run_cli(home, "compact", str(path), "--provider", "extractive")
    assert_one_line_error(proc, str(path), "no such file")


def test_invalid_json_names_the_line(home, tmp_path):
    path = tmp_path / "broken.json"
    path.write_text('[\n  {"role": "user", "content": "hi"},\n  {"role": "assistant", "content": }\n]\n')
    proc = run_cli(home, "compact", str(path), "--provider", "extractive")
    assert_one_line_error(proc, str(path), "line 3", "not valid JSON")


def test_invalid_jsonl_names_the_line(home, tmp_path):
    path = tmp_path / "broken.jsonl"
    path.write_text('{"role": "user", "content": "hi"}\n{"role": "assistant", "content": "ok"\n')
    proc = run_cli(home, "compact", str(path), "--provider", "extractive")
    assert_one_line_error(proc, str(path), "line 2", "not valid JSON")


def test_unknown_role(home, tmp_path):
    session = agent_session()
    session[4] = {"role": "robot", "content": "beep"}
    path = write_json(tmp_path / "robot.json", session)
    proc = run_cli(home, "compact", str(path), "--provider", "extractive")
    assert_one_line_error(proc, str(path), "message 4", "robot", "role")


def test_tool_message_answering_no_call(home, tmp_path):
    messages = [
        {"role": "user", "content": "list the files"},
        {"role": "assistant", "content": "Listing."},
        {"role": "tool", "tool_call_id": "call_404", "content": "a.py\nb.py"},
    ]
    path = write_json(tmp_path / "orphan.json", messages)
    proc = run_cli(home, "compact", str(path), "--provider", "extractive")
    assert_one_line_error(proc, str(path), "message 2", "call_404", "answers no open tool call")


def test_config_unknown_key(home, tmp_path):
    config = home / "config.yaml"
    config.write_text("compression:\n  threshold: 0.7\n  thresold_tokens: 5000\n")
    path = write_json(tmp_path / "session.json", agent_session())
    proc = run_cli(home, "compact", str(path), "--provider", "extractive")
    assert_one_line_error(proc, str(config), "line 3", "compression.thresold_tokens", "unknown key")


def test_config_wrong_type(home, tmp_path):
    config = home / "config.yaml"
    config.write_text("auxiliary:\n  compression:\n    timeout: 30\n    max_tokens: lots\n")
    path = write_json(tmp_path / "session.json", agent_session())
    proc = run_cli(home, "compact", str(path), "--provider", "extractive")
    assert_one_line_error(proc, str(config), "line 4", "auxiliary.compression.max_tokens", "whole number")


def test_openai_api_without_base_url(home, tmp_path):
    path = write_json(tmp_path / "session.json", agent_session())
    proc = run_cli(home, "compact", str(path), "--provider", "openai-api", "--model", "qwen")
    assert_one_line_error(proc, "openai-api", "auxiliary.compression.base_url")


def test_auto_provider_with_nothing_configured(home, tmp_path):
    path = write_json(tmp_path / "session.json", agent_session())
    proc = run_cli(home, "compact", str(path), "--provider", "auto")
    # says what to configure, and the way out that needs no model
    assert_one_line_error(proc, "auxiliary.compression.base_url", "auxiliary.compression.model", "extractive")


def test_context_limit_too_small(home, tmp_path):
    path = write_json(tmp_path / "session.json", agent_session())
    proc = run_cli(home, "compact", str(path), "--provider", "extractive", "--context-limit", "10")
    assert_one_line_error(proc, "--context-limit", "10", "256")


# --- against a real mlx_lm.server (the tiny random-weight model) ---------------------------

MAX_TOKENS = 16


def aux_config(home: Path, max_tokens: int = MAX_TOKENS, tokenizer: str = "") -> None:
    """``tokenizer``: what counts the replayed context (the chat model's job; no chat model here)."""
    counts = f"compression:\n  tokenizer: {json.dumps(tokenizer)}\n" if tokenizer else ""
    (home / "config.yaml").write_text(
        f"{counts}auxiliary:\n  compression:\n    max_tokens: {max_tokens}\n    timeout: 30\n"
    )


# The tiny random-weight model never ends an answer: each is cut off at max_tokens, and what
# whole lines it keeps are rejected too (empty). A pass asks twice (the second time strictly);
# then the exchange's deterministic notes would take its place, but for the integration
# session's small exchanges they are larger than the exchange less the first marker's
# scaffolding (grown), so the pass fails with the model's last rejection.
MODEL_REJECTIONS = {"cut_off", "empty"}


def assert_three_strikes(records: list[dict[str, Any]], failures: set[str]) -> list[dict[str, Any]]:
    """Every pass that had an exchange failed with one of ``failures``; the third failure on one
    exchange skipped it.

    Returns the passes that called the summarizer.
    """
    called = [r for r in records if r["outcome"] != "nothing_to_absorb"]
    assert {r["outcome"] for r in records} <= {"nothing_to_absorb", "summarize_failed", "exchange_skipped"}, records
    assert all(r["failure"] in failures for r in called), [r["failure"] for r in called]
    assert all(r["messages_after"] == r["messages_before"] and r["tokens_delta"] == 0 for r in records)
    by_cursor: dict[int, list[str]] = {}
    for r in called:
        by_cursor.setdefault(r["cursor"], []).append(r["outcome"])
    assert by_cursor, "no pass reached the summarizer"
    skipped = 0
    for cursor, outcomes in by_cursor.items():
        full = ["summarize_failed", "summarize_failed", "exchange_skipped"]
        assert outcomes == full[: len(outcomes)], (cursor, outcomes)
        skipped += outcomes[-1] == "exchange_skipped"
    assert skipped >= 1, by_cursor
    return called


STRIKES = ["summarize_failed", "summarize_failed", "exchange_skipped"]


def integration_session() -> list[dict[str, Any]]:
    """Sized for a 2048-token window (tail budget 327 tokens) with the tiny model's tokenizer:
    the first exchange is in the protected head, the second leaves the tail with the third
    step, and the third, fourth and fifth steps each fail on it, the last one skipping it.
    About 1,000 tokens, under the threshold, so no batch compaction runs."""
    b = SessionBuilder().say("system", SYSTEM).say("user", USER_1)
    b.step("Checking where Customer.name comes from.", "bash",
           {"command": "grep -rn 'name' app/models.py"},
           "app/models.py:12:    name: str\napp/models.py:31:        self.name = unicodedata.normalize('NFC', name)\n")
    b.step("Names are normalized to NFC, so the ASCII round-trip in the exporter is the only problem. Removing it.",
           "edit_file", {"path": "app/export.py", "old": "try:\n            name = ...", "new": "customer.name"},
           "Applied 1 edit to app/export.py (5 lines removed, 1 added).")
    b.step("Here is the diff so far.", "bash", {"command": "git diff app/export.py"}, GIT_DIFF)
    b.step("Opening the file in UTF-8 explicitly.", "edit_file",
           {"path": "app/export.py", "old": 'open(path, "w")', "new": 'open(path, "w", encoding="utf-8")'},
           "Applied 1 edit to app/export.py (1 line changed).")
    b.step("Adding a test for the header order and the encoding.", "write_file",
           {"path": "tests/test_export_encoding.py"}, "Wrote tests/test_export_encoding.py (31 lines).")
    return b.messages


@pytest.mark.integration
def test_compact_against_mlx_server(mlx_server, hf_offline_env, tmp_path, home):
    aux_config(home, tokenizer=mlx_server.model)
    session = integration_session()
    path = write_json(tmp_path / "session.json", session)

    proc = run_cli(
        home, "compact", str(path), "--provider", "openai-api",
        "--base-url", mlx_server.base_url, "--model", mlx_server.model,
        "--context-limit", "2048", "--turns", "step", "--policy", "per_exchange",
    )

    assert proc.returncode == 0, explain(proc)
    assert "Traceback" not in proc.stderr
    records = telemetry(home)
    turns, _ = result_lines(proc.stderr)
    assert len(records) == int(turns.group(2))
    assert turns.group(4) == "0"
    # As integration_session() is sized: the first exchange out of the tail is left verbatim at
    # once (both answers rejected, and its notes larger than it), the next is absorbed by its
    # notes (both answers rejected again).
    called = [r for r in records if r["outcome"] != "nothing_to_absorb"]
    assert [r["outcome"] for r in called] == ["exchange_skipped", "absorbed"], records
    skip, absorbed = called
    assert skip["failure"] in MODEL_REJECTIONS and absorbed["written_by"] == "notes"
    assert batch_lines(home) == []  # sized to stay under the threshold
    for r in called:
        assert r["aux_model"] == mlx_server.model
        assert isinstance(r["prompt_tokens"], int) and r["prompt_tokens"] > 50, r
        # Each call runs to the cap of 16 (see test_max_tokens_cap_is_honoured) and is rejected;
        # the plain request, then the strict one.
        assert r["rejected"] and r["model_calls"] == 2, r
        assert r["completion_tokens"] == r["model_calls"] * MAX_TOKENS, r
        assert isinstance(r["summarizer_ms"], int) and r["summarizer_ms"] >= 0
    assert skip["written_by"] is None
    (failures_line,) = [line for line in proc.stderr.splitlines() if line.strip().startswith("failures: ")]
    assert skip["failure"] in failures_line, proc.stderr
    assert str(home / "logs" / "agent.log") in proc.stderr

    out = json.loads(proc.stdout)
    # Nothing is lost: the user's messages verbatim, one marker for the exchange absorbed, and
    # the skipped exchange as it was, flagged.
    assert user_contents(out) == user_contents(session)
    assert len(markers(out)) == 1
    skipped = [m for m in out if "meta" in m and not m["meta"].get("compaction")]
    assert skipped and all(m["meta"] == {"compaction_skipped": True} for m in skipped)
    assert sum(m["role"] == "assistant" for m in skipped) == 1
    assert all({k: v for k, v in m.items() if k != "meta"} in session for m in skipped)


@pytest.mark.integration
def test_compact_against_closed_port(tiny_model, hf_offline_env, tmp_path, home):
    """The same command as above with nothing listening on the port (the same tokenizer, so
    the passes see the same token counts)."""
    aux_config(home, tokenizer=str(tiny_model.fp32))
    path = write_json(tmp_path / "session.json", integration_session())
    base_url = f"http://127.0.0.1:{free_port()}/v1"

    proc = run_cli(
        home, "compact", str(path), "--provider", "openai-api",
        "--base-url", base_url, "--model", str(tiny_model.fp32),
        "--context-limit", "2048", "--turns", "step", "--policy", "per_exchange",
    )

    assert proc.returncode == 0, explain(proc)
    assert "Traceback" not in proc.stderr
    records = telemetry(home)
    called = assert_three_strikes(records, "refused")
    assert [r["outcome"] for r in called] == STRIKES  # as integration_session() is sized
    assert batch_lines(home) == []
    assert all(r["prompt_tokens"] is None and r["completion_tokens"] is None for r in called)
    log = home / "logs" / "agent.log"
    assert re.search(r"^failures: refused \(details in (.+)\)$", proc.stderr, re.M), proc.stderr
    assert str(log) in proc.stderr
    assert user_contents(json.loads(proc.stdout)) == [USER_1]


# --- the engine in-process with OpenAISummarizer -------------------------------------------


def _server_compactor(mlx_server, max_tokens: int | None):
    from hermes_tui.config import Config
    from hermes_tui.session.wiring import make_compactor, make_counter

    config = Config().with_overrides({
        "auxiliary.compression.provider": "openai-api",
        "auxiliary.compression.base_url": mlx_server.base_url,
        "auxiliary.compression.model": mlx_server.model,
        "auxiliary.compression.max_tokens": max_tokens,
        "auxiliary.compression.timeout": 30.0,
    })
    counter = make_counter(config)
    return make_compactor(config, counter=counter, context_limit=2048, session_id="in-process"), counter


def _session_messages():
    from hermes_tui.core.transcript import parse_transcript

    return parse_transcript(json.dumps(integration_session()))


@pytest.mark.integration
def test_engine_with_openai_summarizer_against_mlx_server(mlx_server, caplog):
    from hermes_tui.core.conversation import Conversation
    from hermes_tui.providers.openai.summarizer import OpenAISummarizer

    compactor, counter = _server_compactor(mlx_server, max_tokens=None)
    assert isinstance(compactor.ctx.summarizer, OpenAISummarizer)
    messages = _session_messages()
    conv = Conversation(messages, counter=counter)
    before = [(m.id, m.role, m.content) for m in conv.messages]
    tokens_before = conv.total_tokens

    with caplog.at_level("INFO", logger="hermes_tui"):
        report = compactor.micro_pass(conv)

    fields = report.fields
    assert report.kind == "micro"
    # Both answers rejected, and the exchange's notes larger than the exchange (see
    # MODEL_REJECTIONS): it is left verbatim at once.
    assert report.outcome == "exchange_skipped" and fields["failure"] in MODEL_REJECTIONS, fields
    assert (fields["model_calls"], fields["written_by"], len(fields["rejected"])) == (2, None, 2), fields
    assert isinstance(fields["prompt_tokens"], int) and fields["prompt_tokens"] > 50
    assert isinstance(fields["completion_tokens"], int) and fields["completion_tokens"] > 0
    assert isinstance(fields["summarizer_ms"], int) and fields["summarizer_ms"] >= 0
    assert fields["aux_model"] == mlx_server.model
    assert fields["exchange_tokens"] > 0 and fields["context_limit"] == 2048
    # a skip changes nothing but the skipped messages' flag
    assert [(m.id, m.role, m.content) for m in conv.messages] == before
    assert conv.total_tokens == tokens_before and fields["tokens_delta"] == 0
    assert compactor.rolling_summary == ""
    lines = [r.getMessage() for r in caplog.records if TELEMETRY_PREFIX in r.getMessage()]
    assert len(lines) == 1
    logged = json.loads(lines[0].split(TELEMETRY_PREFIX, 1)[1])
    assert logged["prompt_tokens"] == fields["prompt_tokens"]
    assert logged["completion_tokens"] == fields["completion_tokens"]


@pytest.mark.integration
def test_max_tokens_cap_is_honoured(mlx_server):
    from hermes_tui.core.conversation import Conversation

    compactor, counter = _server_compactor(mlx_server, max_tokens=MAX_TOKENS)
    conv = Conversation(_session_messages(), counter=counter)
    report = compactor.micro_pass(conv)
    assert report.fields["failure"] in MODEL_REJECTIONS, report.fields
    # Two calls (the plain request and the strict retry), each cut at the cap.
    assert report.fields["model_calls"] == 2
    assert report.fields["completion_tokens"] == 2 * MAX_TOKENS


# --- resuming an interrupted compact ----------------------------------------------------------


IMAGE = "data:image/png;base64,iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg=="
OTHER_IMAGE = "data:image/png;base64,iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg=="


def resumable_session(image: str, *, marker: bool = True) -> list[dict[str, Any]]:
    """``agent_session()`` with an image in the first request and (``marker``) an imported
    marker ahead of it."""
    from hermes_tui.core.transcript import make_marker

    session = agent_session()
    imported = make_marker("micro", "- Read the README and the export module.", covers=[]).to_openai(with_meta=True)
    first = next(n for n, m in enumerate(session) if m["role"] == "user")
    session[first] = {"role": "user", "content": [
        {"type": "text", "text": USER_1}, {"type": "image_url", "image_url": {"url": image}}]}
    return [*session[:first], *([imported] if marker else []), *session[first:]]


def interrupted_compact(home: Path, transcript: Path) -> str:
    """The id of the session a ``compact`` killed at the end of its second turn left behind."""
    env = {**os.environ, "HERMES_TUI_HOME": str(home), "HERMES_TUI_CRASH_AT": "turn.end:2"}
    env.pop("OPENAI_API_KEY", None)
    killed = subprocess.run(
        [*ENTRY_POINTS["module"], "compact", str(transcript), *COMPACT], env=env, cwd=home,
        stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=CLI_TIMEOUT_S,
    )
    assert killed.returncode == -9, explain(killed)
    listed = run_cli(home, "sessions", "list", "--json")
    assert listed.returncode == 0, explain(listed)
    (only,) = json.loads(listed.stdout)
    return only["id"]


def test_compact_resume_continues_a_transcript_that_holds_markers(home, tmp_path):
    transcript = write_json(tmp_path / "session.json", resumable_session(IMAGE))
    session_id = interrupted_compact(home, transcript)

    proc = run_cli(home, "compact", str(transcript), *COMPACT, "--resume", session_id)

    assert proc.returncode == 0, explain(proc)
    assert f"stored as session {session_id}" in proc.stderr
    assert user_contents(json.loads(proc.stdout))[1:] == [USER_2, USER_3]


def test_compact_resume_refuses_a_transcript_that_differs_only_in_an_image(home, tmp_path):
    session_id = interrupted_compact(home, write_json(tmp_path / "session.json", resumable_session(IMAGE, marker=False)))
    other = write_json(tmp_path / "other.json", resumable_session(OTHER_IMAGE, marker=False))

    proc = run_cli(home, "compact", str(other), *COMPACT, "--resume", session_id)

    assert proc.returncode != 0
    assert "Traceback" not in proc.stderr
    assert re.search(rf"other\.json: message \d+ differs from session {session_id}: not the same transcript", proc.stderr), explain(proc)


def test_compact_mode_flag_reaches_telemetry_and_report(tmp_path):
    """--mode overrides compression.micro_compact_mode: each pass's telemetry names it, and
    ``report`` splits where the time went by mode."""
    path = write_json(tmp_path / "session.json", one_request_session())
    home = tmp_path / "home"
    home.mkdir()
    for mode in ("merge", "append"):
        proc = run_cli(home, "compact", str(path), *COMPACT, "--turns", "step", "--mode", mode)
        assert proc.returncode == 0, explain(proc)
    modes = [r.get("mode") for r in telemetry(home) if r["outcome"] in ("absorbed", "defrag")]
    assert "merge" in modes and "append" in modes
    assert modes.index("append") > len(modes) - 1 - modes[::-1].index("merge")  # merge's run first
    report = run_cli(home, "report")
    assert report.returncode == 0, explain(report)
    assert re.search(r"where the time goes\s+\(passes by mode: append \d+, merge \d+\)", report.stdout), report.stdout
    bad = run_cli(home, "compact", str(path), "--mode", "rewrite")
    assert bad.returncode == 2 and "--mode" in bad.stderr


# --- replays are not chats ----------------------------------------------------------------


def test_replays_are_listed_as_replays_with_their_own_titles_and_resume_skips_them(home, tmp_path, monkeypatch):
    """``compact`` stores its replay as a session; ``--resume`` with no id still reopens the
    user's last chat, and two replays of one file get titles that tell them apart."""
    from hermes_tui.cli import root as cli
    from hermes_tui.store import Store
    from hermes_tui.tui.app import HermesApp
    from hermes_tui.util import paths

    monkeypatch.setenv("HERMES_TUI_HOME", str(home))
    with Store(paths.state_db_path()) as store:
        chat = store.create_session("my chat").id
    transcript = write_json(tmp_path / "session.json", agent_session())
    for _ in range(2):
        proc = run_cli(home, "compact", str(transcript), *COMPACT)
        assert proc.returncode == 0, explain(proc)

    listed = run_cli(home, "sessions", "list", "--json")
    assert listed.returncode == 0, explain(listed)
    rows = json.loads(listed.stdout)
    assert sorted(r["kind"] for r in rows) == ["chat", "replay", "replay"]
    replays = [r for r in rows if r["kind"] == "replay"]
    assert len({r["title"] for r in replays}) == 2, replays
    assert all(r["title"].startswith("session.json") for r in replays), replays
    text = run_cli(home, "sessions", "list")
    assert sum(" replay " in line for line in text.stdout.splitlines()) == 2, text.stdout

    started: list[str | None] = []
    monkeypatch.setattr(HermesApp, "run", lambda self: started.append(self._start_session_id))
    assert cli.main(["--resume"]) == 0
    assert started == [chat]
