"""The prefix-cache arithmetic (hand-computed cases) and the cache benchmark's output structure."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest

from hermes_tui.compaction.prefix import (
    CacheTally,
    RequestCost,
    common_prefix_messages,
    request_cost,
)
from hermes_tui.config import Config
from hermes_tui.core.tokens import count_messages
from hermes_tui.core.transcript import parse_transcript
from hermes_tui.session.wiring import make_counter

REPO_ROOT = Path(__file__).resolve().parents[2]


def user(text: str) -> dict:
    return {"role": "user", "content": text}


def assistant(text: str, calls: list | None = None) -> dict:
    item = {"role": "assistant", "content": text}
    if calls:
        item["tool_calls"] = calls
    return item


def call(call_id: str, arguments: str = "{}") -> dict:
    return {"id": call_id, "type": "function", "function": {"name": "bash", "arguments": arguments}}


def tool(call_id: str, text: str) -> dict:
    return {"role": "tool", "content": text, "tool_call_id": call_id}


# --- the arithmetic ---------------------------------------------------------------------


def test_an_appended_request_reuses_the_whole_previous_request():
    previous = [user("fix the bug"), assistant("looking", [call("c1")])]
    current = [*previous, tool("c1", "ok")]
    cost = request_cost(previous, current, [10, 20, 5])
    assert (cost.common_messages, cost.reused_tokens, cost.prefill_tokens, cost.total_tokens) == (2, 30, 5, 35)


def test_the_first_request_is_prefilled_whole():
    cost = request_cost([], [user("hi")], [7])
    assert (cost.reused_tokens, cost.prefill_tokens) == (0, 7)


def test_a_splice_after_the_head_leaves_only_the_head_reusable():
    head = user("task")
    previous = [head, assistant("a1", [call("c1")]), tool("c1", "out1"), assistant("a2", [call("c2")]), tool("c2", "o")]
    marker = assistant("[summary of a1]")
    current = [head, marker, assistant("a2", [call("c2")]), tool("c2", "o"), assistant("a3")]
    cost = request_cost(previous, current, [7, 12, 9, 4, 3])
    # Everything after the head is prefilled again, though a2 and its result are unchanged.
    assert (cost.common_messages, cost.reused_tokens, cost.prefill_tokens) == (1, 7, 28)


def test_a_request_shorter_than_the_previous_one_reuses_its_common_start():
    previous = [user("task"), assistant("a"), user("more"), assistant("b")]
    current = [user("task"), assistant("[batch summary]")]
    cost = request_cost(previous, current, [5, 40])
    assert (cost.common_messages, cost.reused_tokens, cost.prefill_tokens) == (1, 5, 40)


def test_a_grown_last_message_is_prefilled_whole_under_the_message_rule():
    # The wire view merges a new same-role message into the last one: the merged message
    # differs from the cached one, so it counts as prefilled in full.
    previous = [user("task"), assistant("part one")]
    current = [user("task"), assistant("part one\n\npart two")]
    cost = request_cost(previous, current, [3, 8])
    assert (cost.reused_tokens, cost.prefill_tokens) == (3, 8)


@pytest.mark.parametrize("changed", [
    {"role": "user", "content": "same words"},                                         # role
    {"role": "assistant", "content": "same words", "tool_calls": [call("c9")]},        # tool calls added
    {"role": "assistant", "content": "same words!"},                                   # content
])
def test_messages_match_on_role_content_and_tool_calls(changed):
    previous = [user("task"), {"role": "assistant", "content": "same words"}]
    assert common_prefix_messages(previous, [user("task"), changed]) == 1


def test_tool_results_match_on_their_call_id_too():
    previous = [user("t"), assistant("", [call("c1")]), tool("c1", "done")]
    current = [user("t"), assistant("", [call("c1")]), tool("c2", "done")]
    assert common_prefix_messages(previous, current) == 2


def test_tool_call_arguments_are_part_of_the_match():
    previous = [user("t"), assistant("", [call("c1", '{"cmd": "ls"}')])]
    current = [user("t"), assistant("", [call("c1", '{"cmd": "ls -la"}')])]
    assert request_cost(previous, current, [4, 11]).reused_tokens == 4


def test_token_counts_must_match_the_request():
    with pytest.raises(ValueError, match="2 token counts for 3 messages"):
        request_cost([], [user("a"), user("b"), user("c")], [1, 2])


def test_the_tally_sums_requests_and_keeps_the_peak():
    tally = CacheTally()
    assert tally.mean_tokens == 0.0
    for total, reused in ((100, 0), (130, 100), (60, 20)):
        tally.add(RequestCost(total_tokens=total, reused_tokens=reused, common_messages=0))
    assert (tally.requests, tally.total_tokens, tally.reused_tokens, tally.prefill_tokens) == (3, 290, 120, 170)
    assert tally.peak_tokens == 130
    assert tally.mean_tokens == pytest.approx(290 / 3)


# --- the benchmark: structure, not figures ------------------------------------------------


@pytest.fixture(scope="module")
def bench_cache():
    spec = importlib.util.spec_from_file_location("bench_cache", REPO_ROOT / "benchmarks" / "bench_cache.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture
def short_session(tmp_path) -> Path:
    """A system prompt, one task, then agent steps with tool outputs large enough to need compaction."""
    messages: list[dict] = [{"role": "system", "content": "You are a coding agent."}, user("Fix the test in app.py")]
    for n in range(14):
        step_call = call(f"c{n}", json.dumps({"cmd": f"pytest -k t{n}"}))
        messages.append(assistant(f"Step {n}: run the tests again.", [step_call]))
        messages.append(tool(f"c{n}", f"test_{n} failed: AssertionError in app.py line {n}\n" + "trace line\n" * 60))
    messages.append(assistant("The test passes now."))
    path = tmp_path / "short.json"
    path.write_text(json.dumps(messages), encoding="utf-8")
    return path


def test_the_text_output_has_a_table_per_session_totals_and_goals(bench_cache, short_session, capsys):
    assert bench_cache.main(["--sessions", str(short_session), "--context-limit", "2048"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].startswith("Prefix-cache benchmark -- summarizer: extractive summarizer (no model)")
    assert any(line.startswith("=== context limit 2,048: threshold 1,638 tokens") for line in lines)
    start = lines.index("short.json (31 messages, 15 chat requests)")
    assert lines[start + 1].split() == bench_cache.HEADER.split()
    assert [line.split()[0] for line in lines[start + 2:start + 6]] == list(bench_cache.POLICIES)
    totals = lines.index("all sessions (1)")
    assert [line.split()[0] for line in lines[totals + 2:totals + 6]] == list(bench_cache.POLICIES)
    assert lines[totals + 6] == "  micro pass outcomes:"
    assert [line.split()[0] for line in lines[totals + 7:totals + 11]] == list(bench_cache.POLICIES)
    assert lines[totals + 7].split()[1:] == ["none"]  # batch-only runs no micro pass
    goal = next(n for n, line in enumerate(lines) if line.startswith("goal: prefill <= 1.3x batch-only"))
    assert [line.split()[0] for line in lines[goal + 1:]] == ["per-exchange", "per-turn", "watermark"]
    assert all("no_batch" in line for line in lines[goal + 1:])


def test_the_json_output_covers_every_policy_at_every_limit(bench_cache, short_session, capsys):
    assert bench_cache.main(["--sessions", str(short_session), "--context-limit", "2048", "4096", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert [r["context_limit"] for r in data["results"]] == [2048, 4096]
    for result in data["results"]:
        (session,) = result["sessions"]
        for runs in (session["policies"], result["totals"]):
            assert set(runs) == set(bench_cache.POLICIES)
            for run in runs.values():
                assert run["requests"] == 15
                assert run["prefill_tokens"] + run["reused_tokens"] == run["request_tokens"]
                assert run["peak_context_tokens"] >= run["mean_context_tokens"] > 0
        assert session["policies"]["batch-only"]["micro_passes"] == 0
        assert session["policies"]["per-exchange"]["micro_passes"] == 15  # one per agent step: 15 assistant messages
        assert session["policies"]["batch-only"]["prefill_ratio"] == 1.0
        assert set(result["goals"]) == {"per-exchange", "per-turn", "watermark"}


def test_the_output_is_the_same_on_every_run(bench_cache, short_session, capsys):
    argv = ["--sessions", str(short_session), "--context-limit", "2048"]
    bench_cache.main(argv)
    first = capsys.readouterr().out
    bench_cache.main(argv)
    assert capsys.readouterr().out == first


def test_a_bad_session_file_is_one_line_naming_it(bench_cache, tmp_path, capsys):
    bad = tmp_path / "bad.json"
    bad.write_text('[{"role": "user", "content": "hi"},\n', encoding="utf-8")
    assert bench_cache.main(["--sessions", str(bad)]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    (line,) = captured.err.splitlines()
    assert str(bad) in line and "not valid JSON" in line


def test_without_compaction_each_message_is_prefilled_once(bench_cache, short_session, capsys):
    """A window so large that nothing is compacted: every request extends the previous one, so the
    session prefills each message before the last request once, and with ``--reply-cached`` all but
    the replies, which the cache already holds."""
    messages = parse_transcript(short_session.read_text(encoding="utf-8"))
    counter = make_counter(Config())
    last_request = messages[:-1]  # everything before the final assistant message
    replies = [m for m in last_request if m.role == "assistant"]
    requests = [messages[:n] for n, m in enumerate(messages) if m.role == "assistant"]
    expected_total = sum(count_messages(counter, r) for r in requests)

    figures = {}
    for flags in ([], ["--reply-cached"]):
        assert bench_cache.main(["--sessions", str(short_session), "--context-limit", "1000000", "--json", *flags]) == 0
        (result,) = json.loads(capsys.readouterr().out)["results"]
        figures[tuple(flags)] = result["sessions"][0]["policies"]
    for policy in ("batch-only", "watermark"):
        plain, cached = figures[()][policy], figures[("--reply-cached",)][policy]
        assert (plain["batch_compactions"], plain["micro_passes"], plain["cache_breaks"]) == (0, 0, 0)
        assert plain["request_tokens"] == cached["request_tokens"] == expected_total
        assert plain["prefill_tokens"] == count_messages(counter, last_request)
        assert cached["prefill_tokens"] == count_messages(counter, last_request) - count_messages(counter, replies)
