"""Fidelity probes (hermes_tui/analysis/evaluate.py) and ``hermes-tui eval``."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from helpers import ScriptedSummarizer, make_compactor, user, words

from hermes_tui.analysis.evaluate import (
    DECISION,
    OPEN_QUESTION,
    FactTracker,
    Probe,
    changed_files,
    evaluate,
    make_probes,
    plant,
    run_probes,
)
from hermes_tui.chat.client import ChatDone, ChatError, Usage
from hermes_tui.core.transcript import Message

REPO = Path(__file__).resolve().parents[2]
DEMO_SESSION = REPO / "hermes_tui" / "assets" / "demo_session.json"


def step(n: int, text: str, command: str, result: str, name: str = "bash", key: str = "command") -> list[Message]:
    call = {"id": f"c{n}", "type": "function", "function": {"name": name, "arguments": json.dumps({key: command})}}
    return [Message(role="assistant", content=text, tool_calls=[call]),
            Message(role="tool", content=result, tool_call_id=f"c{n}", name=name)]


def transcript(n: int = 30) -> list[Message]:
    messages = [Message(role="system", content="You are a coding agent."), user("Fix the media merge warning.")]
    for i in range(n):
        messages += step(i, f"Checking `Media.merge_{i}` in django/forms/widgets_{i}.py.", f"cat django/forms/widgets_{i}.py",
                         f"{words(150, 'src')}\nValueError: bad merge order {i}")
    messages.append(Message(role="assistant", content="Done."))
    return messages


def compactor_for(script, *, guard: bool, mode: str = "append"):
    compactor, conv = make_compactor(ScriptedSummarizer(script), limit=200_000, target_ratio=0.02, mode=mode,
                                     fact_guard=guard)
    return compactor, conv


def gist(request):
    """A model that keeps no exact string: a new line of gist for each step (a line the summary
    already holds would read as "nothing new" for a step full of facts)."""
    gist.calls = getattr(gist, "calls", 0) + 1
    if request.kind != "append":
        return "- Looked at the media code, again."
    return f"- Looked at the media code, pass {gist.calls}."


def test_retention_with_and_without_the_guard():
    results = {}
    for guard in (False, True):
        compactor, conv = compactor_for(gist, guard=guard)
        result, tracker = evaluate(transcript(), compactor, conv, transcript="t", plant_every=0)
        results[guard] = result
    off, on = results[False], results[True]
    assert off.final.passes == on.final.passes >= 10
    assert [c.passes for c in on.checkpoints] == [10]
    assert off.final.kinds["path"]["total"] == on.final.kinds["path"]["total"] > 10
    assert off.final.kinds["all"]["present"] == 0           # a model that keeps no exact string
    assert on.checkpoints[0].kinds["all"]["present"] == on.checkpoints[0].kinds["all"]["total"]  # all guarded so far
    assert 0 < on.final.kinds["all"]["present"] < on.final.kinds["all"]["total"]                # the budget prunes
    assert on.final.early["path"]["total"] == 10
    assert on.mean_over_passes()["found"] > off.mean_over_passes()["found"] == 0


def test_planted_decisions_and_questions_are_matched_on_their_words():
    messages, planted = plant(transcript(), every=3, seed=1)
    assert [p.kind for p in planted[:2]] == [DECISION, OPEN_QUESTION]
    first = next(m for m in messages if m.id == planted[0].message_id)
    assert first.content.endswith(planted[0].text) and first.token_count is None

    def keeps_planted(request):
        lines = [line for m in request.messages for line in m.content.splitlines() if line.startswith("Decision")]
        # A paraphrase: different order and glue words, same content words.
        return "\n".join(f"- decided ({line.lower().replace('rather than', 'not')})" for line in lines) or "- step."

    compactor, conv = compactor_for(keeps_planted, guard=False)
    result, _ = evaluate(transcript(), compactor, conv, plant_every=3, seed=1)
    kinds = result.final.kinds
    assert kinds[DECISION]["total"] > 2 and kinds[DECISION]["present"] == kinds[DECISION]["total"]
    assert kinds[OPEN_QUESTION]["total"] > 2 and kinds[OPEN_QUESTION]["present"] == 0


def test_changed_files():
    messages = [
        *step(1, "", "/repo/lib/a.ex", "ok", name="Edit", key="file_path"),
        *step(2, "", "sed -i 's/a/b/' django/forms/widgets.py", ""),
        *step(3, "", "cat <<'EOF' > reproduce_issue.py\nimport os\nEOF", ""),
        *step(4, "", "cat django/forms/widgets.py", ""),
    ]
    assert changed_files(messages) == ["/repo/lib/a.ex", "django/forms/widgets.py", "reproduce_issue.py"]


class CannedChat:
    model_name = "canned"

    def __init__(self, answer: str | None = None):
        self.answer = answer
        self.seen: list[list[dict]] = []

    def complete(self, messages, *, max_tokens, stop=None, cancel=None):
        self.seen.append(messages)
        if self.answer is None:
            raise ChatError("refused", "nothing listening")
        return ChatDone(self.answer, Usage(10, 5))


def test_probes_are_asked_on_the_compacted_transcript_and_scored():
    messages = transcript(20)
    messages[4] = Message(role="assistant", content="Editing.", tool_calls=[
        {"id": "e1", "type": "function", "function": {"name": "Edit", "arguments": json.dumps(
            {"file_path": "django/forms/widgets_1.py", "old_string": "a", "new_string": "b"})}}])
    messages[5] = Message(role="tool", content="ValueError: bad merge order 1", tool_call_id="e1", name="Edit")
    compactor, conv = compactor_for(gist, guard=True)
    result, tracker = evaluate(messages, compactor, conv, plant_every=2)
    probes = make_probes(tracker)
    assert [p.name for p in probes] == ["recall", "files_changed", "next_step", "why"]
    assert probes[1].expected == ["django/forms/widgets_1.py"]
    chat = CannedChat("It edited django/forms/widgets_1.py after ValueError: bad merge order 0.")
    scored = run_probes(chat, conv.messages, probes)
    assert chat.seen[0][-1]["role"] == "user" and len(chat.seen[0]) < len(messages)  # the compacted view
    by_name = {r.probe.name: r for r in scored}
    assert by_name["files_changed"].score == 1.0
    assert by_name["recall"].hits == 1
    assert by_name["why"].score == 0.0
    failed = run_probes(CannedChat(None), conv.messages, probes[:1])
    assert failed[0].error.startswith("refused") and failed[0].score is None


def test_probe_scoring_by_words():
    probe = Probe("why", "q", ["the vendored client already retries idempotent calls"], by_words=True)
    assert probe.score("Because the vendored HTTP client retries calls that are idempotent.") == (1, 1.0)
    assert probe.score("No idea.") == (0, 0.0)


def test_the_tracker_ignores_passes_that_absorbed_nothing():
    tracker = FactTracker()
    assert tracker.published([]) == 0 and tracker.passes == 0
    assert tracker.measure("", 0).kinds["all"] == {"present": 0, "total": 0}


# --- the command line ----------------------------------------------------------------------


def run_cli(home: Path, *args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "HERMES_TUI_HOME": str(home)}
    return subprocess.run([sys.executable, "-m", "hermes_tui.cli", *args], capture_output=True, text=True,
                          timeout=120, env=env, cwd=REPO)


def small_transcript(tmp_path: Path) -> Path:
    messages = json.loads(DEMO_SESSION.read_text(encoding="utf-8"))[:90]
    path = tmp_path / "session.json"
    path.write_text(json.dumps(messages))
    return path


def test_eval_cli_json(tmp_path):
    path = small_transcript(tmp_path)
    # A pass after every step: the checkpoints after 10, 50, 100 passes are what it reports.
    proc = run_cli(tmp_path, "eval", str(path), "--provider", "extractive", "--context-limit", "16384", "--json",
                   "--policy", "per_exchange")
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(proc.stdout)
    assert {"transcript", "summarizer", "mode", "fact_guard", "turns", "planted", "passes", "outcomes",
            "checkpoints", "final", "trajectory", "mean_over_passes", "probes"} <= set(doc)
    assert doc["summarizer"] == "extractive" and doc["mode"] == "append" and doc["fact_guard"] is True
    assert doc["passes"] >= 10 and doc["checkpoints"][0]["passes"] == 10
    kinds = doc["final"]["kinds"]
    assert set(kinds) == {"path", "identifier", "error", "url", "number", "decision", "open_question", "all"}
    assert set(kinds["all"]) == {"present", "total", "retention"} and kinds["all"]["total"] > 0
    assert doc["probes"] is None
    assert not (tmp_path / "state.db").exists()  # an evaluation stores nothing


def test_eval_cli_text_and_options(tmp_path):
    path = small_transcript(tmp_path)
    proc = run_cli(tmp_path, "eval", str(path), "--provider", "extractive", "--mode", "merge", "--no-fact-guard",
                   "--plant-every", "0", "--policy", "per_exchange")
    assert proc.returncode == 0, proc.stderr
    out = proc.stdout
    assert "mode merge, fact guard off" in out and "0 planted" in out
    assert "Retention of every fact absorbed so far" in out and "Early facts" in out
    header = next(line for line in out.splitlines() if line.strip().startswith("kind"))
    assert "after 10" in header and "final (" in header


def test_eval_cli_bad_input_is_one_line(tmp_path):
    proc = run_cli(tmp_path, "eval", str(tmp_path / "nope.json"), "--provider", "extractive")
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert proc.stderr.strip().count("\n") == 0 and "nope.json" in proc.stderr
    proc = run_cli(tmp_path, "eval", str(small_transcript(tmp_path)), "--provider", "extractive",
                   "--context-limit", "10")
    assert proc.returncode == 2 and "--context-limit" in proc.stderr


def test_eval_probe_asks_a_real_chat_model(tmp_path, tiny_model, hf_offline_env):
    """--probe through the real MLX chat path: the tiny model answers (noise: random weights),
    every probe is asked on the compacted transcript, and the answers are scored."""
    path = small_transcript(tmp_path)
    env = {**os.environ, **hf_offline_env, "HERMES_TUI_HOME": str(tmp_path)}
    proc = subprocess.run(
        [sys.executable, "-m", "hermes_tui.cli", "eval", str(path), "--provider", "extractive",
         "--context-limit", "4096", "--probe", "--chat-provider", "mlx", "--chat-model", str(tiny_model.fp32),
         "--probe-max-tokens", "8", "--json"],
        capture_output=True, text=True, timeout=900, env=env, cwd=REPO,
    )
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(proc.stdout)
    assert doc["probes"], "the demo session absorbs errors and changed files, so there are probes to ask"
    for probe in doc["probes"]:
        assert probe["error"] is None, probe
        assert probe["answer"], probe  # the model was asked and answered
        assert 0.0 <= probe["score"] <= 1.0 and probe["hits"] <= len(probe["expected"])


def test_planted_text_reaches_the_wire_of_a_message_with_parts():
    image = {"type": "image_url", "image_url": {"url": "data:image/png;base64,iVBORw0KGgo="}}
    messages = transcript(6)
    messages[2] = Message.from_openai({**messages[2].to_openai(), "content": [{"type": "text", "text": "Looking."}, image]})

    planted_messages, planted = plant(messages, every=1, seed=3)

    wire = planted_messages[2].to_openai()
    assert planted[0].message_id == messages[2].id
    assert wire["content"][:2] == [{"type": "text", "text": "Looking."}, image]
    assert wire["content"][2] == {"type": "text", "text": planted[0].text}
    assert planted_messages[2].tool_calls == messages[2].tool_calls
    assert planted_messages[2].content.endswith(planted[0].text)
