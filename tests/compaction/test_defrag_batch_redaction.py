"""Credentials never reach the summarizer or a summary through a defrag or a batch.

Three ways in for each: a message of the middle carries a key, the rolling summary a
resumed transcript's marker carries holds one (written before redaction covered its
shape), and the model writes one out on its own.
"""

from __future__ import annotations

from helpers import ScriptedSummarizer, agent_session, make_compactor, words

from hermes_tui.compaction.summary_request import SummaryRequest
from hermes_tui.core.transcript import MICRO, make_marker

IN_MIDDLE = "sk-" + "Ab3d" * 12
IN_OLD_SUMMARY = "ghp_" + "Zq7x" * 9
FROM_MODEL = "hf_" + "Kp4m" * 9
SECRETS = (IN_MIDDLE, IN_OLD_SUMMARY, FROM_MODEL)
LONG_SUMMARY = "\n".join(f"- note {i}: " + words(8, f"n{i}") for i in range(25))  # over 500 tokens


def carried(request: SummaryRequest) -> str:
    """Every text a request hands the model: the summary, contents and call arguments."""
    texts = [request.summary]
    for msg in request.messages:
        texts.append(msg.content)
        texts.extend(str((call.get("function") or {}).get("arguments", "")) for call in msg.tool_calls or [])
    return "\n".join(texts)


def session_with_secrets():
    """An agent session with a key in a tool result of the middle, resumed from a marker
    whose summary holds another key."""
    messages = agent_session(exchanges=30, size=300)
    old = make_marker(
        MICRO, f"{LONG_SUMMARY}\n- pushed with token {IN_OLD_SUMMARY}", covers=[],
        extra={"summary_tokens": 700, "passes_total": 1},
    )
    messages.insert(2, old)  # right after the head: system and the first user message
    tool = next(m for m in messages[3:] if m.role == "tool")
    tool.content = f"{tool.content}\nexport OPENAI_API_KEY={IN_MIDDLE}"
    return messages


def assert_clean(compactor, conv, summarizer):
    for request in summarizer.requests:
        assert not any(secret in carried(request) for secret in SECRETS), request.kind
    (marker,) = [m for m in conv.messages if m.is_marker]
    for secret in SECRETS:
        assert secret not in compactor.rolling_summary
        assert secret not in marker.content and secret not in marker.meta["summary"]
    assert "[REDACTED]" in compactor.rolling_summary  # the model's key was replaced, not dropped


def test_defrag_redacts_what_it_sends_and_what_it_keeps():
    summarizer = ScriptedSummarizer(lambda r: f"- consolidated; deployed with {FROM_MODEL}.\n- " + words(150, "n"))
    compactor, conv = make_compactor(summarizer, defrag_threshold=500, limit=200_000)
    conv.extend(session_with_secrets())
    report = compactor.micro_pass(conv)
    assert report.outcome == "defrag"
    assert [r.kind for r in summarizer.requests] == ["defrag"]
    assert_clean(compactor, conv, summarizer)


def test_batch_redacts_what_it_sends_and_what_it_keeps():
    summarizer = ScriptedSummarizer(lambda r: f"- the session so far; deployed with {FROM_MODEL}.")
    compactor, conv = make_compactor(summarizer, limit=200_000)
    conv.extend(session_with_secrets())
    report = compactor.compress(conv)
    assert report.outcome == "compressed"
    assert summarizer.requests and all(r.kind == "batch" for r in summarizer.requests)
    assert_clean(compactor, conv, summarizer)
