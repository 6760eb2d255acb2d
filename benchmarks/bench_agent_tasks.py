"""Real tasks for the agent, run headless against any OpenAI-compatible server, judged by checks.

Each task runs ``hermes-tui run --approve full`` (the command users run) in a fresh copy of a
small Python project (``agent_task_project.py``: tests, one failing; a file that opens with a
bracket; a long log), with a temp home (config, store, logs), and is judged by a check of the
workspace or of the answer. A recording proxy between the app and the server keeps every
request, so the figures are what was really sent and answered.

Per task it prints: success, model calls, tool calls by form (native, or recovered from text
and in which form), the failure's cause, and the time. A failure is the model's (wrong answer,
wrong edit, out of steps) or the app's: ``crash`` (a traceback or an unexpected exit),
``unparsed call`` (the final answer is a call to an offered tool the app did not run, with at
most a line or two around it; a call with more around it, an explanation or other JSON, is
the model's ``explained``, and one whose arguments its tool's schema refuses the model's ``invalid call``:
the app never runs those; a reply that ran on to its token cap is the model's ``cut off``),
``overflow`` (nothing sent: too large, or the server refused the size), ``timeout``.

``--one-session``: the tasks run one after another in one session (``--resume``) and one
workspace, at ``--context-limit`` (16,384 by default); with ``--rounds N`` the task list runs N
times over in that session, the workspace put back to the project's commit between rounds, so
the session grows past the compaction threshold and compaction fires (one round of the 13
tasks stays under it). It also reports the largest request the server counted against the
window, the markers compaction wrote and the messages it archived, each round's successes,
and whether the first task's prompt is still word for word in the last request.

Without ``--base-url`` a llama-server is started on ``--model`` with
``../shared/realmodels/serve`` (and stopped at the end). Examples::

    uv run python benchmarks/bench_agent_tasks.py --model qwen2.5-coder-1.5b-instruct-q4_k_m
    uv run python benchmarks/bench_agent_tasks.py --model qwen2.5-coder-0.5b-instruct-q4_k_m --out r.json
    uv run python benchmarks/bench_agent_tasks.py --one-session --context-limit 16384 --rounds 4
"""

from __future__ import annotations

import argparse
import configparser
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import yaml

# The project and the proxy are the benchmark's own helpers, beside it (benchmarks/ is not a package).
sys.path.insert(0, str(Path(__file__).resolve().parent))
import agent_task_project as project
from recording_proxy import RecordingProxy

from hermes_tui.chat.text_tool_calls import MAX_PROSE_CHARS, MAX_PROSE_LINES

ROOT = Path(__file__).resolve().parents[1]
SERVE = ROOT.parent / "shared" / "realmodels" / "serve"
DEFAULT_MODEL = "qwen2.5-coder-1.5b-instruct-q4_k_m"
TASK_TIMEOUT_S = 900.0

# What a call written as text looks like (for "unparsed call": a final answer that is a call).
TEXT_CALL = re.compile(r'<tool_call>|<function=|"name"\s*:\s*"(?P<name>[A-Za-z_][\w.-]*)"[^{}]*"arguments"\s*:')

Check = Callable[[Path, str], tuple[bool, str]]


@dataclass(frozen=True)
class Task:
    name: str
    prompt: str
    check: Check


# --- the checks ------------------------------------------------------------------------------


def _answer_has(*needles: str, any_of: bool = False) -> Check:
    def check(workspace: Path, answer: str) -> tuple[bool, str]:
        found = [n for n in needles if n.lower() in answer.lower()]
        ok = bool(found) if any_of else len(found) == len(needles)
        return ok, "" if ok else f"the answer lacks {[n for n in needles if n not in found]}"
    return check


def _answer_has_number(number: int) -> Check:
    def check(workspace: Path, answer: str) -> tuple[bool, str]:
        ok = re.search(rf"(?<![\d.]){number}(?![\d])", answer) is not None
        return ok, "" if ok else f"the answer does not say {number}"
    return check


