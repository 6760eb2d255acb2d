"""Start-up time: how long each command takes before it does anything, against Textual itself.

    uv run python benchmarks/bench_startup.py [--runs 7] [--json]

Each case is a fresh process, timed from spawn (wall clock, the parent's) to the moment it
is done: for ``hermes-tui --help`` and ``hermes-tui sessions list``, until it exits; for
the app, until its first frame of the chat screen is composed (for the resumed session,
the first that shows its messages; a hook on Textual's ``App._display``, the call that writes a frame; the process then leaves at once with
``os._exit`` so shutdown is not counted). The app runs headless, as ``App.run(headless=True)``
does, with a config whose chat and compression models are endpoints (on 127.0.0.1, never
called before the first frame): what a machine without an MLX GPU starts with.

The baselines run in the same loop, interleaved with the cases, so a busy machine slows both
alike: ``python -c "import textual"`` for the commands and a minimal Textual app (one
``Static``) to its first frame for the app. Printed per case: the median of ``--runs`` runs,
its ratio to the baseline, and the process's peak RSS (``os.wait4``). Goals: ``--help``
within 1.5x ``import textual``, the app's first frame within 2x the minimal app's.

The bytecode of the hermes_tui the cases import is written first, as an install writes
it (``pip install`` compiles at install; ``uv run`` writes the .pyc files at the first
start); without it every figure is a few times higher.

Cases: ``--help``; ``sessions list`` over a store of three sessions (one of 2,000
messages); the app on a new, empty session; the app resuming the 2,000-message session
(the bundled demo session's messages repeated, tool call ids made unique per copy).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

LONG_SESSION_MESSAGES = 2_000
HELP_GOAL, FRAME_GOAL = 1.5, 2.0

# Exit the process at the first frame a screen of the named class is composed in (and,
# when ``shows`` names widgets, one of them is in it: a resumed session's messages).
FIRST_FRAME_HOOK = """
import os, sys
from textual.app import App

_display, _run = App._display, App.run

def _first_frame(self, screen, renderable):
    _display(self, screen, renderable)
    if type(screen).__name__ == {screen!r} and (not {shows!r} or screen.query({shows!r})):
        sys.stdout.flush()
        os._exit(0)

def _headless(self, **kwargs):
    return _run(self, **{{**kwargs, "headless": True, "size": (120, 40)}})

App._display, App.run = _first_frame, _headless
"""

COMPILE = "import compileall, os, hermes_tui; compileall.compile_dir(os.path.dirname(hermes_tui.__file__), quiet=1)"

MINIMAL_APP = """
from textual.app import App, ComposeResult
from textual.widgets import Static

class Minimal(App):
    def compose(self) -> ComposeResult:
        yield Static("hello")

Minimal().run()
"""

HERMES_APP = """
sys.argv = ["hermes-tui", *{argv!r}]
from hermes_tui.cli import main
raise SystemExit(main())
"""


def long_session_messages(count: int) -> list:
    """``count`` messages: the demo session's (after its system prompt) over and over."""
    from ui_latency_replies import long_session  # the latency benchmark's own long session

    return long_session(count)


def make_home(home: Path) -> str:
    """A home with an endpoint config and three sessions; returns the long session's id.

    The long session's messages are stored with their token counts, as the app stores them
    (it counts each message as it joins the conversation, with the config's counter)."""
    from hermes_tui.config import load_config
    from hermes_tui.core.conversation import Conversation
    from hermes_tui.session.wiring import make_counter
    from hermes_tui.store import Store

    (home / "config.yaml").write_text(
        "model:\n  provider: openai-api\n  base_url: http://127.0.0.1:9/v1\n  model: chat\n"
        "  context_length: 1000000\n"
        "auxiliary:\n  compression:\n    provider: openai-api\n    base_url: http://127.0.0.1:9/v1\n"
        "    model: small\n",
        encoding="utf-8",
    )
    config = load_config(home / "config.yaml")
    messages = Conversation(long_session_messages(LONG_SESSION_MESSAGES), counter=make_counter(config)).messages
    with Store(home / "state.db") as store:
        store.create_session("first chat")
        store.create_session("second chat")
        return store.create_session("long session", messages=messages).id


