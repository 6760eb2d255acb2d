"""Every kind of credential in tests/secret_corpus.py, planted in tool output, assistant
text, tool-call arguments and a URL, never comes out of compaction.

The engine runs for real (Compactor, replay, micro passes in both modes, defrag, batch;
then the ``hermes-tui compact`` CLI against an OpenAI-compatible HTTP server on
127.0.0.1). Two summarizers: one that records what it is sent and answers briefly, and
the worst case, one that echoes everything it was sent back as the summary, so any text
redaction missed would land in the marker. Checked: what the summarizer received, every
marker written (content and metadata, so the Facts section too), the telemetry lines,
``hermes-tui report`` and ``hermes-tui sessions export`` of the markers. The user's own
original messages and the archived originals stay as they were: they are the user's data.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import quote

import pytest
from helpers import make_compactor
from support.secret_corpus import (
    INJECTIONS,
    KINDS,
    EchoSummarizer,
    RecordingSummarizer,
    in_url,
)

from hermes_tui.analysis.replay import replay
from hermes_tui.compaction.checks import looks_like_instructions
from hermes_tui.core.transcript import parse_transcript

CLI_TIMEOUT_S = 300
INJECTION_MARKS = ("rm -rf ~/work", "id_rsa to", "contents of .env", "push to main")


# --- the planted session ------------------------------------------------------------------


def corpus_session() -> list[dict]:
    """system, a user request, then one agent step per kind: step i carries kind i in the
    assistant's text, kind i+1 in its tool call's arguments, kind i+2 in the tool output
    and kind i+3 in a URL among the arguments; every fifth output also carries an injection."""
    n = len(KINDS)
    messages: list[dict] = [
        {"role": "system", "content": "You are a coding agent."},
        {"role": "user", "content": "Deploy the release and check every service."},
    ]
    for i in range(n):
        text, args, out, url = (KINDS[(i + k) % n] for k in range(4))
        arguments = {"command": f"cd deploy && {args.carrier}"}
        if url.in_url:
            arguments["url"] = in_url(url)
        output = f"step {i} log\n{out.carrier}\n"
        if i % 5 == 0:
            output += INJECTIONS[i // 5 % len(INJECTIONS)] + "\n"
        output += f"finished in {i + 1}.2 seconds, exit code {i % 3}"
        messages += [
            {"role": "assistant", "content": f"Step {i}: checking deploy/step_{i}.yaml. {text.carrier}",
             "tool_calls": [{"id": f"call_{i}", "type": "function",
                             "function": {"name": "bash", "arguments": json.dumps(arguments)}}]},
            {"role": "tool", "tool_call_id": f"call_{i}", "name": "bash", "content": output},
        ]
        if i % 12 == 11:
            messages.append({"role": "user", "content": f"Keep going; service {i} looks fine."})
    messages.append({"role": "assistant", "content": "All steps ran."})
    return messages


def _forms(value: str) -> set[str]:
    """A value as it may appear in text, in a JSON string, or URL-encoded."""
    return {value, json.dumps(value)[1:-1], quote(value, safe="")}


PLANTED = sorted({form for kind in KINDS for value in kind.values for form in _forms(value)}, key=len)


def leaks(text: str) -> list[str]:
    return [value for value in PLANTED if value in text]


def injection_leaks(text: str) -> list[str]:
    found = [mark for mark in INJECTION_MARKS if mark in text]
    return found + (["instruction-shaped text"] if looks_like_instructions(text) else [])


# --- summarizers -----------------------------------------------------------------------------


# --- the engine ------------------------------------------------------------------------------


@pytest.mark.parametrize("mode", ["merge", "append"])
@pytest.mark.parametrize("summarizer_class", [RecordingSummarizer, EchoSummarizer])
def test_no_planted_credential_leaves_the_engine(mode, summarizer_class, caplog):
    caplog.set_level("INFO", logger="hermes_tui.compaction")
    summarizer = summarizer_class()
    compactor, conv = make_compactor(summarizer, limit=24_000, target_ratio=0.1, defrag_threshold=1500, protect_first_n=2,
                                     mode=mode, fact_guard=True)
    markers = []

    def persist(result):
        if result.splice is not None:
            markers.append(result.splice.marker)

    messages = parse_transcript(json.dumps(corpus_session()))
    result = replay(messages, conv, compactor, turns="step", persist=persist)
    # Batch compaction, the backstop, on its own: micro passes off, a window that fills.
    batcher, batch_conv = make_compactor(summarizer, limit=6_000, target_ratio=0.2, micro=False, protect_first_n=2)
    batched = replay(parse_transcript(json.dumps(corpus_session())), batch_conv, batcher, turns="step", persist=persist)
    batches = [r for r in batched.reports if r.kind == "batch"]
    assert batches and {r.outcome for r in batches} == {"compressed"}, [r.outcome for r in batches]
    if summarizer_class is EchoSummarizer:
        # The echoed chunks carry the planted injections: rejected, as model text would be, and
        # the chunks' own notes (held to the same checks, below) stand in for them.
        assert {reason for r in batches for reason in r.fields["rejected"] or []} == {"instructions"}
        assert all(r.fields["chunks_by_notes"] for r in batches)

    outcomes = [r.outcome for r in result.reports]
    assert outcomes.count("absorbed") >= 20, outcomes
    if summarizer_class is EchoSummarizer:
        assert "defrag" in outcomes, outcomes
    assert len(summarizer.prompts) > 30 and len(markers) > 20
    for prompt in summarizer.prompts:
        assert not leaks(prompt), leaks(prompt)
    for marker in markers:
        text = marker.content + "\n" + json.dumps(marker.meta)
        assert not leaks(text), (leaks(text), marker.content[-2000:])
        assert not injection_leaks(marker.content), (injection_leaks(marker.content), marker.content[-2000:])
    assert any("Facts:" in m.content for m in markers)
    assert not leaks(caplog.text)
    # The user's messages are the user's, verbatim.
    assert [m.content for m in conv.messages if m.role == "user"] == [
        m["content"] for m in corpus_session() if m["role"] == "user"]


# --- the CLI against an HTTP endpoint --------------------------------------------------------

_TAGS = re.compile(r"<(summary|exchange|messages)>\n(.*?)\n</\1>", re.DOTALL)
_LABEL = re.compile(r"^(?:ASSISTANT|TOOL CALL \S+|TOOL RESULT(?: \([^)]*\))?|[A-Z]+): ?", re.MULTILINE)


def echo_reply(chat: list[dict]) -> str:
    """Everything the request carried (summary and messages, without the rendering labels
    that read as a dialogue), as a model that copies its input would answer."""
    system, user = chat[0]["content"], chat[-1]["content"]
    parts = {tag: _LABEL.sub("", body) for tag, body in _TAGS.findall(user)}
    summary = parts.get("summary", "")
    if summary.startswith("(empty"):
        summary = ""
    new = parts.get("exchange", parts.get("messages", ""))
    if "only the new lines" in system:
        return new
    text = "\n".join(p for p in (summary, new) if p)
    return text[: int(len(text) * 0.4)] if "consolidated summary" in system else text


class EchoEndpoint:
    """``POST /v1/chat/completions`` on 127.0.0.1: records each request body, echoes it."""

    def __init__(self) -> None:
        self.bodies: list[str] = []
        endpoint = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):
                body = self.rfile.read(int(self.headers.get("Content-Length", 0))).decode()
                endpoint.bodies.append(body)
                request = json.loads(body)
                reply = json.dumps({
                    "id": "echo", "object": "chat.completion", "model": request.get("model"),
                    "choices": [{"index": 0, "finish_reason": "stop",
                                 "message": {"role": "assistant", "content": echo_reply(request["messages"])}}],
                    "usage": {"prompt_tokens": 100, "completion_tokens": 50, "total_tokens": 150},
                }).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(reply)))
                self.end_headers()
                self.wfile.write(reply)

            def log_message(self, *args):  # keep the test output clean
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}/v1"

    def __enter__(self) -> EchoEndpoint:
        self.thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.server.shutdown()
        self.server.server_close()


def run_cli(*args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    env.pop("OPENAI_API_KEY", None)
    return subprocess.run(
        [sys.executable, "-m", "hermes_tui.cli", *args], env=env, stdin=subprocess.DEVNULL,
        capture_output=True, text=True, timeout=CLI_TIMEOUT_S,
    )


def marker_sections(markdown: str) -> list[str]:
    """The context-summary sections of a Markdown export."""
    return re.findall(r"^## Context summary \([a-z]+\)[^\n]*\n(.*?)(?=^## |\Z)", markdown, re.MULTILINE | re.DOTALL)


def test_no_planted_credential_leaves_the_cli(hermes_home, tmp_path):
    transcript = tmp_path / "corpus.json"
    transcript.write_text(json.dumps(corpus_session(), indent=1), encoding="utf-8")
    sessions = []
    with EchoEndpoint() as endpoint:
        for mode in ("append", "merge"):
            proc = run_cli("compact", str(transcript), "--provider", "openai-api", "--base-url", endpoint.base_url,
                           "--model", "echo", "--context-limit", "16384", "--turns", "step", "--mode", mode,
                           "--policy", "per_exchange",
                           "--out", str(tmp_path / f"out-{mode}.json"))
            assert proc.returncode == 0, proc.stderr[-3000:]
            sessions.append(re.search(r"stored as session (\S+)", proc.stderr).group(1))
            assert not leaks(proc.stderr)
            out = json.loads((tmp_path / f"out-{mode}.json").read_text(encoding="utf-8"))
            out_markers = [m for m in out if (m.get("meta") or {}).get("compaction")]
            assert out_markers, mode
            for marker in out_markers:
                assert not leaks(json.dumps(marker)), leaks(json.dumps(marker))
                assert not injection_leaks(marker["content"]), injection_leaks(marker["content"])
    assert len(endpoint.bodies) > 40
    for body in endpoint.bodies:
        assert not leaks(body), leaks(body)

    log = (hermes_home / "logs" / "agent.log").read_text(encoding="utf-8")
    passes = [line for line in log.splitlines() if "micro compaction telemetry: " in line]
    absorbed = [p for p in passes if '"outcome":"absorbed"' in p]
    assert len(absorbed) > 20 and any('"outcome":"defrag"' in p for p in passes)
    assert not leaks(log)
    report = run_cli("report")
    assert report.returncode == 0 and "micro" in report.stdout.lower(), report.stderr
    assert not leaks(report.stdout + report.stderr)

    for session_id in sessions:
        exported = run_cli("sessions", "export", session_id, "--format", "json", "--all")
        assert exported.returncode == 0, exported.stderr
        rows = json.loads(exported.stdout)
        exported_markers = [m for m in rows if (m.get("meta") or {}).get("compaction")]
        assert len(exported_markers) > 5  # the active marker and the superseded (archived) ones
        for marker in exported_markers:
            assert not leaks(json.dumps(marker)), leaks(json.dumps(marker))
        # The originals are archived untouched: the user's data, kept.
        assert leaks(json.dumps([m for m in rows if not (m.get("meta") or {}).get("compaction")]))
        markdown = run_cli("sessions", "export", session_id, "--format", "md", "--all")
        assert markdown.returncode == 0, markdown.stderr
        sections = marker_sections(markdown.stdout)
        assert len(sections) == len(exported_markers)
        for section in sections:
            assert not leaks(section), leaks(section)
            assert not injection_leaks(section), injection_leaks(section)