def _tests_pass(workspace: Path) -> tuple[bool, str]:
    proc = project.run_tests(workspace, sys.executable)
    return proc.returncode == 0, "" if proc.returncode == 0 else "the tests fail: " + proc.stderr.strip()[-300:]


def _tests_unchanged(workspace: Path, names: tuple[str, ...] = ("tests/test_cart.py",)) -> bool:
    return all((workspace / n).read_text(encoding="utf-8") == project.FILES[n] for n in names)


def check_fix(workspace: Path, answer: str) -> tuple[bool, str]:
    ok, why = _tests_pass(workspace)
    if ok and "self.assertEqual(apply_discount(200.0, 10), 180.0)" not in (
            workspace / "tests/test_pricing.py").read_text(encoding="utf-8"):
        return False, "the failing test was changed instead of the code"
    return ok, why


def _call(workspace: Path, code: str) -> tuple[bool, str]:
    proc = subprocess.run([sys.executable, "-c", code], cwd=workspace, capture_output=True, text=True, timeout=60)
    return proc.returncode == 0, proc.stderr.strip()[-300:]


def check_clamp(workspace: Path, answer: str) -> tuple[bool, str]:
    ok, why = _call(workspace, "from shopkit.pricing import clamp\n"
                               "assert clamp(5, 0, 10) == 5 and clamp(-1, 0, 10) == 0 and clamp(11, 0, 10) == 10")
    if not ok:
        return False, f"clamp is missing or wrong: {why}"
    if "clamp" not in (workspace / "tests/test_pricing.py").read_text(encoding="utf-8"):
        return False, "no test of clamp in tests/test_pricing.py"
    return _tests_pass(workspace) if _tests_unchanged(workspace) else (False, "tests/test_cart.py changed")


def check_rename(workspace: Path, answer: str) -> tuple[bool, str]:
    old = re.compile(r"(?<![\w])subtotal(?![\w])")
    left = [str(p.relative_to(workspace)) for p in workspace.rglob("*.py")
            if ".git" not in p.parts and old.search(p.read_text(encoding="utf-8"))]
    if left:
        return False, f"subtotal is still used in {left}"
    ok, why = _call(workspace, "from shopkit.pricing import items_subtotal\nassert items_subtotal([(2.0, 3)]) == 6.0")
    if not ok:
        return False, f"items_subtotal does not work: {why}"
    proc = project.run_tests(workspace, sys.executable)
    # The discount test may still fail (the bug is another task's): no other test may.
    failed = re.findall(r"^(?:FAIL|ERROR): (\w+)", proc.stderr, flags=re.M)
    extra = [name for name in failed if name != "test_apply_discount"]
    return not extra, "" if not extra else f"tests fail after the rename: {extra}"


def check_config(workspace: Path, answer: str) -> tuple[bool, str]:
    parser = configparser.ConfigParser()
    try:
        parser.read(workspace / "config/app.ini", encoding="utf-8")
        shop = dict(parser["shop"])
    except (configparser.Error, KeyError) as exc:
        return False, f"config/app.ini does not parse: {exc}"
    expected = {"currency": "EUR", "max_items": "75", "allow_backorder": "false"}
    ok = shop == expected and parser.get("report", "delimiter", fallback=None) == ";"
    return ok, "" if ok else f"[shop] is {shop}"


def check_changelog(workspace: Path, answer: str) -> tuple[bool, str]:
    path = workspace / "CHANGELOG.md"
    if not path.is_file():
        return False, "no CHANGELOG.md"
    first = path.read_text(encoding="utf-8").splitlines()[:1]
    return first == ["# Changelog"], f"its first line is {first}"


