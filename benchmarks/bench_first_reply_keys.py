"""Typing latency around the first reply, with and without the openai SDK warmed up.

    uv run python benchmarks/bench_first_reply_keys.py [--runs 3] [--interval 0.05] [--json]

The chat model is an endpoint (the streaming server of bench_ui_latency.py, in this
process), so the first reply is the first use of the openai SDK. Each run is a fresh
process (a fresh interpreter: the SDK not imported yet) with a new session in the real
app (``HermesApp`` under ``App.run_test``): keys are pressed from the first frame on, the
first message is sent after ``--type-seconds``, and keys go on until its reply has landed.
``--warm off`` replaces the app's warm-up (``warm_up``) with nothing: the SDK is
then imported by the first reply's worker thread, as before the warm-up existed. The
default runs both, ``--runs`` times each, and prints p50 / p99 / max of the keypress ->
character-in-the-composer time for the keys pressed while the first reply was awaited,
and for the keys before it was sent (where the warm-up now runs), plus the time from
Enter to the reply's end. On a loaded machine read the ratios, not the absolute figures.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_ui_latency import (  # next to this file
    CHAT_MODEL,
    Recorder,
    SlowSummarizerServer,
    Typist,
    percentile,
)


class FirstReplyTypist(Typist):
    def __init__(self, *args, type_seconds: float, **kwargs):
        super().__init__(*args, **kwargs)
        self.type_seconds = type_seconds
        self.before: list = []
        self.awaiting: list = []
        self.reply_s: float | None = None

    def _run(self) -> None:
        letters = "abcdefghijklmnopqrstuvwxyz"
        deadline = time.monotonic() + self.deadline_s
        end_typing = time.monotonic() + self.type_seconds
        n = 0
        while time.monotonic() < end_typing:
            self._press(letters[n % 26])
            n += 1
            time.sleep(self.interval)
        self.before = list(self.samples)
        self.samples.clear()
        sent = time.monotonic()
        self._enter()
        while not self.screen.turns.replying:  # the turn starts on the UI thread
            time.sleep(0.005)
        while self.screen.turns.replying:
            if time.monotonic() > deadline:
                raise TimeoutError("the first reply never landed")
            self._press(letters[n % 26])
            n += 1
            time.sleep(self.interval)
        self.reply_s = time.monotonic() - sent
        self.awaiting = list(self.samples)


async def drive(args, home: Path, server: SlowSummarizerServer) -> FirstReplyTypist:
    from hermes_tui.config import Config
    from hermes_tui.store import Store
    from hermes_tui.tui.app import HermesApp
    from hermes_tui.tui.screens.chat import ChatScreen
    from hermes_tui.tui.widgets.composer import Composer

    config = Config().with_overrides({
        "model.provider": "openai-api", "model.model": CHAT_MODEL, "model.base_url": server.base_url,
        "model.context_length": 32768, "auxiliary.compression.provider": "extractive",
    })
    with Store(home / "state.db") as store:
        app = HermesApp(config, store, reply_tokens=8)
        async with app.run_test(size=(120, 40)) as pilot:
            while not isinstance(app.screen, ChatScreen):
                await pilot.pause(0.01)
            screen = app.screen
            composer = screen.query_one(Composer)
            composer.focus()
            recorder = Recorder()
            recorder.install(app, composer)
            typist = FirstReplyTypist(app, screen, server, recorder, keys=0, interval=args.interval,
                                      deadline_s=120, explain_ms=None, type_seconds=args.type_seconds)
            typist.start()
            while typist.is_alive():
                await asyncio.sleep(0.05)
            while screen.busy:
                await asyncio.sleep(0.05)
            app.exit()
    if typist.error is not None:
        raise typist.error
    return typist


def figures(samples) -> dict:
    values = [s.to_text_ms for s in samples]
    if not values:
        return {"n": 0}
    return {"n": len(values), "p50_ms": round(statistics.median(values), 1),
            "p99_ms": round(percentile(values, 99), 1), "max_ms": round(max(values), 1)}


def one_run(args) -> dict:
    with tempfile.TemporaryDirectory(prefix="bench_first_reply_") as tmp:
        home = Path(tmp) / "home"
        home.mkdir()
        os.environ.update({"HERMES_TUI_HOME": str(home), "HF_HUB_OFFLINE": "1"})
        os.environ["NO_PROXY"] = ",".join(filter(None, [os.environ.get("NO_PROXY"), "127.0.0.1", "localhost"]))
        assert "openai" not in sys.modules
        if args.warm == "off":
            import hermes_tui.tui.app as app_module

            app_module.warm_up = lambda config: None
        from hermes_tui.util.logs import setup_logging

        setup_logging()
        with SlowSummarizerServer(0.0) as server:
            typist = asyncio.run(drive(args, home, server))
    return {"warm": args.warm, "before_send": figures(typist.before), "awaiting_reply": figures(typist.awaiting),
            "enter_to_reply_end_s": round(typist.reply_s or 0.0, 2)}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--warm", choices=["on", "off", "both"], default="both")
    parser.add_argument("--runs", type=int, default=3, help="processes per setting (default 3)")
    parser.add_argument("--interval", type=float, default=0.05, help="seconds between keypresses")
    parser.add_argument("--type-seconds", type=float, default=3.0, help="typing before the first message is sent")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    if args.warm != "both":
        print(json.dumps(one_run(args)))
        return 0
    results: dict[str, list[dict]] = {"off": [], "on": []}
    for _ in range(args.runs):
        for warm in ("off", "on"):
            done = subprocess.run([sys.executable, __file__, "--warm", warm, "--interval", str(args.interval),
                                   "--type-seconds", str(args.type_seconds)], stdout=subprocess.PIPE, text=True)
            if done.returncode != 0:
                print(f"a run with --warm {warm} failed (exit {done.returncode})", file=sys.stderr)
                return 2
            results[warm].append(json.loads(done.stdout.strip().splitlines()[-1]))
    if args.json:
        print(json.dumps(results, indent=1))
        return 0
    print("Keypress -> character in the composer (ms), first reply from an endpoint; one process per run:")
    print(f"  {'warm-up':<8} {'run':>3}  {'awaiting reply: n':>17} {'p50':>7} {'p99':>7} {'max':>7}   "
          f"{'before send: p50':>16} {'max':>7}   {'Enter->reply s':>14}")
    for warm, runs in results.items():
        for i, r in enumerate(runs, 1):
            a, b = r["awaiting_reply"], r["before_send"]
            print(f"  {warm:<8} {i:>3}  {a.get('n', 0):>17} {a.get('p50_ms', 0):>7.1f} {a.get('p99_ms', 0):>7.1f} "
                  f"{a.get('max_ms', 0):>7.1f}   {b.get('p50_ms', 0):>16.1f} {b.get('max_ms', 0):>7.1f}   "
                  f"{r['enter_to_reply_end_s']:>14.2f}")
    worst = {w: statistics.median(r["awaiting_reply"].get("max_ms", 0) for r in runs) for w, runs in results.items()}
    if worst["on"]:
        print(f"median of the worst key while the first reply was awaited: off {worst['off']:.0f} ms, "
              f"on {worst['on']:.0f} ms ({worst['off'] / worst['on']:.1f}x)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
