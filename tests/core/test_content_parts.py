"""Messages whose content is a list of parts (text, images, audio, files): kept verbatim
through parsing, the SQLite store, export, compaction and the wire; shown and summarized
as placeholders, never as their base64.

Everything runs through real parts: a real SQLite file, the CLI in a subprocess, a local
HTTP server recording what the chat endpoint receives, the tiny MLX model, the Textual app.
"""

from __future__ import annotations

import base64
import json
import re
import tempfile
from pathlib import Path

import pytest
from helpers import ScriptedSummarizer, make_compactor
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from support.chat_app import SIZE, app_for, app_test, make_config, settle
from support.cli import explain, run_cli
from support.openai_endpoint import FakeEndpoint, chunk, sse_reply, usage_chunk

from hermes_tui.compaction.prompts import render_messages
from hermes_tui.config import Config
from hermes_tui.core.tokens import MESSAGE_OVERHEAD, EstimateCounter, count_message
from hermes_tui.core.transcript import Message, TranscriptError, parse_transcript, wire_view
from hermes_tui.session.wiring import open_session
from hermes_tui.store import Store
from hermes_tui.store.export import session_messages, to_json

# --- parts as a client sends them ------------------------------------------------------------

PNG_BYTES = b"\x89PNG\r\n\x1a\n" + bytes(range(256)) * 47 + b"\x00" * 8  # 12 288 bytes: 12 KB
PNG_BASE64 = base64.b64encode(PNG_BYTES).decode()
PNG_URL = f"data:image/png;base64,{PNG_BASE64}"
WAV_BASE64 = base64.b64encode(b"RIFF" + b"\x01" * 2044).decode()  # 2 KB

USER_PARTS = [
    {"type": "text", "text": "What is wrong in this screenshot of the test run?"},
    {"type": "image_url", "image_url": {"url": PNG_URL, "detail": "high"}},
]
TOOL_PARTS = [  # a tool returning an image, as MCP tools can
    {"type": "text", "text": "Screenshot of the browser window, token sk-proj-4f9a8b7c6d5e4f3a2b1c0d9e8f7a6b5c"},
    {"type": "image_url", "image_url": {"url": PNG_URL}},
]
ODD_PARTS = [  # part types we do not know how to show are kept all the same
    {"type": "text", "text": "Here are the recording and the report."},
    {"type": "input_audio", "input_audio": {"data": WAV_BASE64, "format": "wav"}},
    {"type": "file", "file": {"filename": "report.pdf", "file_data": "data:application/pdf;base64,JVBERi0x"}},
    {"type": "hologram", "payload": {"x": 1}},
]
IMAGE_PLACEHOLDER = "[image: image/png, 12 KB]"


def call(cid: str, name: str, **arguments) -> dict:
    return {"id": cid, "type": "function", "function": {"name": name, "arguments": json.dumps(arguments)}}


def image_session() -> list[dict]:
    """A user message with an image, agent steps (one tool returns an image), more turns."""
    messages: list[dict] = [
        {"role": "system", "content": "You are a careful coding agent."},
        {"role": "user", "content": USER_PARTS},
    ]
    for n in range(1, 7):
        tool = "screenshot" if n == 2 else "bash"
        messages.append({"role": "assistant", "content": f"Step {n}: checking the failing test output in detail.",
                         "tool_calls": [call(f"c{n}", tool, command=f"pytest -q tests/test_{n}.py")]})
        messages.append({"role": "tool", "tool_call_id": f"c{n}", "name": tool,
                         "content": TOOL_PARTS if n == 2 else
                         f"FAILED tests/test_{n}.py::test_case_{n} - AssertionError: {n} != {n + 1}\n" * 12})
    messages += [
        {"role": "assistant", "content": "The screenshot shows an assertion error in the parser test."},
        {"role": "user", "content": ODD_PARTS},
        {"role": "assistant", "content": "Noted the recording and the report."},
        {"role": "user", "content": "Thanks, that is all."},
        {"role": "assistant", "content": "Done."},
    ]
    return messages


