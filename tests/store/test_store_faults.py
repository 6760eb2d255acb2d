"""kill -9 at every stage of the pass lifecycle, then resume: nothing is lost, nothing is doubled.

``hermes-tui compact`` replays a transcript into the real store (one stored session, a
pass after every agent step or user turn). With ``HERMES_TUI_CRASH_AT=POINT:N`` the
process SIGKILLs itself the N-th time it reaches that crash point: inside a flush
transaction, during a summarizer call, inside a pass's transaction (after the archive
UPDATEs, before COMMIT), right after COMMIT, and between turns. The moments are picked
from an uninterrupted run of the same command, which records every crash point it
passes with the kind of pass it was in (micro absorb, defrag, batch), so kills land
early, in the middle and late, and inside defrags and batch compactions. Three runs:
an agent session with a pass per step (absorbs and defrags), one with a pass per user
turn, and the agent session with micro-compaction off (a batch every few steps); and
three cases are killed again while resuming.

After each kill the database must pass ``PRAGMA integrity_check``; the active transcript
must keep every user message verbatim and in order, keep tool calls paired and hold at
most one marker; and the active and archived rows together must hold a prefix of the
input, each message exactly once, in order. ``compact --resume ID`` must then finish
the replay (exit 0) to a state with the whole input stored once and a transcript as
small as an uninterrupted run leaves it.
"""

from __future__ import annotations

import json
import os
import random
import re
import signal
import sqlite3
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from helpers import assert_tools_paired

from hermes_tui.compaction.trim import META_KEY as TRIM_META
from hermes_tui.compaction.trim import is_trimmed
from hermes_tui.core.transcript import Message, parse_transcript
from hermes_tui.store import Store

pytestmark = pytest.mark.integration

CLI = [sys.executable, "-m", "hermes_tui.cli"]
RUN_TIMEOUT_S = 120
WORKERS = 2
POINTS = (
    "flush.before_commit", "summarizer.call", "compact.after_archive",
    "compact.before_commit", "compact.after_commit", "turn.end",
)

# Runs the CLI in-process with every crash point replaced by a recorder: which point,
# in which kind of pass (found on the stack), in order. Only used to choose kill moments.
RECORDER = r'''
import json, sys
events = []
def crash_point(name):
    frame, label = sys._getframe(1), ""
    while frame is not None:
        code = frame.f_code.co_name
        if code == "publish" and "result" in frame.f_locals:
            r = frame.f_locals["result"]
            label = f"{r.kind}:{r.outcome}"
            break
        if code in ("plan_batch", "_defrag", "_absorb"):
            label = {"plan_batch": "batch:plan", "_defrag": "micro:defrag", "_absorb": "micro:absorbed"}[code]
            break
        frame = frame.f_back
    events.append([name, label])
import hermes_tui.store.store, hermes_tui.compaction.summary_request, hermes_tui.analysis.replay
for module in (hermes_tui.store.store, hermes_tui.compaction.summary_request, hermes_tui.analysis.replay):
    module.crash_point = crash_point
from hermes_tui.cli import main
code = main(sys.argv[2:])
with open(sys.argv[1], "w") as out:
    json.dump(events, out)
sys.exit(code)
'''


# --- transcripts ---------------------------------------------------------------------------


