"""What the agent loop costs apart from the model, and whether the app stays live while a tool runs.

    uv run python benchmarks/bench_agent_loop.py [--steps 205] [--repeats 3] [--no-passes]
        [--keys 200] [--interval 0.05] [--limit-ms 50] [--only steps|keys] [--json]

**Per-step overhead** (goal: the median at step 200 of a turn at most 1.5 × the median at
step 5). A scripted model that answers at once (in-process, no HTTP, no tokens) calls
``read_file`` on a small real file in a temp workspace at every step, so one step is the
loop's own work: building the request from the transcript (``wire_view``), storing the
assistant message and the result in a real SQLite store, validating the call, deciding
approval, running the tool, counting the exchange and publishing the passes that are due
(``BackgroundPasses``, the extractive summarizer; ``--no-passes`` turns compaction off, so
the transcript grows without bound). Each step is timed from ``step_started`` to the next
one; the median of steps 3–7 and of steps 198–202, over ``--repeats`` turns, and their ratio.
The figures are the machine's, not the model's.

**Keypress latency while a command streams output** (goal: p99 < 50 ms). The real app
headless (``HermesApp`` under ``App.run_test``) in full mode, its chat a scripted in-process
model whose first reply is a ``run_shell`` call of a command that writes output as fast as
it can (``seq`` in a loop) until it is stopped. While it runs, a typist thread hands key
events to the driver as the terminal's input thread does and times each until its
character is in the composer (the method and the hooks of ``bench_ui_latency.py``). Then
Escape's effect (the turn's cancel) stops the command. Prints p50, p99, max.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "benchmarks"))

STEP_GOAL = 1.5
EARLY, LATE = range(3, 8), range(198, 203)  # steps around 5 and around 200
FIREHOSE = "while :; do seq 1 100000; done"  # output as fast as bash and seq can write it


# --- a model that answers at once ---------------------------------------------------------------


class InstantModel:
    """A chat client that calls ``calls`` (one per reply, in turn) and then answers ``final``."""

    model_name = "scripted-instant"
    max_tokens = 256
    supports_tools = True

    def __init__(self, calls: list[tuple[str, dict[str, Any]]], final: str = "Done."):
        self.calls, self.final = calls, final
        self.served = 0

    def stream(self, messages, *, max_tokens=None, stop=None, cancel=None, tools=None, **_):
        from hermes_tui.chat.client import ChatDelta, ChatDone, Usage, tool_call

        n = self.served
        self.served += 1
        if n < len(self.calls) and tools:
            name, arguments = self.calls[n]
            usage = Usage(prompt_tokens=100, completion_tokens=10)
            yield ChatDone("", usage, tool_calls=[tool_call(f"call_{n}", name, json.dumps(arguments))])
            return
        yield ChatDelta(self.final)
        yield ChatDone(self.final, Usage(prompt_tokens=100, completion_tokens=2))

    def complete(self, *args, **kwargs):  # pragma: no cover - the loop streams
        raise NotImplementedError


# --- per-step overhead -------------------------------------------------------------------------


def one_turn(steps: int, passes: bool, folder: Path) -> list[float]:
    """Seconds per step of one turn of ``steps`` model calls (each a ``read_file`` call)."""
    from hermes_tui.config import Config
    from hermes_tui.providers.extractive.summarizer import ExtractiveSummarizer
    from hermes_tui.session.agent import AgentListener, AgentTurn, Tools
    from hermes_tui.session.passes import BackgroundPasses
    from hermes_tui.session.wiring import open_session
    from hermes_tui.store import Store
    from hermes_tui.tools.approval import MemoryRuleStore
    from hermes_tui.tools.builtin import builtin_registry

    workspace = folder / "ws"
    workspace.mkdir()
    for i in range(8):
        (workspace / f"module_{i}.py").write_text("".join(f"def f{j}(x):\n    return x + {j}\n" for j in range(20)))
    config = Config().with_overrides({
        "model.context_length": 32768, "auxiliary.compression.provider": "extractive",
        "compression.enabled": passes,
    })
    calls = [("read_file", {"path": f"module_{i % 8}.py"}) for i in range(steps)]
    model = InstantModel(calls, final="All read.")
    starts: list[float] = []

    class Clock(AgentListener):
        def step_started(self, step: int) -> None:
            starts.append(time.perf_counter())

    with Store(folder / "state.db") as store:
        session = open_session(config, store, title="bench", chat=model, summarizer=ExtractiveSummarizer())
        session.resolve_context_window()
        session.add_user_message("Read every module, one at a time.")
        tools = Tools.from_config(config.agent, builtin_registry(), rules=MemoryRuleStore(), workspace=workspace)
        turn = AgentTurn(session, tools, listener=Clock(), max_steps=steps + 1, passes=BackgroundPasses(session))
        result = turn.run()
        turn.passes.settle()
        session.close()
    assert result.outcome == "completed", result
    return [b - a for a, b in zip(starts, starts[1:])]


def step_overhead(args) -> dict:
    runs = []
    for repeat in range(args.repeats):
        with tempfile.TemporaryDirectory(prefix="hermes-bench-agent-") as tmp:
            runs.append(one_turn(args.steps, not args.no_passes, Path(tmp)))
        print(f"  turn {repeat + 1}/{args.repeats}: {args.steps} steps in {sum(runs[-1]):.2f} s", file=sys.stderr)
    early = [run[i - 1] * 1000 for run in runs for i in EARLY]
    late = [run[i - 1] * 1000 for run in runs for i in LATE if i - 1 < len(run)]
    early_ms, late_ms = statistics.median(early), statistics.median(late)
    ratio = late_ms / early_ms
    return {"steps": args.steps, "repeats": args.repeats, "passes": not args.no_passes,
            "step5_median_ms": round(early_ms, 3), "step200_median_ms": round(late_ms, 3),
            "ratio": round(ratio, 2), "goal": STEP_GOAL, "verdict": "PASS" if ratio <= STEP_GOAL else "FAIL"}


# --- keypress latency while a command streams ----------------------------------------------------


async def drive_keys(args, home: Path) -> list[float]:
    from bench_ui_latency import Recorder
    from textual import events

    from hermes_tui.config import Config
    from hermes_tui.store import Store
    from hermes_tui.tools.approval import Mode
    from hermes_tui.tui.app import HermesApp
    from hermes_tui.tui.widgets.composer import Composer

    workspace = home / "ws"
    workspace.mkdir()
    config = Config().with_overrides({"model.context_length": 32768, "auxiliary.compression.provider": "extractive",
                                      "agent.approval": "full", "agent.shell_timeout": 600})
    model = InstantModel([("run_shell", {"command": FIREHOSE, "timeout_s": 600})], final="Stopped.")
    samples: list[float] = []
    with Store(home / "state.db") as store:
        app = HermesApp(config, store, chat=model, reply_tokens=8, workspace=workspace)
        async with app.run_test(size=(120, 40)) as pilot:
            screen = app.screen
            assert app.approval_mode is Mode.FULL
            composer = screen.query_one(Composer)
            recorder = Recorder()
            recorder.install(app, composer)
            composer.insert("Print numbers")
            await pilot.press("enter")
            deadline = time.monotonic() + 60
            while screen.turns.running_call is None:
                assert time.monotonic() < deadline, "the command never started"
                await pilot.pause(0.05)
            await pilot.pause(0.5)  # the firehose is up to speed
            error: list[BaseException] = []

            def typist() -> None:
                try:
                    for n in range(args.keys):
                        ch = "abcdefghijklmnopqrstuvwxyz"[n % 26]
                        recorder.arm(ch)
                        started = time.perf_counter()
                        app._driver.process_message(events.Key(ch, ch))
                        if not recorder.edited.wait(10):
                            raise TimeoutError(f"key {ch!r} never reached the composer")
                        if screen.turns.running_call is None:
                            raise RuntimeError("the command ended before the keys were measured")
                        samples.append((recorder.edited_at - started) * 1000)
                        time.sleep(args.interval)
                except BaseException as exc:  # noqa: BLE001 - reported by the event loop
                    error.append(exc)

            thread = threading.Thread(target=typist, name="typist", daemon=True)
            thread.start()
            while thread.is_alive():
                await pilot.pause(0.1)
            if error:
                raise error[0]
            screen.action_cancel_reply()  # Escape: the command's group is killed
            deadline = time.monotonic() + 60
            while screen.busy:
                assert time.monotonic() < deadline, "the turn did not stop"
                await pilot.pause(0.1)
            result = [m for m in screen.session.conv.messages if m.role == "tool"][-1]
            assert result.meta["tool"]["status"] == "stopped", result.meta
            print(f"  the command wrote {result.meta['tool']['bytes'] / 1e6:.0f} MB while the keys were typed",
                  file=sys.stderr)
    return samples


def key_latency(args) -> dict:
    from bench_ui_latency import percentile

    with tempfile.TemporaryDirectory(prefix="hermes-bench-keys-") as tmp:
        home = Path(tmp)
        import os

        os.environ["HERMES_TUI_HOME"] = str(home / "home")
        samples = asyncio.run(drive_keys(args, home))
    p99 = percentile(samples, 99)
    return {"keys": len(samples), "p50_ms": round(statistics.median(samples), 2), "p99_ms": round(p99, 2),
            "max_ms": round(max(samples), 2), "limit_ms": args.limit_ms,
            "verdict": "PASS" if p99 < args.limit_ms else "FAIL"}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--steps", type=int, default=205)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--no-passes", action="store_true", help="compaction off: the transcript grows without bound")
    parser.add_argument("--keys", type=int, default=200)
    parser.add_argument("--interval", type=float, default=0.05)
    parser.add_argument("--limit-ms", type=float, default=50.0)
    parser.add_argument("--only", choices=["steps", "keys"])
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    if args.steps < max(LATE) + 1:
        parser.error(f"--steps must be at least {max(LATE) + 1}")
    out: dict[str, Any] = {}
    if args.only in (None, "steps"):
        out["step_overhead"] = s = step_overhead(args)
        if not args.json:
            print(f"per-step overhead (model excluded, passes {'on' if s['passes'] else 'off'}, "
                  f"{s['repeats']} turns of {s['steps']} steps):")
            print(f"  median at step 5:   {s['step5_median_ms']:.3f} ms")
            print(f"  median at step 200: {s['step200_median_ms']:.3f} ms")
            print(f"  ratio: {s['ratio']:.2f} (goal <= {STEP_GOAL})  {s['verdict']}")
    if args.only in (None, "keys"):
        out["key_latency"] = k = key_latency(args)
        if not args.json:
            print(f"keypress -> composer while a command streams output ({k['keys']} keys):")
            print(f"  p50 {k['p50_ms']:.2f} ms  p99 {k['p99_ms']:.2f} ms  max {k['max_ms']:.2f} ms  "
                  f"(p99 / limit {k['p99_ms'] / k['limit_ms']:.2f}, limit {k['limit_ms']:.0f} ms)  {k['verdict']}")
    if args.json:
        print(json.dumps(out, indent=2))
    return 0 if all(v["verdict"] == "PASS" for v in out.values()) else 1


if __name__ == "__main__":
    sys.exit(main())