def write_session(path: Path, messages: list[dict]) -> Path:
    path.write_text(json.dumps(messages), encoding="utf-8")
    return path


def exact(value) -> str:
    """Byte-level identity of JSON values (key order and every character)."""
    return json.dumps(value, ensure_ascii=False)


# --- parsing and the store ---------------------------------------------------------------------


def test_parts_survive_the_sqlite_store_round_trip(tmp_path):
    messages = parse_transcript(json.dumps(image_session()))
    db = tmp_path / "state.db"
    with Store(db) as store:
        info = store.create_session("parts")
        store.flush(info.id, messages)
    with Store(db) as store:  # a new connection: what a resume reads from the file
        loaded = store.load_active(info.id)
    assert [m.to_openai() for m in loaded] == image_session()
    assert [exact(m.to_openai()["content"]) for m in loaded] == [exact(m["content"]) for m in image_session()]
    # the searchable text holds the placeholder, never the base64
    with Store(db) as store:
        assert store.search("screenshot image")
        assert not store.search(PNG_BASE64[100:120])
        column = store.conn.execute("SELECT group_concat(content, ' ') FROM messages").fetchone()[0]
    assert PNG_BASE64[:64] not in column and IMAGE_PLACEHOLDER in column


# Any JSON a client may put in a part (no lone surrogates: SQLite text cannot hold them).
_text = st.text(alphabet=st.characters(blacklist_categories=("Cs",)), max_size=40)
_json = st.recursive(
    st.none() | st.booleans() | st.integers(-10**6, 10**6) | st.floats(allow_nan=False, allow_infinity=False) | _text,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(_text, inner, max_size=3),
    max_leaves=8,
)
_part = st.one_of(
    st.builds(lambda text: {"type": "text", "text": text}, _text),
    st.builds(lambda url, extra: {"type": "image_url", "image_url": {"url": url, **extra}},
              _text, st.dictionaries(_text.filter(lambda k: k != "url"), _json, max_size=2)),
    st.builds(lambda kind, body: {"type": kind or "x", **body},
              _text.filter(lambda kind: kind not in ("text", "refusal")), st.dictionaries(_text.filter(lambda k: k != "type"), _json, max_size=3)),
)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(contents=st.lists(st.lists(_part, max_size=4), min_size=1, max_size=4))
def test_any_parts_come_back_from_the_store_and_export_identical(contents):
    messages = [{"role": "user", "content": parts} for parts in contents]
    parsed = [Message.from_openai(m) for m in messages]
    with tempfile.TemporaryDirectory() as tmp, Store(Path(tmp) / "state.db") as store:
        info = store.create_session("property")
        store.flush(info.id, parsed)
        exported = json.loads(to_json(session_messages(store, info.id, include_archived=True)))
    assert [exact(m["content"]) for m in exported] == [exact(parts) for parts in contents]


def test_text_view_of_parts_is_text_and_placeholders():
    user, odd = (Message.from_openai({"role": "user", "content": parts}) for parts in (USER_PARTS, ODD_PARTS))
    assert user.content == f"What is wrong in this screenshot of the test run?\n{IMAGE_PLACEHOLDER}"
    assert odd.content == ("Here are the recording and the report.\n[audio: wav, 2 KB]\n"
                           "[file: report.pdf, 6 B]\n[hologram]")
    remote = Message.from_openai({"role": "user", "content": [
        {"type": "image_url", "image_url": {"url": "https://example.com/cat.png?sig=s3cr3t"}}]})
    assert remote.content == "[image]"  # a URL can carry a signature: not in the text


@pytest.mark.parametrize("content, problem", [
    ([{"type": "text", "text": "ok"}, 7], "content[1]: a part must be an object with a type"),
    ([{"text": "no type"}], "content[0]: a part must be an object with a type"),
    ([{"type": "text", "text": None}], "content[0]: a text part needs a text string"),
])
def test_a_malformed_part_is_one_line_naming_it(content, problem):
    with pytest.raises(TranscriptError) as info:
        parse_transcript(json.dumps([{"role": "user", "content": content}]), source="t.json")
    assert str(info.value) == f"t.json: message 0: {problem}"