def agent_transcript(seed: int, steps: int, users_every: int, big_every: int) -> list[dict[str, Any]]:
    """An agent session: few user messages, many tool steps, a couple of huge tool outputs."""
    rnd = random.Random(seed)
    messages: list[dict[str, Any]] = [
        {"role": "system", "content": "You are a careful coding agent working in /srv/app."},
        {"role": "user", "content": "The test suite fails in app/; find out why and fix it."},
    ]
    call_id = 0
    for n in range(steps):
        if n and n % users_every == 0:
            request = f"Request {n}: keep going; no new helpers ({rnd.randint(0, 10**6)})."
            messages.append({"role": "user", "content": request})
        calls = []
        for j in range(1 + (n % 3 == 0)):
            call_id += 1
            tool = rnd.choice(["bash", "read_file", "edit_file"])
            calls.append({"id": f"call_{call_id}", "type": "function",
                          "function": {"name": tool, "arguments": json.dumps({"path": f"app/mod{n}_{j}.py"})}})
        messages.append({"role": "assistant", "content": f"Step {n}: checking app/mod{n}.py.", "tool_calls": calls})
        for call in calls:
            size = 1500 if big_every and n and n % big_every == 0 else rnd.randint(40, 160)
            body = "\n".join(f"line {i} of app/mod{n}.py: value_{rnd.randint(0, 999)} = compute({i})"
                             for i in range(size // 8))
            if n % 5 == 0:
                body += f"\nTraceback: AssertionError in test_mod{n}"
            messages.append({"role": "tool", "tool_call_id": call["id"], "name": call["function"]["name"],
                             "content": body})
    messages.append({"role": "assistant", "content": "All tests pass now."})
    return messages


@dataclass(frozen=True)
class Scenario:
    name: str
    turns: str
    config: str
    messages: list[dict[str, Any]]


# Defrags happen at a small rolling summary, so kills land inside defrags too.
MICRO = "compression:\n  micro_compact_defrag_threshold_tokens: 400\n  policy: per_exchange\n"
SCENARIOS = {
    # ~100 messages, one pass per agent step: absorbs and defrags.
    "step": Scenario("step", "step", MICRO, agent_transcript(seed=7, steps=40, users_every=8, big_every=15)),
    # ~75 messages, one pass per user turn (two exchanges a turn).
    "user": Scenario("user", "user", MICRO, agent_transcript(seed=3, steps=26, users_every=2, big_every=0)),
    # The same agent session with micro-compaction off: a batch compaction every few steps.
    "batch": Scenario("batch", "step", "compression:\n  micro_compact: false\n",
                      agent_transcript(seed=7, steps=40, users_every=8, big_every=15)),
}


# --- running the CLI -------------------------------------------------------------------------


@dataclass
class Run:
    returncode: int
    stdout: str
    stderr: str

    def explain(self) -> str:
        return f"exit {self.returncode}\n--- stderr ---\n{self.stderr[-2000:]}"


def new_home(root: Path, name: str, scenario: Scenario) -> Path:
    home = root / name
    home.mkdir(parents=True)
    (home / "config.yaml").write_text(scenario.config)
    return home


def compact(home: Path, scenario: Scenario, transcript: Path, *extra: str, crash: str | None = None,
            command: list[str] | None = None) -> Run:
    env = {k: v for k, v in os.environ.items() if k not in ("HERMES_TUI_CRASH_AT", "OPENAI_API_KEY")}
    env["HERMES_TUI_HOME"] = str(home)
    if crash:
        env["HERMES_TUI_CRASH_AT"] = crash
    args = ["compact", str(transcript), "--provider", "extractive", "--turns", scenario.turns,
            "--context-limit", "4096", *extra]
    proc = subprocess.run([*(command or CLI), *args], env=env, cwd=home, stdin=subprocess.DEVNULL,
                          capture_output=True, text=True, timeout=RUN_TIMEOUT_S)
    return Run(proc.returncode, proc.stdout, proc.stderr)


def occupancy(stderr: str) -> float:
    match = re.search(r"final occupancy ([\d.]+)% of threshold", stderr)
    assert match, stderr
    return float(match.group(1))


# --- what must hold after a kill, and at the end ----------------------------------------------


def key(msg: Message) -> tuple:
    return (msg.role, msg.content, msg.tool_call_id, json.dumps(msg.tool_calls, sort_keys=True))


def check_store(db: Path, inputs: list[Message], *, complete: bool) -> tuple[str, list[Message]]:
    """The store invariants; returns the session id and the active transcript."""
    conn = sqlite3.connect(db)
    try:
        assert conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    finally:
        conn.close()
    with Store(db) as store:
        sessions = store.list_sessions()
        assert len(sessions) == 1, sessions
        sid = sessions[0].id
        rows = store.load_all(sid)
        active = store.load_active(sid)
        archived_by = dict(store.conn.execute(
            "SELECT id, archived_by FROM messages WHERE session_id = ? AND state = 'archived'", (sid,)).fetchall())
        assert store.conn.execute("INSERT INTO messages_fts (messages_fts) VALUES ('integrity-check')") is not None

    # Active + archived: a prefix of the input, each message exactly once, in order.
    # (A trimmed tool result is a row of its own, standing in for its archived original.)
    stored = [m for m, _ in rows if not m.is_marker and not is_trimmed(m)]
    prefix = inputs[: len(stored)]
    assert [key(m) for m in stored] == [key(m) for m in prefix], "stored rows are not the input prefix"
    if complete:
        assert len(stored) == len(inputs), f"{len(stored)} of {len(inputs)} input messages stored"

    # Every archived row was archived by a marker that covers (or supersedes) it, and
    # every marker comes after what it covers.
    order = {m.id: n for n, (m, _) in enumerate(rows)}
    all_markers = {m.id: m for m, _ in rows if m.is_marker}
    trims = {m.id: m.meta[TRIM_META]["original"] for m, _ in rows if is_trimmed(m)}
    for mid, marker_id in archived_by.items():
        if marker_id in trims:  # an original, archived by its trimmed version
            assert trims[marker_id] == mid and order[marker_id] > order[mid], mid
            continue
        marker = all_markers.get(marker_id)
        assert marker is not None, f"row {mid} archived by a missing marker {marker_id}"
        assert mid in marker.meta["covers"] or mid == marker.meta.get("supersedes"), mid
    for marker in all_markers.values():
        for covered in marker.meta["covers"]:
            assert order[covered] < order[marker.id], "a marker sorts before a message it covers"

    # The active transcript: users verbatim and in order, but for the oldest ones the floor
    # policy folded (archived, each once: the rows above hold every input once), tools
    # paired, at most one marker.
    states = [state for m, state in rows if m.role == "user"]  # the input's users, in order (checked above)
    folded = [n for n, state in enumerate(states) if state == "archived"]
    assert folded == list(range(folded[0], folded[0] + len(folded))) if folded else True, "folded users not the oldest"
    assert not states or states[-1] != "archived", "the last user message was folded"
    users = [m.content for m in prefix if m.role == "user"]
    active_users = [m.content for m in active if m.role == "user"]
    assert active_users == [text for n, text in enumerate(users) if n not in folded]
    assert_tools_paired(active)
    assert sum(m.is_marker for m in active) <= 1, [m.marker_kind for m in active if m.is_marker]
    assert {m.id for m, state in rows if state == "active"} == {m.id for m in active}
    return sid, active


# --- choosing the kill moments ------------------------------------------------------------------


@pytest.fixture(scope="module")
def baselines(tmp_path_factory) -> dict[str, dict[str, Any]]:
    """An uninterrupted run per scenario: its crash-point trace, final occupancy and transcript."""
    root = tmp_path_factory.mktemp("fault_baselines")

    def run(scenario: Scenario) -> dict[str, Any]:
        transcript = root / f"{scenario.name}.json"
        transcript.write_text(json.dumps(scenario.messages))
        home = new_home(root, scenario.name, scenario)
        trace = root / f"{scenario.name}.trace.json"
        result = compact(home, scenario, transcript, command=[sys.executable, "-c", RECORDER, str(trace)])
        assert result.returncode == 0, result.explain()
        inputs = parse_transcript(transcript.read_text())
        _, active = check_store(home / "state.db", inputs, complete=True)
        return {"trace": json.loads(trace.read_text()), "occupancy": occupancy(result.stderr),
                "active": len(active), "transcript": transcript, "inputs": inputs, "stderr": result.stderr}

    with ThreadPoolExecutor(WORKERS) as pool:
        return dict(zip(SCENARIOS, pool.map(run, SCENARIOS.values())))


def hits(trace: list[list[str]], point: str, label: str | None = None) -> list[int]:
    """The N (1-based) at which ``point`` is reached [with that label]."""
    out, n = [], 0
    for name, where in trace:
        if name == point:
            n += 1
            if label is None or where.startswith(label):
                out.append(n)
    return out


def kill_moments(trace: list[list[str]], scenario: str) -> list[tuple[str, int]]:
    """(point, N) pairs: early, middle and late for every point, plus inside defrags and batches."""
    chosen: list[tuple[str, int]] = []

    def pick(point: str, label: str | None, *where: float) -> None:
        found = hits(trace, point, label)
        assert found, f"{scenario}: the run never reaches {point} [{label}]"
        for fraction in where:
            pair = (point, found[min(len(found) - 1, int(fraction * len(found)))])
            if pair not in chosen:
                chosen.append(pair)

    if scenario == "step":
        pick("flush.before_commit", None, 0.0, 0.5, 0.95)
        pick("turn.end", None, 0.1, 0.6, 0.99)
        pick("summarizer.call", "micro:absorbed", 0.0, 0.5, 0.99)
        pick("summarizer.call", "micro:defrag", 0.5)
        pick("compact.after_archive", "micro:absorbed", 0.0, 0.7)
        pick("compact.after_archive", "micro:defrag", 0.3)
        pick("compact.before_commit", "micro:absorbed", 0.3, 0.99)
        pick("compact.before_commit", "micro:defrag", 0.8)
        pick("compact.after_commit", "micro:absorbed", 0.0, 0.5)
        pick("compact.after_commit", "micro:defrag", 0.0)
    elif scenario == "batch":
        pick("summarizer.call", "batch", 0.0, 0.99)
        pick("compact.after_archive", "batch", 0.5)
        pick("compact.before_commit", "batch", 0.0, 0.7)
        pick("compact.after_commit", "batch", 0.3)
    else:
        pick("flush.before_commit", None, 0.5)
        pick("summarizer.call", "micro", 0.7)
        pick("compact.after_archive", "micro", 0.2)
        pick("compact.before_commit", "micro", 0.5)
        pick("compact.after_commit", "micro", 0.9)
    return chosen


# --- the test --------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Case:
    scenario: str
    kills: tuple[tuple[str, int], ...]  # the first on a fresh run, the others on resumes

    @property
    def name(self) -> str:
        return f"{self.scenario}:" + "+".join(f"{p}:{n}" for p, n in self.kills)


def run_case(case: Case, root: Path, baseline: dict[str, Any]) -> str | None:
    """Kill, check, resume (maybe killed again), check; returns a failure description or None."""
    scenario = SCENARIOS[case.scenario]
    home = new_home(root, re.sub(r"[^\w.]+", "_", case.name), scenario)
    db = home / "state.db"
    inputs, transcript = baseline["inputs"], baseline["transcript"]
    sid = None
    try:
        for n, (point, count) in enumerate(case.kills):
            extra = ("--resume", sid) if sid else ("--session", "fault run")
            result = compact(home, scenario, transcript, *extra, crash=f"{point}:{count}")
            assert result.returncode == -signal.SIGKILL, (
                f"kill {n + 1} ({point}:{count}) did not happen: " + result.explain())
            assert "Traceback" not in result.stderr, result.explain()
            sid, _ = check_store(db, inputs, complete=False)

        result = compact(home, scenario, transcript, "--resume", sid)
        assert result.returncode == 0, "resume failed: " + result.explain()
        assert f"stored as session {sid}" in result.stderr
        final_sid, active = check_store(db, inputs, complete=True)
        assert final_sid == sid
        # What the resumed process printed is what it stored.
        printed = [Message.from_openai(m) for m in json.loads(result.stdout)]
        assert [key(m) for m in printed] == [key(m) for m in active]
        # And it is compact: as small as an uninterrupted run leaves it, give or take a pass.
        assert occupancy(result.stderr) <= baseline["occupancy"] * 1.25 + 5, (
            f"final occupancy {occupancy(result.stderr)}% vs {baseline['occupancy']}% uninterrupted")
        assert len(active) <= baseline["active"] + 4, (len(active), baseline["active"])
    except AssertionError as exc:
        return f"{case.name}: {exc}"
    return None


def test_the_baseline_runs_reach_every_crash_point_in_every_kind_of_pass(baselines):
    expected = {"step": {"micro:absorbed", "micro:defrag"}, "user": {"micro:absorbed"},
                "batch": {"batch:plan", "batch:compressed"}}
    for name, baseline in baselines.items():
        trace = baseline["trace"]
        for point in POINTS:
            assert hits(trace, point), f"{name}: {point} never reached"
        labels = {where for _, where in trace}
        assert expected[name] <= labels, (name, labels)


def test_kill_9_anywhere_then_resume_loses_and_doubles_nothing(baselines, tmp_path):
    cases = [Case(name, (pair,)) for name in SCENARIOS for pair in kill_moments(baselines[name]["trace"], name)]
    step = baselines["step"]["trace"]
    # Killed again while resuming (inside the resumed process's first passes), then resumed.
    cases.append(Case("step", (("compact.before_commit", hits(step, "compact.before_commit")[10]),
                               ("compact.after_archive", 1))))
    cases.append(Case("step", (("flush.before_commit", 12), ("summarizer.call", 2), ("turn.end", 3))))
    cases.append(Case("batch", (("compact.after_archive", 2), ("compact.before_commit", 2))))
    assert len({c.name for c in cases}) == len(cases) >= 24
    assert {p for c in cases for p, _ in c.kills} == set(POINTS)

    with ThreadPoolExecutor(WORKERS) as pool:
        failures = [f for f in pool.map(lambda c: run_case(c, tmp_path, baselines[c.scenario]), cases) if f]
    assert not failures, f"{len(failures)} of {len(cases)} kill cases failed:\n" + "\n".join(failures)