TASKS: list[Task] = [
    Task("find a definition", "Which file in this repository defines the class InventoryLedger? "
         "Answer with the file's path.", _answer_has(project.LEDGER_FILE)),
    Task("answer about code", "In shopkit/pricing.py, what is the default currency of format_price? "
         "Answer with the currency code.", _answer_has("EUR")),
    Task("read a bracket file", "How many entries does the ROWS list in shopkit/fixtures.py have? "
         "Answer with the number.", _answer_has_number(project.FIXTURE_ROWS)),
    Task("find uses", "Which Python files in shopkit/ import from shopkit.pricing? List their paths.",
         _answer_has("cart.py", "report.py")),
    Task("summarize a module", "Summarize in two sentences what shopkit/report.py does.",
         _answer_has("csv", "total")),
    Task("count in a long log", "How many lines of logs/server.log contain the word ERROR? Count them with a "
         "command, then answer with the number.", _answer_has_number(project.LOG_ERRORS)),
    Task("version", "What version does pyproject.toml declare for this project? Answer with the version.",
         _answer_has(project.VERSION)),
    Task("run the tests", "Run the tests with `python -m unittest discover -s tests` and tell me the name "
         "of the test that fails.", _answer_has("test_apply_discount")),
    Task("fix a bug", "The test test_apply_discount in tests/test_pricing.py fails: apply_discount in "
         "shopkit/pricing.py treats percent as a fraction. Fix that one line so the tests pass; do not "
         "change the tests.", check_fix),
    Task("add a function", "Add a function clamp(value, low, high) to shopkit/pricing.py that returns value "
         "limited to the range low..high, and add a test for it to tests/test_pricing.py.", check_clamp),
    Task("rename a symbol", "Rename the function subtotal to items_subtotal everywhere in this repository: "
         "its definition and every import and use.", check_rename),
    Task("edit a config value", "In config/app.ini, set max_items to 75. Change nothing else.", check_config),
    Task("create a file", "Create a file CHANGELOG.md whose first line is exactly: # Changelog",
         check_changelog),
]


# --- one task ----------------------------------------------------------------------------------


@dataclass
class TaskRun:
    task: str
    success: bool
    cause: str  # "" when it succeeded; else the model's: "wrong", "max steps"; the app's: see APP_CAUSES
    detail: str
    model_calls: int
    calls_by_form: dict[str, int]
    seconds: float
    exit_code: int | None
    answer: str = ""
    largest_prompt: int | None = None

    @property
    def app_failure(self) -> bool:
        return self.cause in APP_CAUSES


APP_CAUSES = ("crash", "unparsed call", "overflow", "timeout")


def write_config(home: Path, base_url: str, model: str, context_limit: int | None, max_steps: int,
                 compaction: str, settings: dict[str, Any] | None = None) -> None:
    aux = ({"provider": "extractive"} if compaction == "extractive"
           else {"provider": "openai-api", "base_url": base_url, "model": model})
    config: dict[str, dict[str, Any]] = {
        "model": {"provider": "openai-api", "base_url": base_url, "model": model,
                  **({"context_length": context_limit} if context_limit else {})},
        "agent": {"max_steps": max_steps},
        "auxiliary": {"compression": aux},
    }
    for key, value in (settings or {}).items():  # --set section.name=value
        section, name = key.split(".", 1)
        config.setdefault(section, {})[name] = value
    home.mkdir(parents=True, exist_ok=True)
    (home / "config.yaml").write_text(json.dumps(config, indent=2), encoding="utf-8")  # JSON is YAML


def session_messages(home: Path, session_id: str | None) -> tuple[str | None, list[Any]]:
    """The session's rows (every row, archived ones too: what a task did is not lost to compaction)."""
    from hermes_tui.store import Store

    with Store(home / "state.db") as store:
        sessions = store.list_sessions()
        if not sessions:
            return None, []
        info = store.get_session(session_id) if session_id else max(sessions, key=lambda s: s.created)
        return info.id, [msg for msg, _ in store.load_all(info.id)]


def compaction_counts(home: Path, session_id: str | None) -> tuple[int, int]:
    """The markers compaction wrote in the session (superseded ones too) and the messages it archived."""
    from hermes_tui.store import Store

    if session_id is None:
        return 0, 0
    with Store(home / "state.db") as store:
        rows = store.load_all(session_id)
    markers = sum(1 for msg, _ in rows if msg.is_marker)
    archived = sum(1 for msg, state in rows if state == "archived" and not msg.is_marker)
    return markers, archived