# --- tokens --------------------------------------------------------------------------------


def test_an_image_counts_a_fixed_estimate_never_its_base64():
    counter = EstimateCounter()
    text = USER_PARTS[0]["text"]
    small, big = ({"role": "user", "content": [USER_PARTS[0], {"type": "image_url", "image_url": {"url": url}}]}
                  for url in ("data:image/png;base64,iVBORw0KGgo=", PNG_URL * 40))
    expected = MESSAGE_OVERHEAD + counter.count_text(text) + 765  # detail high / auto: 765 tokens
    assert count_message(counter, Message.from_openai(small)) == expected
    assert count_message(counter, Message.from_openai(big)) == expected  # 480 KB of base64, same count
    low = {"role": "user", "content": [USER_PARTS[0], {"type": "image_url", "image_url": {"url": PNG_URL, "detail": "low"}}]}
    assert count_message(counter, Message.from_openai(low)) == MESSAGE_OVERHEAD + counter.count_text(text) + 85


# --- the wire -----------------------------------------------------------------------------------


def test_merged_user_messages_keep_their_parts():
    first = Message.from_openai({"role": "user", "content": "Before the picture."})
    second = Message.from_openai({"role": "user", "content": USER_PARTS})
    (merged,) = wire_view([first, second])
    assert exact(merged["content"]) == exact([{"type": "text", "text": "Before the picture."}, *USER_PARTS])
    assert exact(wire_view([second, first])[0]["content"]) == exact([*USER_PARTS, {"type": "text", "text": "Before the picture."}])
    assert wire_view([first, first])[0]["content"] == "Before the picture.\n\nBefore the picture."


def test_an_openai_endpoint_receives_the_parts_unchanged(tmp_path, hermes_home):
    endpoint = FakeEndpoint()
    endpoint.reply = sse_reply(chunk(), chunk("It fails."), chunk(finish_reason="stop"), usage_chunk(900, 3), "[DONE]")
    try:
        config = Config().with_overrides({
            "model.provider": "openai-api", "model.base_url": endpoint.base_url, "model.model": "vision",
            "auxiliary.compression.provider": "extractive",
        })
        with Store(tmp_path / "state.db") as store:
            session = open_session(config, store, title="vision")
            session.conv.extend(parse_transcript(json.dumps(image_session()[:2])))
            session.reply()
    finally:
        endpoint.close()
    (request,) = endpoint.requests
    sent = request["body"]["messages"]
    assert exact(sent[1]["content"]) == exact(USER_PARTS)


def test_in_process_mlx_sees_a_placeholder_text(tiny_model, hf_offline_env):
    from hermes_tui.chat.client import ChatDone
    from hermes_tui.providers.mlx.chat import MlxChatClient
    from hermes_tui.providers.mlx.runtime import MlxRuntime

    runtime = MlxRuntime()
    client = MlxChatClient(str(tiny_model.fp32), runtime=runtime)
    messages = wire_view(parse_transcript(json.dumps(image_session()[:2])))
    done = list(client.stream(messages, max_tokens=2))[-1]
    assert isinstance(done, ChatDone)
    as_text = [messages[0], {"role": "user", "content": (
        "What is wrong in this screenshot of the test run?\n"
        "[image: image/png, 12 KB; not shown: this model reads text only]")}]
    loaded = runtime.load(str(tiny_model.fp32))
    assert done.usage.prompt_tokens == len(runtime.prompt_tokens(loaded, as_text))


# --- compaction -------------------------------------------------------------------------------