def run_once(code: str, env: dict) -> tuple[float, float]:
    """(seconds from spawn to exit, peak RSS in MB) of ``python -c code``."""
    start = time.perf_counter()
    proc = subprocess.Popen([sys.executable, "-c", code], env=env, stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE)
    _, status, usage = os.wait4(proc.pid, 0)
    elapsed = time.perf_counter() - start
    proc.returncode = os.waitstatus_to_exitcode(status)
    err = proc.stderr.read().decode(errors="replace") if proc.stderr else ""
    proc.stderr.close()
    if proc.returncode != 0:
        raise SystemExit(f"bench_startup: a case failed (exit {proc.returncode}):\n{err[-2000:]}")
    return elapsed, usage.ru_maxrss / 1024  # KB on Linux


def cases(long_id: str) -> dict[str, tuple[str, str]]:
    """name -> (code, baseline name)."""
    def app(argv: list[str], shows: str = "") -> str:
        return FIRST_FRAME_HOOK.format(screen="ChatScreen", shows=shows) + HERMES_APP.format(argv=argv)

    return {
        "import textual": ("import textual", ""),
        "minimal Textual app": (FIRST_FRAME_HOOK.format(screen="Screen", shows="") + MINIMAL_APP, ""),
        "hermes-tui --help": ("import sys" + HERMES_APP.format(argv=["--help"]), "import textual"),
        "hermes-tui sessions list": ("import sys" + HERMES_APP.format(argv=["sessions", "list"]), "import textual"),
        "app, first frame: new session": (app([]), "minimal Textual app"),
        # The frame that shows the session: its last message is a user's.
        f"app, first frame: {LONG_SESSION_MESSAGES:,} messages": (app(["--resume", long_id], shows="UserMessage"),
                                                                  "minimal Textual app"),
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=7, help="runs of each case (default 7)")
    parser.add_argument("--json", action="store_true", help="print the figures as JSON")
    parser.add_argument("--make-home", type=Path, metavar="DIR", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.make_home:
        print(make_home(args.make_home))
        return 0

    with tempfile.TemporaryDirectory(prefix="bench-startup-") as tmp:
        home = Path(tmp)
        # Bytecode for hermes_tui as an install has it (pip compiles at install): an
        # editable checkout (or PYTHONDONTWRITEBYTECODE) would compile every module each start.
        subprocess.run([sys.executable, "-c", COMPILE], check=True, cwd=home)
        # In a process of its own: Linux keeps a process's peak RSS across exec, so a child
        # forked from a parent holding the store and 2,000 messages would start at its size.
        long_id = subprocess.run([sys.executable, __file__, "--make-home", str(home)], check=True,
                                 capture_output=True, text=True).stdout.strip()
        env = {**os.environ, "HERMES_TUI_HOME": str(home), "HF_HUB_OFFLINE": "1"}
        table = cases(long_id)
        times: dict[str, list[float]] = {name: [] for name in table}
        rss: dict[str, float] = dict.fromkeys(table, 0.0)
        for code, _ in table.values():  # warm the OS caches, not measured
            run_once(code, env)
        for _ in range(args.runs):
            for name, (code, _) in table.items():
                elapsed, peak = run_once(code, env)
                times[name].append(elapsed)
                rss[name] = max(rss[name], peak)

    rows = []
    for name, (_, baseline) in table.items():
        median = statistics.median(times[name])
        ratio = median / statistics.median(times[baseline]) if baseline else None
        goal = (HELP_GOAL if "--help" in name else FRAME_GOAL if baseline == "minimal Textual app" else None)
        rows.append({"case": name, "median_s": round(median, 3), "baseline": baseline or None,
                     "ratio": round(ratio, 2) if ratio else None, "goal": goal,
                     "peak_rss_mb": round(rss[name], 1)})
    if args.json:
        print(json.dumps({"runs": args.runs, "cases": rows}, indent=1))
        return 0
    print(f"{args.runs} runs per case, medians; ratio = case / baseline in the same run\n")
    print(f"{'case':<36} {'median':>8} {'ratio':>7} {'goal':>6} {'peak RSS':>10}  baseline")
    for row in rows:
        ratio = f"{row['ratio']:.2f}x" if row["ratio"] else ""
        goal = f"<={row['goal']}x" if row["goal"] else ""
        print(f"{row['case']:<36} {row['median_s'] * 1000:>6.0f}ms {ratio:>7} {goal:>6} "
              f"{row['peak_rss_mb']:>7.1f} MB  {row['baseline'] or ''}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