def reset_project(root: Path) -> None:
    """Put the workspace back to the project as committed: the next round's tasks find it as the first did."""
    subprocess.run(["git", "checkout", "--", "."], cwd=root, check=True, capture_output=True)
    subprocess.run(["git", "clean", "-fdq"], cwd=root, check=True, capture_output=True)


def _since_prompt(messages: list[Any], prompt: str) -> list[Any]:
    """The messages of the turn that began with ``prompt`` (the last such user message)."""
    starts = [i for i, m in enumerate(messages) if m.role == "user" and m.content == prompt]
    return messages[starts[-1]:] if starts else []


def calls_by_form(turn: list[Any]) -> tuple[int, dict[str, int]]:
    forms: Counter[str] = Counter()
    model_calls = 0
    for message in turn:
        if message.role != "assistant" or message.is_marker:
            continue
        model_calls += 1
        form = message.meta.get("recovered_calls") or "native"
        forms[str(form)] += len(message.tool_calls or [])
    return model_calls, dict(forms)


def _offered_tool_names() -> set[str]:
    from hermes_tui.tools.builtin import builtin_registry

    return {spec["function"]["name"] for spec in builtin_registry().specs()}


def _call_objects(answer: str) -> tuple[list[tuple[int, int]], list[tuple[int, int]]]:
    """The spans of the JSON objects in ``answer`` that, taken alone, are calls the app would
    run, and of those that call an offered tool with arguments its schema refuses."""
    from hermes_tui.chat.text_tool_calls import recover_calls
    from hermes_tui.tools.builtin import builtin_registry

    specs = builtin_registry().specs()
    offered = _offered_tool_names()
    decoder = json.JSONDecoder()
    runnable: list[tuple[int, int]] = []
    refused: list[tuple[int, int]] = []
    end = 0
    for start in (m.start() for m in re.finditer(r"\{", answer)):
        if start < end:
            continue  # inside a call already found
        try:
            value, value_end = decoder.raw_decode(answer, start)
        except ValueError:
            continue
        if not isinstance(value, dict):
            continue
        if recover_calls(json.dumps(value), specs) is not None:
            runnable.append((start, value_end))
        elif value.get("name", value.get("function")) in offered and ("arguments" in value or "parameters" in value):
            refused.append((start, value_end))
        else:
            continue
        end = value_end
    return runnable, refused


_BLOCKS = re.compile(r"```.*?(?:```|\Z)|<(tool_call|tools|function)[^>]*>.*?(?:</\1>|\Z)", re.S)


def _around_the_calls(answer: str, calls: list[tuple[int, int]]) -> str:
    """The answer without its ``calls`` (and without code blocks and call tags, where the calls
    may sit): what the app's rule reads as the prose around them."""
    pieces, position = [], 0
    for start, end in calls:
        pieces.append(answer[position:start])
        position = end
    pieces.append(answer[position:])
    text = _BLOCKS.sub("", "".join(pieces))
    return "\n".join(line for line in text.splitlines() if line.strip() and line.strip() not in ("{", "}", "[", "]", ","))


