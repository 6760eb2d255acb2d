"""Compaction passes through a real small model (Qwen2.5-Coder-0.5B-Instruct under llama-server).

What the stand-ins could not show: that a real model's answers, judged by the engine, end up
as summaries with content. The session is the bundled demo (a real mini-swe-agent session on
django).
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

from hermes_tui.analysis.replay import exchange_ends, replay
from hermes_tui.compaction import facts
from hermes_tui.compaction.checks import is_refusal, looks_like_instructions
from hermes_tui.config import Config
from hermes_tui.core.conversation import Conversation
from hermes_tui.core.transcript import check_tool_pairing, parse_transcript
from hermes_tui.providers.openai.summarizer import OpenAISummarizer
from hermes_tui.session.wiring import make_compactor, make_counter

pytestmark = [pytest.mark.realmodels, pytest.mark.timeout(900)]

DEMO = Path(__file__).resolve().parents[2] / "hermes_tui" / "assets" / "demo_session.json"
BENCH = Path(__file__).resolve().parents[2] / "benchmarks" / "bench_real_compaction.py"


def demo(messages: int):
    return parse_transcript(DEMO.read_text(encoding="utf-8"), source=str(DEMO))[:messages]


def compactor_for(server, *, policy: str, limit: int):
    config = Config.model_validate({"compression": {"policy": policy}})
    counter = make_counter(config)
    summarizer = OpenAISummarizer(server.base_url, server.model, timeout=120)
    return make_compactor(config, counter=counter, summarizer=summarizer, context_limit=limit), counter


def test_passes_absorb_with_content_written_by_the_model(small_model_server):
    """One pass per agent step over the first steps of a real session: the model's notes are
    absorbed (at least most of them: the rest by the exchange's own notes), never a refusal,
    an instruction or a copy, and the summary keeps the files the steps named."""
    # A window where the steps' results fit beside the tail: at 4,000 tokens the newest step
    # is over the threshold less the tail's budget, the trim cuts it (the tail under pressure)
    # and the tail then reaches back over all but two exchanges, too few to judge passes by.
    compactor, counter = compactor_for(small_model_server, policy="per_exchange", limit=6_000)
    conv = Conversation(counter=counter)
    result = replay(demo(20), conv, compactor, turns="step")
    micro = [r for r in result.reports if r.kind == "micro"]
    absorbed = [r for r in micro if r.outcome == "absorbed"]
    by_model = [r for r in absorbed if r.fields["written_by"] == "model"]
    # Every exchange a pass took on was absorbed (a defrag may fail and back off: it changes nothing).
    assert len(absorbed) >= 3, [(r.outcome, r.fields.get("failure")) for r in micro]
    assert not [r for r in micro if r.outcome in ("summarize_failed", "exchange_skipped")], \
        [(r.outcome, r.fields.get("failure")) for r in micro]
    assert len(by_model) >= len(absorbed) / 2, [(r.fields["written_by"], r.fields["rejected"]) for r in absorbed]
    body = facts.body_of(compactor.rolling_summary, compactor.state.facts)
    assert not is_refusal(body) and not looks_like_instructions(body)
    assert "widgets.py" in compactor.rolling_summary


def test_the_window_holds_over_a_real_session_slice_with_default_settings(small_model_server):
    """Default settings (the watermark policy, append notes, trim first) over the first 40
    messages of the real session at an 8,192-token window: the context the chat model gets
    after every step's passes stays within the threshold, no batch compaction fails, every
    user message is still there word for word, and tool calls stay paired."""
    messages = demo(40)
    compactor, counter = compactor_for(small_model_server, policy="watermark", limit=8_192)
    threshold = compactor.ctx.window.threshold_tokens
    conv = Conversation(counter=counter)
    sent: list[int] = []
    result = replay(messages, conv, compactor, turns="step",
                    on_turn=lambda number, total, reports: sent.append(conv.total_tokens))
    outcomes = [(r.kind, r.outcome, r.fields.get("failure")) for r in result.reports]
    assert sum(1 for r in result.reports if r.kind == "micro" and r.outcome == "absorbed") >= 3, outcomes
    assert max(sent) <= threshold, (max(sent), threshold, outcomes)
    assert not [r for r in result.reports if r.kind == "batch" and r.outcome != "compressed"], outcomes
    users = [m.content for m in messages if m.role == "user"]
    assert all(text in compactor.rolling_summary or any(m.content == text for m in conv.messages) for text in users)
    check_tool_pairing(conv.messages)


def test_the_chat_prefill_benchmark_reads_a_real_prefix_cache(small_model_server):
    """``bench_real_compaction.py --chat-prefill`` on a real server: each step's chat request
    is sent, and llama-server's prompt cache answers part of every policy's prompts."""
    spec = importlib.util.spec_from_file_location("bench_real_compaction", BENCH)
    bench = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = bench  # its dataclasses look their module up
    spec.loader.exec_module(bench)
    # A request per step that ends with results (one ending with a reply is not a request).
    steps = sum(1 for end, _ in exchange_ends(demo(24), "step") if demo(24)[end - 1].role == "tool")
    measured = bench.chat_prefill(DEMO, small_model_server.base_url, small_model_server.model, 24, 4_000)
    for policy in bench.POLICIES:
        figures = measured[policy]
        assert figures["requests"] == steps, (policy, figures)
        assert 0 < figures["cached_tokens"] < figures["prompt_tokens"], (policy, figures)
        assert figures["prefilled_tokens"] == figures["prompt_tokens"] - figures["cached_tokens"]
    assert measured["batch-only"]["prefilled_vs_batch_only"] == 1.0