def test_the_summarizer_sees_text_and_placeholders_never_base64():
    messages = parse_transcript(json.dumps(image_session()))
    seen: list[str] = []

    def script(request) -> str:
        seen.append(render_messages(request.messages))
        return "- checked the tests"

    compactor, conv = make_compactor(ScriptedSummarizer(script))
    conv.extend(messages)
    outcomes = [compactor.micro_pass(conv).outcome for _ in range(4)]
    assert outcomes.count("absorbed") >= 2, outcomes
    assert not any(m.tool_call_id == "c2" for m in conv.messages)  # the screenshot exchange went
    prompts = "\n".join(seen)
    assert "TOOL RESULT (screenshot):\nScreenshot of the browser window" in prompts
    assert IMAGE_PLACEHOLDER in prompts
    assert "base64" not in prompts and PNG_BASE64[:32] not in prompts
    assert "sk-proj-4f9a8b7c6d5e4f3a2b1c0d9e8f7a6b5c" not in prompts  # text parts are redacted like any text
    user = next(m for m in conv.messages if m.role == "user")
    assert exact(user.to_openai()["content"]) == exact(USER_PARTS)


COMPACT = ("--provider", "extractive", "--context-limit", "4096")


def stored_session_id(stderr: str) -> str:
    return re.search(r"stored as session (\w+)", stderr).group(1)


def test_compact_and_export_keep_every_part(tmp_path):
    home = tmp_path / "home"
    home.mkdir()
    session = image_session()
    path = write_session(tmp_path / "vision.json", session)

    proc = run_cli(home, "compact", str(path), *COMPACT)
    assert proc.returncode == 0, explain(proc)
    out = json.loads(proc.stdout)
    users = [m for m in out if m["role"] == "user"]
    assert [exact(m["content"]) for m in users] == [exact(USER_PARTS), exact(ODD_PARTS), exact("Thanks, that is all.")]
    marker = next(m for m in out if (m.get("meta") or {}).get("compaction") == "micro")
    assert not any(m.get("tool_call_id") == "c2" for m in out)  # the image exchange was absorbed ...
    assert PNG_BASE64[:32] not in marker["content"]  # ... and its image is not in the summary

    session_id = stored_session_id(proc.stderr)
    proc = run_cli(home, "sessions", "export", session_id, "--format", "json", "--all")
    assert proc.returncode == 0, explain(proc)
    exported = [m for m in json.loads(proc.stdout) if not (m.get("meta") or {}).get("compaction")]
    # every original, archived or not, is exported exactly as it came in
    assert [exact(m["content"]) for m in exported] == [exact(m["content"]) for m in session]

    proc = run_cli(home, "sessions", "export", session_id, "--format", "md", "--all")
    assert proc.returncode == 0, explain(proc)
    lines = proc.stdout.splitlines()
    assert IMAGE_PLACEHOLDER in lines
    assert {"[audio: wav, 2 KB]", "[file: report.pdf, 6 B]", "[hologram]"} <= set(lines)
    assert "base64" not in proc.stdout


def test_a_malformed_part_fails_compact_with_one_line(tmp_path):
    home = tmp_path / "home"
    home.mkdir()
    path = write_session(tmp_path / "bad.json", [{"role": "user", "content": [{"type": "text", "text": "hi"}, 3]}])
    proc = run_cli(home, "compact", str(path), *COMPACT)
    assert proc.returncode == 2, explain(proc)
    assert proc.stderr.strip().splitlines() == [f"hermes-tui: {path}: message 0: content[1]: a part must be an object with a type"]


# --- the UI ---------------------------------------------------------------------------------


@app_test
async def test_open_shows_a_placeholder_row_for_each_image(tiny_model, hf_offline_env, hermes_home, tmp_path):
    path = write_session(tmp_path / "vision.json", image_session())
    with Store(tmp_path / "state.db") as store:
        app = app_for(make_config(tiny_model), store, import_path=path)
        async with app.run_test(size=SIZE) as pilot:
            await settle(pilot, app.screen)
            rows = [str(w.content) for w in app.screen.query(".part-placeholder")]
            texts = [str(w.content) for w in app.screen.query("UserMessage Static")]
    assert rows[:1] == ["🖼 image (image/png, 12 KB)"]
    assert rows[1:] == ["🔊 audio (wav, 2 KB)", "📎 file (report.pdf, 6 B)", "◻ hologram"]
    assert "What is wrong in this screenshot of the test run?" in texts
    assert not any("base64" in text for text in texts)