def classify(exit_code: int | None, stderr: str, answer: str, judged: tuple[bool, str]) -> tuple[str, str]:
    """The failure's cause, and what shows it ("" when the task succeeded)."""
    ok, why = judged
    if exit_code is None:
        return "timeout", f"no answer in {TASK_TIMEOUT_S:.0f} s"
    if "Traceback (most recent call last)" in stderr or exit_code not in (0, 1, 2, 130):
        return "crash", stderr.strip()[-400:]
    if exit_code == 2 and ("Nothing was sent" in stderr or "context" in stderr.lower()):
        return "overflow", stderr.strip()[-400:]
    if ok:
        return "", ""
    if "the reply was cut off at its cap" in stderr:  # the app's note: the model ran on to the cap
        return "cut off", answer.strip()[-300:]
    match = TEXT_CALL.search(answer)
    if match and (match.group("name") is None or match.group("name") in _offered_tool_names()):
        # A call with a line or two around it that did not run is the app's; a call shown in
        # an explanation is never run (chat.text_tool_calls' rule), and not running it is right.
        runnable, refused = _call_objects(answer)
        around = _around_the_calls(answer, runnable)
        if len(around.splitlines()) > MAX_PROSE_LINES or len(around) > MAX_PROSE_CHARS:
            # More than a line or two around the call: an explanation, or other text, by the
            # app's rule (chat.text_tool_calls), which never runs a call then.
            return "explained", answer.strip()[:300]
        if match.group("name") is not None and (not runnable or refused):
            # arguments the tool's schema refuses, in the call or in one of the calls beside
            # it: never run (the rule: every call must validate), the model's call
            return "invalid call", answer.strip()[:300]
        return "unparsed call", answer.strip()[:300]
    if exit_code == 1:
        return "max steps", stderr.strip()[-200:]
    if exit_code == 2:
        return "error", stderr.strip()[-400:]
    return "wrong", why


def run_task(task: Task, workspace: Path, home: Path, proxy: RecordingProxy, *,
             resume: str | None) -> tuple[TaskRun, str | None]:
    env = {**os.environ, "HERMES_TUI_HOME": str(home), "HF_HUB_OFFLINE": "1", "PYTHONUNBUFFERED": "1"}
    env.pop("OPENAI_API_KEY", None)
    command = [sys.executable, "-m", "hermes_tui.cli", "run", "--workspace", str(workspace), "--approve", "full"]
    if resume:
        command += ["--resume", resume]
    seen = len(proxy.recording.chats())
    started = time.perf_counter()
    try:
        proc = subprocess.run([*command, task.prompt], cwd=workspace, env=env, capture_output=True, text=True,
                              timeout=TASK_TIMEOUT_S, stdin=subprocess.DEVNULL)
        exit_code, answer, stderr = proc.returncode, proc.stdout, proc.stderr
    except subprocess.TimeoutExpired as exc:
        exit_code, answer = None, ""
        stderr = exc.stderr.decode("utf-8", "replace") if isinstance(exc.stderr, bytes) else (exc.stderr or "")
    seconds = time.perf_counter() - started
    session_id, messages = session_messages(home, resume)
    turn = _since_prompt(messages, task.prompt)
    if not answer and turn and turn[-1].role == "assistant":
        answer = turn[-1].content  # a failed turn's last words: to tell an unparsed call
    model_calls, forms = calls_by_form(turn)
    judged = task.check(workspace, answer) if exit_code is not None else (False, "")
    cause, detail = classify(exit_code, stderr, answer, judged)
    prompts = [usage.get("prompt_tokens") for e in proxy.recording.chats()[seen:] if (usage := e.usage)]
    run = TaskRun(task.name, cause == "", cause, detail, model_calls, forms, round(seconds, 1), exit_code,
                  answer.strip()[:500], max((p for p in prompts if p), default=None))
    return run, session_id


# --- a suite -------------------------------------------------------------------------------------


@dataclass
class SuiteRun:
    model: str
    one_session: bool
    context_limit: int | None
    tasks: list[TaskRun] = field(default_factory=list)
    largest_prompt: int | None = None
    first_prompt_in_last_request: bool | None = None
    seconds: float = 0.0
    rounds: int = 1
    markers_written: int | None = None  # one session: compaction's markers, superseded ones too
    messages_archived: int | None = None  # one session: the messages compaction folded

    def to_json(self) -> dict[str, Any]:
        return {**asdict(self), "tasks": [asdict(t) for t in self.tasks]}


def run_suite(base_url: str, model: str, tasks: list[Task], *, one_session: bool, context_limit: int | None,
              max_steps: int, compaction: str, keep: Path | None = None,
              settings: dict[str, Any] | None = None, rounds: int = 1) -> SuiteRun:
    upstream = base_url.removesuffix("/").removesuffix("/v1")
    proxy = RecordingProxy(upstream).start()
    suite = SuiteRun(model, one_session, context_limit, rounds=rounds)
    started = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="bench-agent-") as tmp:
        scratch = keep or Path(tmp)
        try:
            session_id = None
            shared = project.make_project(scratch / "ws-shared") if one_session else None
            home = scratch / "home-shared"
            for round_ in range(rounds):
                if round_ and shared is not None:
                    reset_project(shared)
                for n, task in enumerate(tasks, start=1):
                    if not one_session:
                        home = scratch / f"home-{n}"
                    if not (home / "config.yaml").exists():
                        write_config(home, proxy.base + "/v1", model, context_limit, max_steps, compaction, settings)
                    workspace = shared or project.make_project(scratch / f"ws-{n}")
                    run, sid = run_task(task, workspace, home, proxy, resume=session_id if one_session else None)
                    if one_session:
                        session_id = sid
                    suite.tasks.append(run)
                    print(_row(round_ * len(tasks) + n, run), flush=True)
            if one_session:
                suite.markers_written, suite.messages_archived = compaction_counts(home, session_id)
        finally:
            proxy.stop()
    chats = [e for e in proxy.recording.chats() if e.request]
    prompts = [u.get("prompt_tokens") or 0 for e in chats if (u := e.usage)]
    suite.largest_prompt = max(prompts, default=None)
    if one_session and chats:
        last = chats[-1].request or {}
        texts = [m.get("content") for m in last.get("messages", []) if m.get("role") == "user"]
        suite.first_prompt_in_last_request = any(isinstance(t, str) and tasks[0].prompt in t for t in texts)
    suite.seconds = round(time.perf_counter() - started, 1)
    return suite


def _row(n: int, run: TaskRun) -> str:
    forms = ", ".join(f"{k} {v}" for k, v in sorted(run.calls_by_form.items())) or "none"
    verdict = "ok" if run.success else f"FAIL ({'app: ' if run.app_failure else 'model: '}{run.cause})"
    line = f"{n:>2}. {run.task:<22} {verdict:<28} calls {run.model_calls:>2}  tools: {forms:<28} {run.seconds:>7.1f} s"
    if run.detail:
        line += f"\n    {run.detail[:240]!r}"
    return line


def summary(suite: SuiteRun) -> str:
    tasks = suite.tasks
    ok = sum(t.success for t in tasks)
    app = Counter(t.cause for t in tasks if t.app_failure)
    model = Counter(t.cause for t in tasks if t.cause and not t.app_failure)
    forms: Counter[str] = Counter()
    for t in tasks:
        forms.update(t.calls_by_form)
    lines = [
        f"model {suite.model}{' (one session)' if suite.one_session else ''}, window "
        f"{suite.context_limit or 'resolved'}: {ok}/{len(tasks)} tasks succeeded in {suite.seconds:.0f} s",
        f"failures, the app's: {sum(app.values())} {dict(app) or ''}",
        f"failures, the model's: {sum(model.values())} {dict(model) or ''}",
        f"tool calls by form: {dict(forms) or 'none'}",
        f"largest prompt the server counted: {suite.largest_prompt}",
    ]
    if suite.rounds > 1:
        size = len(tasks) // suite.rounds
        per_round = [sum(t.success for t in tasks[r * size:(r + 1) * size]) for r in range(suite.rounds)]
        lines.append(f"tasks that succeeded per round (of {size}): {per_round}")
    if suite.markers_written is not None:
        lines.append(f"compaction: {suite.markers_written} markers written, {suite.messages_archived} messages archived")
    if suite.first_prompt_in_last_request is not None:
        lines.append(f"first task's prompt word for word in the last request: {suite.first_prompt_in_last_request}")
    return "\n".join(lines)


def repeated(suites: list[SuiteRun]) -> str:
    """Over several runs of the suite: each task's successes, and the runs' totals."""
    lines = [f"over {len(suites)} runs: tasks that succeeded per run {[sum(t.success for t in s.tasks) for s in suites]}"]
    for n, task in enumerate(suites[0].tasks):
        wins = sum(s.tasks[n].success for s in suites if n < len(s.tasks))
        lines.append(f"  {n + 1:2d}. {task.task:<22} {wins}/{len(suites)}")
    app = sum(t.app_failure for s in suites for t in s.tasks)
    lines.append(f"failures, the app's, in all runs: {app}")
    return "\n".join(lines)


# --- the server ----------------------------------------------------------------------------------


def serve(model: str, port: int) -> str:
    printed = subprocess.run([str(SERVE), model, str(port)], check=True, capture_output=True, text=True).stdout
    return printed.split()[0]


def stop(port: int) -> None:
    subprocess.run([str(SERVE), "--stop", str(port)], check=False, capture_output=True)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--base-url", help="an OpenAI-compatible server (default: start llama-server on --model)")
    parser.add_argument("--model", default=DEFAULT_MODEL, help="the model's name (and the served file)")
    parser.add_argument("--port", type=int, default=18461, help="port for the llama-server started here")
    parser.add_argument("--tasks", help="comma-separated task numbers (1-based) to run; default all")
    parser.add_argument("--one-session", action="store_true", help="all tasks in one session and workspace")
    parser.add_argument("--context-limit", type=int, help="model.context_length (default: 16384 with "
                        "--one-session, else resolved from the server)")
    parser.add_argument("--max-steps", type=int, default=12, help="agent.max_steps per task")
    parser.add_argument("--compaction", choices=("model", "extractive"), default="model",
                        help="who writes summaries: the same server (default) or the extractive summarizer")
    parser.add_argument("--out", type=Path, help="write the figures as JSON here")
    parser.add_argument("--keep", type=Path, help="keep the workspaces and homes here (to read the logs)")
    parser.add_argument("--set", action="append", default=[], metavar="SECTION.NAME=VALUE",
                        help="a config setting for every task, e.g. model.temperature=0.2 (value read as YAML)")
    parser.add_argument("--repeat", type=int, default=1, help="run the suite this many times (sampling varies)")
    parser.add_argument("--rounds", type=int, default=1, help="with --one-session: the tasks this many times over "
                        "in the session, the workspace reset between rounds (so compaction fires)")
    args = parser.parse_args()
    if args.rounds > 1 and not args.one_session:
        parser.error("--rounds goes with --one-session")
    if shutil.which("git") is None:
        print("bench_agent_tasks: git is needed to make the project a repository", file=sys.stderr)
        return 2
    chosen = TASKS
    if args.tasks:
        chosen = [TASKS[int(n) - 1] for n in args.tasks.split(",")]
    limit = args.context_limit or (16_384 if args.one_session else None)
    started_here = args.base_url is None
    base_url = args.base_url or serve(args.model, args.port)
    if args.keep:
        args.keep.mkdir(parents=True, exist_ok=True)
    settings = {key: yaml.safe_load(value) for key, _, value in (item.partition("=") for item in args.set)}
    suites = []
    try:
        for n in range(args.repeat):
            keep = args.keep / f"run-{n + 1}" if args.keep and args.repeat > 1 else args.keep
            suite = run_suite(base_url, args.model, chosen, one_session=args.one_session, context_limit=limit,
                              max_steps=args.max_steps, compaction=args.compaction, keep=keep, settings=settings,
                              rounds=args.rounds)
            suites.append(suite)
            print(summary(suite), flush=True)
    finally:
        if started_here:
            stop(args.port)
    if len(suites) > 1:
        print(repeated(suites))
    if args.out:
        runs = [suite.to_json() for suite in suites]
        args.out.write_text(json.dumps(runs[0] if len(runs) == 1 else runs, indent=2), encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
