"""Typing latency while a compaction pass runs: does the input stay live?

    uv run python benchmarks/bench_ui_latency.py [--keys 200] [--pass-seconds 2] [--interval 0.05]
        [--limit-ms 50] [--chat endpoint|tiny] [--session both|demo|small|long] [--explain-slow MS] [--json]
        [--during pass|reply] [--contention]

``--during reply --contention``: the keys that land while replies stream (400 words each),
with one CPU-bound process running beside the app, on the demo session and a 2,000-message
one (``--session both`` then means those two); see ``ui_latency_replies``.

The spec: passes run in the background, so the user keeps typing while one runs. This
measures it on the real app: the time from a keypress to its character being in the
composer, for ``--keys`` keypresses made while a pass is in flight; it prints p50, p99 and
max, the p99 as a multiple of the limit, and PASS/FAIL against the p99 limit (50 ms), and
exits 1 on FAIL. ``--session both`` (the default with ``--chat endpoint``) measures the
small session and then the 182-message one, each in a process of its own, and ends with a
table of the two (p50, p99, p99 / limit, verdict): the app should cost the same for both.

The setup:

* **A slow summarizer**: a real HTTP server (stdlib ``ThreadingHTTPServer`` on a loopback
  port, in a thread of this process) serving ``POST /v1/chat/completions``. Every call
  sleeps ``--pass-seconds`` (2 s) and then returns a short, valid summary line. The app
  reaches it as a user would configure it (``auxiliary.compression.provider: openai-api``),
  so each pass goes through the real OpenAI client, loopback HTTP and JSON parsing.
* **The chat model** only completes turns (each turn queues a pass); replies are 8 tokens
  (``HermesApp(reply_tokens=8)``, as the TUI tests do). ``--chat endpoint`` (the default):
  the same server streams the reply (SSE) to ``model.provider: openai-api``, which is how
  the app talks to its chat model on a machine where MLX has no GPU (``auto`` picks MLX
  only with one). ``--chat tiny``: the tiny random-weight model (models/build_tiny.py)
  in-process on MLX; on a CPU-only machine its generation competes with the UI thread for
  the CPU, so it measures the test machine as much as the app.
* **The session**, stored and resumed: ``--session demo`` is the bundled real
  agent session (182 messages, 90 tool exchanges, ~52K tokens) in a 128K window, at half
  the compaction threshold: the size of session passes exist for, and the message list a
  user really has on screen. ``--session small`` (the only one ``--chat tiny`` fits) is 7
  synthetic tool exchanges, ~1,000 tokens in the tiny model's 2,048-token window. Either
  way passes have old exchanges to absorb (a real summarizer call each) and no batch
  compaction starts; new turns keep adding exchanges.
* **The app**: ``HermesApp`` headless under ``App.run_test``: the real screens, widgets,
  workers and event loop; only the terminal is absent.

How a keypress is timed. Not with ``Pilot.press``: it waits for the app to look idle
(20 ms sleeps, up to 1 s while a thread is busy), which would measure the pilot. A
"typist" thread plays the terminal driver's input thread instead: it hands each key event
to ``driver.process_message`` (what Textual's Linux driver does with a parsed key, at any
moment, whatever the event loop is doing), and the time until the composer's document
holds the character comes from a hook on ``Composer.edit`` (the call that puts it in), so
nothing polls the event loop and nothing biases when keys arrive. The first screen frame
composed after that edit is timestamped too (a hook on ``App._display``; headless, the
frame is composed but not written) and reported as "to frame". Keys come every
``--interval`` seconds (20/s, a fast typist). ``--explain-slow MS`` dumps every thread's
stack (faulthandler: it works even while a thread holds the GIL) when a key takes longer.

Keeping passes running. After every 20 letters, if no pass is queued behind the running
one and no reply is being written, the typist presses Enter: the letters go out as a
message, its reply lands, and its pass queues behind the running one, so passes run back
to back. A keypress counts as "during a pass" when the server was handling a pass call at
the keypress and the same call was still running when the character appeared; the run goes
on until ``--keys`` such keypresses are measured. Keypresses between passes are measured
too and reported separately, as are those made while a reply was also being written.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import faulthandler
import json
import os
import re
import statistics
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

import ui_latency_replies as replies  # noqa: E402 - next to this file, after the path is set

BATCH = 20             # letters between Enters
REPLY_TOKENS = 8
SMALL_CONTEXT_LENGTH = 2048  # the tiny model's own limit (max_position_embeddings)
SMALL_EXCHANGES = 7          # ~1,000 tokens: under the threshold, with old exchanges to absorb
SERVED_MODEL = "slow-summarizer"
CHAT_MODEL = "fast-chat"


# --- the slow summarizer (and the chat endpoint) -------------------------------------------------------------------


class SlowSummarizerServer:
    """An OpenAI-compatible endpoint: a summary takes ``delay`` seconds (a pass in flight while it
    sleeps); a streamed request (the chat, ``--chat endpoint``) is answered at once."""

    def __init__(self, delay: float):
        self.delay = delay
        self.lock = threading.Lock()
        self.started = 0       # calls received
        self.finished = 0      # calls answered
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args) -> None:  # quiet
                pass

            def _send(self, status: int, body: dict) -> None:
                data = json.dumps(body).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def _stream_reply(self, tokens: int) -> None:
                """The chat model (``--chat endpoint``): ``tokens`` words, streamed as SSE."""
                self.send_response(200)
                self.send_header("Content-Type", "text/event-stream")
                self.send_header("Connection", "close")
                self.end_headers()

                def event(body: dict) -> None:
                    self.wfile.write(b"data: " + json.dumps(body).encode() + b"\n\n")
                    self.wfile.flush()

                base = {"id": "chat", "object": "chat.completion.chunk", "created": int(time.time()),
                        "model": CHAT_MODEL}
                try:
                    self._stream_words(base, tokens, event)
                except (BrokenPipeError, ConnectionResetError):
                    self.close_connection = True  # the app went away mid-reply (the run ended)

            def _stream_words(self, base: dict, tokens: int, event) -> None:
                for i in range(tokens):
                    time.sleep(0.005)
                    event({**base, "choices": [{"index": 0, "delta": {"content": f"word{i} "},
                                                "finish_reason": None}]})
                event({**base, "choices": [{"index": 0, "delta": {}, "finish_reason": "length"}]})
                event({**base, "choices": [], "usage": {"prompt_tokens": 100, "completion_tokens": tokens,
                                                        "total_tokens": 100 + tokens}})
                self.wfile.write(b"data: [DONE]\n\n")
                self.wfile.flush()
                self.close_connection = True

            def do_GET(self) -> None:
                if self.path.rstrip("/").endswith("/models"):
                    self._send(200, {"object": "list", "data": [{"id": SERVED_MODEL, "object": "model"}]})
                else:
                    self._send(404, {"error": {"message": "not found"}})

            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                request = json.loads(self.rfile.read(length) or b"{}")
                if not self.path.rstrip("/").endswith("/chat/completions"):
                    self._send(404, {"error": {"message": "not found"}})
                    return
                if request.get("stream"):
                    self._stream_reply(int(request.get("max_tokens") or REPLY_TOKENS))
                    return
                with server.lock:
                    server.started += 1
                    number = server.started
                try:
                    time.sleep(server.delay)
                    text = summary_for(request, number)
                    self._send(200, {
                        "id": f"cmpl-{number}", "object": "chat.completion", "created": int(time.time()),
                        "model": SERVED_MODEL,
                        "choices": [{"index": 0, "message": {"role": "assistant", "content": text},
                                     "finish_reason": "stop"}],
                        "usage": {"prompt_tokens": 100, "completion_tokens": 20, "total_tokens": 120},
                    })
                finally:
                    with server.lock:
                        server.finished += 1

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.base_url = f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"
        self.thread = threading.Thread(target=self.httpd.serve_forever, kwargs={"poll_interval": 0.5},
                                       name="slow-summarizer", daemon=True)

    def __enter__(self) -> SlowSummarizerServer:
        self.thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()

    def state(self) -> tuple[int, int]:
        """(calls in flight, calls answered)."""
        with self.lock:
            return self.started - self.finished, self.finished


def summary_for(request: dict, number: int) -> str:
    """A short, valid answer for the prompt kind the engine sent (append, merge, defrag, batch)."""
    prompt = " ".join(str(m.get("content", "")) for m in request.get("messages", []))
    if "Summary to consolidate" in prompt or "Messages to condense" in prompt:
        return "- Earlier steps: listed the project folders and read each listing."
    line = f"- Step {number}: the assistant listed a project folder and read the listing."
    if "Reply with only the new lines" in prompt:
        return line
    summary = prompt.split("<summary>", 1)[1].split("</summary>", 1)[0].strip() if "<summary>" in prompt else ""
    return (summary + "\n" + line).strip() if summary and not summary.startswith("(") else line


# --- the session ---------------------------------------------------------------------------


DEMO_SESSION = REPO / "hermes_tui" / "assets" / "demo_session.json"
DEMO_CONTEXT_LENGTH = 131_072  # the demo session's ~52K tokens at ~50% of the threshold


def demo_session():
    """The bundled real agent session (182 messages, 90 tool exchanges)."""
    from hermes_tui.core.transcript import parse_transcript

    return parse_transcript(DEMO_SESSION.read_text(encoding="utf-8"), source=str(DEMO_SESSION))


def agent_session():
    from hermes_tui.core.transcript import Message

    messages = [
        Message("system", "You are a coding agent. Work in small steps and check every result."),
        Message("user", "Go through every folder of the project and tell me what each one holds."),
    ]
    for i in range(SMALL_EXCHANGES):
        call = {"id": f"call_{i}", "type": "function",
                "function": {"name": "bash", "arguments": json.dumps({"command": f"ls -la src/module_{i}"})}}
        listing = "\n".join(
            f"-rw-r--r--  1 dev dev {1000 + 37 * j:>6} Mar {1 + j % 28:>2} 10:{j:02d} file_{i}_{j}.py"
            for j in range(2)
        )
        messages.append(Message("assistant", f"Listing module {i}.", tool_calls=[call]))
        messages.append(Message("tool", f"total {2 * 4}\n{listing}", tool_call_id=f"call_{i}", name="bash"))
        if i % 4 == 3:
            messages.append(Message("user", f"Good, {i + 1} folders done. Keep going."))
    return messages


# --- measuring -----------------------------------------------------------------------------


@dataclass
class Sample:
    key: str
    to_text_ms: float
    to_frame_ms: float | None
    in_pass: bool
    replying: bool


@dataclass
class Recorder:
    """Hooks on the composer's edits and the app's frames; the typist waits on them."""

    pending: str | None = None
    edited_at: float | None = None
    frame_at: float | None = None
    edited: threading.Event = field(default_factory=threading.Event)
    framed: threading.Event = field(default_factory=threading.Event)

    def arm(self, key: str) -> None:
        self.pending, self.edited_at, self.frame_at = key, None, None
        self.edited.clear()
        self.framed.clear()

    def install(self, app, composer) -> None:
        original_edit, original_display = composer.edit, app._display

        def edit(edit_):
            result = original_edit(edit_)
            if self.pending is not None and self.edited_at is None and composer.text.endswith(self.pending):
                self.edited_at = time.perf_counter()
                self.edited.set()
            return result

        def display(screen, renderable):
            original_display(screen, renderable)
            if renderable is not None and self.edited_at is not None and self.frame_at is None:
                self.frame_at = time.perf_counter()
                self.framed.set()

        composer.edit = edit
        app._display = display


class Typist(threading.Thread):
    """Presses keys the way the terminal driver's input thread delivers them."""

    def __init__(self, app, screen, server: SlowSummarizerServer, recorder: Recorder, *,
                 keys: int, interval: float, deadline_s: float, explain_ms: float | None):
        super().__init__(name="typist", daemon=True)
        self.app, self.screen, self.server, self.recorder = app, screen, server, recorder
        self.keys, self.interval, self.deadline_s, self.explain_ms = keys, interval, deadline_s, explain_ms
        self.samples: list[Sample] = []
        self.enters = 0
        self.error: BaseException | None = None

    def during_pass(self) -> int:
        return sum(s.in_pass for s in self.samples)

    def send_key(self, key: str, char: str | None) -> None:
        from textual import events

        self.app._driver.process_message(events.Key(key, char))

    def run(self) -> None:
        try:
            self._run()
        except BaseException as exc:  # noqa: BLE001 - reported by the main thread
            self.error = exc

    def _run(self) -> None:
        letters = "abcdefghijklmnopqrstuvwxyz"
        deadline = time.monotonic() + self.deadline_s
        # The first message: its pass starts the measurement (the first reply may load the model).
        for ch in "start":
            self._press(ch)
        self._enter()
        while self.server.state()[0] == 0:
            if time.monotonic() > deadline:
                raise TimeoutError("the first pass never reached the slow summarizer")
            time.sleep(0.01)
        self.samples.clear()  # measured from here on

        typed = n = 0
        screen = self.screen
        while self.during_pass() < self.keys:
            if time.monotonic() > deadline:
                raise TimeoutError(f"only {self.during_pass()} keypresses during a pass in {self.deadline_s:.0f} s")
            if typed >= BATCH and not screen.passes.queue.waiting and not screen.turns.replying:
                # Nothing lined up behind the running pass: send what was typed. Its reply
                # completes a turn, and that turn's pass queues behind the running one.
                self._enter()
                typed = 0
            else:
                self._press(letters[n % len(letters)])
                n += 1
                typed += 1
            time.sleep(self.interval)

    def _enter(self) -> None:
        self.send_key("enter", "\r")
        self.enters += 1

    def _press(self, ch: str) -> None:
        rec = self.recorder
        rec.arm(ch)
        in_flight, answered = self.server.state()
        replying = bool(self.screen.turns.replying)
        if self.explain_ms is not None:
            # A C watchdog thread: it dumps every thread's stack even while one holds the GIL.
            faulthandler.dump_traceback_later(self.explain_ms / 1000, file=sys.__stderr__)
        started = time.perf_counter()
        self.send_key(ch, ch)
        landed = rec.edited.wait(10)
        if self.explain_ms is not None:
            faulthandler.cancel_dump_traceback_later()
        if not landed:
            raise TimeoutError(f"key {ch!r} never reached the composer")
        answered_after = self.server.state()[1]
        rec.framed.wait(1)
        sample = Sample(
            key=ch,
            to_text_ms=(rec.edited_at - started) * 1000,
            to_frame_ms=(rec.frame_at - started) * 1000 if rec.frame_at is not None else None,
            in_pass=in_flight > 0 and answered_after == answered,
            replying=replying,
        )
        if self.explain_ms is not None and sample.to_text_ms > self.explain_ms:
            print(f"--- the stacks above: key {ch!r} took {sample.to_text_ms:.0f} ms "
                  f"(during a pass: {sample.in_pass}, a reply streaming: {replying})\n", file=sys.__stderr__)
        self.samples.append(sample)


def pass_outcomes(log: Path) -> dict[str, int]:
    """How the passes ended, from the app's telemetry lines."""
    outcomes: dict[str, int] = {}
    marker = "micro compaction telemetry: "
    for line in log.read_text(errors="replace").splitlines() if log.exists() else []:
        if marker in line:
            outcome = json.loads(line.split(marker, 1)[1]).get("outcome", "?")
            outcomes[outcome] = outcomes.get(outcome, 0) + 1
    return outcomes


def percentile(values: list[float], p: float) -> float:
    """Nearest-rank percentile (p in 0..100)."""
    ordered = sorted(values)
    rank = max(1, -(-len(ordered) * p // 100))  # ceil
    return ordered[int(rank) - 1]


def stats(values: list[float]) -> dict:
    if not values:
        return {"n": 0}
    return {
        "n": len(values),
        "p50_ms": round(statistics.median(values), 2),
        "p99_ms": round(percentile(values, 99), 2),
        "max_ms": round(max(values), 2),
        "mean_ms": round(statistics.fmean(values), 2),
    }


# --- the run -------------------------------------------------------------------------------


async def drive(args, home: Path, tiny_fp32: Path, server: SlowSummarizerServer) -> tuple[Typist, dict]:
    from hermes_tui.config import Config
    from hermes_tui.session.wiring import open_session
    from hermes_tui.store import Store
    from hermes_tui.tui.app import HermesApp
    from hermes_tui.tui.screens.chat import ChatScreen
    from hermes_tui.tui.widgets.composer import Composer

    if args.session == "demo":
        messages, window = demo_session(), DEMO_CONTEXT_LENGTH
    elif args.session == "long":
        messages, window = replies.long_session(), replies.LONG_CONTEXT_LENGTH
    else:
        messages, window = agent_session(), SMALL_CONTEXT_LENGTH
    chat = ({"model.provider": "mlx", "model.model": str(tiny_fp32)} if args.chat == "tiny" else
            {"model.provider": "openai-api", "model.model": CHAT_MODEL, "model.base_url": server.base_url})
    if args.chat == "endpoint" and args.session == "small":
        chat["compression.tokenizer"] = str(tiny_fp32)  # the same token counts as with --chat tiny
    config = Config().with_overrides({
        **chat, "model.context_length": window,
        "auxiliary.compression.provider": "openai-api",
        "auxiliary.compression.base_url": server.base_url,
        "auxiliary.compression.model": SERVED_MODEL,
    })
    with Store(home / "state.db") as store:
        session = open_session(config, store, title="latency bench")
        session.conv.extend(messages)
        store.flush(session.info.id, session.conv.messages)
        session.resolve_context_window()
        start = {
            "messages": len(session.conv), "tokens": session.conv.total_tokens,
            "threshold_tokens": session.compactor.ctx.window.threshold_tokens,
        }
        assert start["tokens"] < 0.7 * start["threshold_tokens"], start  # no batch compaction

        reply_tokens = replies.REPLY_WORDS if args.during == "reply" else REPLY_TOKENS
        app = HermesApp(config, store, session_id=session.info.id, reply_tokens=reply_tokens)
        async with app.run_test(size=(120, 40)) as pilot:
            while not isinstance(app.screen, ChatScreen):
                await pilot.pause(0.05)
            screen = app.screen
            composer = screen.query_one(Composer)
            composer.focus()
            await pilot.pause()
            recorder = Recorder()
            recorder.install(app, composer)
            kind = replies.reply_typist(Typist) if args.during == "reply" else Typist
            typist = kind(app, screen, server, recorder, keys=args.keys, interval=args.interval,
                          deadline_s=args.timeout, explain_ms=args.explain_slow)
            typist.start()
            while typist.is_alive():
                await asyncio.sleep(0.05)
            # Let the reply and the pass in flight finish: their workers write to the store,
            # which closes when this block ends.
            settle_by = time.monotonic() + 60
            while screen.busy and time.monotonic() < settle_by:
                await asyncio.sleep(0.05)
            end = screen.session.usage()
            app.exit()
        if typist.error is not None:
            raise typist.error
        info = {**start, "passes_done": end["passes"], "tokens_saved": end["tokens_saved"],
                "messages_sent": typist.enters}
        return typist, info


SESSION_NAMES = {"small": "small (synthetic)", "demo": "demo (bundled agent run)",
                 "long": f"long ({replies.LONG_MESSAGES:,} messages)"}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--keys", type=int, default=200, help="keypresses to measure during passes (default 200)")
    parser.add_argument("--pass-seconds", type=float, default=2.0, help="the summarizer's time per call (default 2)")
    parser.add_argument("--interval", type=float, default=0.05, help="seconds between keypresses (default 0.05)")
    parser.add_argument("--limit-ms", type=float, default=50.0, help="p99 limit in ms (default 50)")
    parser.add_argument("--timeout", type=float, default=300.0, help="give up after this many seconds")
    parser.add_argument("--chat", choices=["endpoint", "tiny"], default="endpoint",
                        help="the chat model: a fast streaming endpoint (default) or the tiny model in-process (MLX)")
    parser.add_argument("--session", choices=["both", "demo", "small", "long"],
                        help="the history: the bundled real agent session (182 messages) in a 128K window, a small "
                             "synthetic one in the tiny model's 2,048-token window, or both, one after the other "
                             "(the default; --chat tiny: small only)")
    parser.add_argument("--explain-slow", type=float, metavar="MS",
                        help="dump every thread's stack (to stderr) when a keypress takes longer than MS")
    parser.add_argument("--json", action="store_true", help="print the numbers as JSON")
    parser.add_argument("--during", choices=["pass", "reply"], default="pass",
                        help="measure the keys that land while a pass runs (default) or while a reply streams")
    parser.add_argument("--contention", action="store_true",
                        help="run one CPU-bound process beside the app (a busy machine)")
    args = parser.parse_args(argv)
    if args.session is None:
        args.session = "small" if args.chat == "tiny" else "both"
    if args.chat == "tiny" and args.session != "small":
        parser.error("--chat tiny needs --session small: the tiny model's window is 2,048 tokens")

    if args.session == "both":
        return run_both(args)
    result = run(args)
    if args.json:
        print(json.dumps(result, indent=1))
    else:
        print_result(result)
    return 0 if result["pass"] else 1


def run_both(args) -> int:
    """Each session in a process of its own (a fresh app, log and HERMES_TUI_HOME), then both side by side."""
    import subprocess

    results = {}
    for session in ("demo", "long") if args.during == "reply" else ("small", "demo"):
        command = [sys.executable, str(Path(__file__).resolve()), "--session", session, "--json",
                   "--keys", str(args.keys), "--pass-seconds", str(args.pass_seconds),
                   "--interval", str(args.interval), "--limit-ms", str(args.limit_ms),
                   "--timeout", str(args.timeout), "--chat", args.chat, "--during", args.during]
        if args.contention:
            command.append("--contention")
        if args.explain_slow is not None:
            command += ["--explain-slow", str(args.explain_slow)]
        done = subprocess.run(command, stdout=subprocess.PIPE, text=True)
        try:
            start = re.search(r"^\{$", done.stdout, re.M)  # the JSON (anything printed before it is not)
            results[session] = json.loads(done.stdout[start.start():])
        except (AttributeError, ValueError):
            print(f"the {session} session's run failed (exit {done.returncode}):\n{done.stdout}", file=sys.stderr)
            return 2
        if not args.json:
            print_result(results[session])
            print()
    ok = all(r["pass"] for r in results.values())
    if args.json:
        print(json.dumps({"sessions": results, "limit_ms": args.limit_ms, "pass": ok}, indent=1))
        return 0 if ok else 1
    during = "while a reply streams" if args.during == "reply" else "during a pass"
    busy = ", one CPU-bound process beside it" if args.contention else ""
    print(f"Keypress -> character in the composer, {during}{busy} (p99 limit {args.limit_ms:g} ms):")
    print(f"  {'session':<26} {'messages':>8} {'keys':>5} {'p50 ms':>8} {'p99 ms':>8} {'max ms':>8} "
          f"{'p99/limit':>9}  verdict")
    for session, r in results.items():
        t = r["to_text"]
        print(f"  {SESSION_NAMES[session]:<26} {r['session']['messages']:>8} {t.get('n', 0):>5} "
              f"{t.get('p50_ms', float('nan')):>8.2f} {t.get('p99_ms', float('nan')):>8.2f} "
              f"{t.get('max_ms', float('nan')):>8.2f} {r['p99_ratio_to_limit']:>8.2f}x  "
              f"{'PASS' if r['pass'] else 'FAIL'}")
    failed = [SESSION_NAMES[s] for s, r in results.items() if not r["pass"]]
    print("PASS: both sessions under the limit" if ok else f"FAIL: {', '.join(failed)} over the limit")
    return 0 if ok else 1


def run(args) -> dict:
    """One session's run: the numbers (see the module)."""
    with tempfile.TemporaryDirectory(prefix="bench_ui_latency_") as tmp:
        tmp_path = Path(tmp)
        home, hf_home = tmp_path / "hermes_home", tmp_path / "hf_home"
        home.mkdir()
        (hf_home / "hub").mkdir(parents=True)
        os.environ.update({"HERMES_TUI_HOME": str(home), "HF_HUB_OFFLINE": "1", "HF_HOME": str(hf_home)})
        os.environ["NO_PROXY"] = ",".join(filter(None, [os.environ.get("NO_PROXY"), "127.0.0.1", "localhost"]))
        os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

        import importlib.util

        spec = importlib.util.spec_from_file_location("build_tiny", REPO / "models" / "build_tiny.py")
        build_tiny = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(build_tiny)
        tiny = build_tiny.build(tmp_path / "tiny")

        if args.chat == "tiny":
            import mlx_lm  # noqa: F401  - on the main thread first, as cli.run_app does

        from hermes_tui.util import paths
        from hermes_tui.util.logs import setup_logging

        setup_logging()
        with SlowSummarizerServer(args.pass_seconds) as server, (
                replies.CpuBurner() if args.contention else contextlib.nullcontext()):
            started = time.perf_counter()
            typist, info = asyncio.run(drive(args, home, tiny["fp32"], server))
            elapsed = time.perf_counter() - started
            calls = server.started
        info["pass_outcomes"] = pass_outcomes(paths.log_path())

    if args.during == "reply":  # the keys pressed while a reply streamed
        during = [s for s in typist.samples if s.replying]
        outside = [s for s in typist.samples if not s.replying]
    else:
        during = [s for s in typist.samples if s.in_pass]
        outside = [s for s in typist.samples if not s.in_pass]
    headline = stats([s.to_text_ms for s in during])
    result = {
        "keypresses_during_pass": len(during),
        "keypresses_outside_pass": len(outside),
        "to_text": headline,
        "to_frame": stats([s.to_frame_ms for s in during if s.to_frame_ms is not None]),
        # Split by the other activity: a reply streaming (during a pass), a pass running (during a reply).
        "during_pass_and_reply": stats([s.to_text_ms for s in during if s.replying and s.in_pass]),
        "during_pass_no_reply": stats([s.to_text_ms for s in during
                                       if (not s.replying if args.during == "pass" else not s.in_pass)]),
        "outside_pass": stats([s.to_text_ms for s in outside]),
        "summarizer_calls": calls,
        "chat": args.chat,
        "session_kind": args.session,
        "during": args.during,
        "contention": args.contention,
        "pass_seconds": args.pass_seconds,
        "interval_s": args.interval,
        "limit_ms": args.limit_ms,
        "session": info,
        "elapsed_s": round(elapsed, 1),
    }
    ok = headline["n"] >= args.keys and headline["p99_ms"] < args.limit_ms
    result["p99_ratio_to_limit"] = round(headline.get("p99_ms", float("inf")) / args.limit_ms, 2)
    result["pass"] = ok
    return result


def print_result(result: dict) -> None:
    def line(name: str, s: dict) -> str:
        if not s.get("n"):
            return f"  {name:<28} n=0"
        return (f"  {name:<28} n={s['n']:<4} p50 {s['p50_ms']:6.2f} ms   p99 {s['p99_ms']:6.2f} ms   "
                f"max {s['max_ms']:6.2f} ms")

    info, headline = result["session"], result["to_text"]
    chat = "a streaming endpoint" if result["chat"] == "endpoint" else "the tiny model in-process (MLX)"
    mix = ", ".join(f"{name} {count}" for name, count in sorted(info["pass_outcomes"].items())) or "none"
    reply = result.get("during") == "reply"
    what = "a reply" if reply else "a pass"
    busy = "; one CPU-bound process beside it" if result.get("contention") else ""
    print(f"Keypress -> character in the composer while {'a reply streams' if reply else 'a pass runs'} "
          f"(slow summarizer: {result['pass_seconds']:g} s per call over loopback HTTP; chat: {chat}{busy})")
    print(f"session {SESSION_NAMES[result['session_kind']]}: {info['messages']} messages, {info['tokens']:,} tokens "
          f"(threshold {info['threshold_tokens']:,}); {result['summarizer_calls']} summarizer calls; "
          f"passes landed: {mix}; {info['messages_sent']} messages sent while typing; {result['elapsed_s']:.1f} s")
    print(line(f"during {what} (to text)", headline))
    print(line(f"during {what} (to frame)", result["to_frame"]))
    print(line("  with a pass and a reply", result["during_pass_and_reply"]))
    print(line("  with no pass running" if reply else "  with no reply streaming", result["during_pass_no_reply"]))
    print(line(f"outside {what} (to text)", result["outside_pass"]))
    ok, limit = result["pass"], result["limit_ms"]
    print(f"{'PASS' if ok else 'FAIL'}: p99 {headline.get('p99_ms', float('nan')):.2f} ms "
          f"{'<' if ok else '>='} {limit:g} ms ({result['p99_ratio_to_limit']:.2f}x the limit) "
          f"over {result['keypresses_during_pass']} keypresses during {what}")


if __name__ == "__main__":
    raise SystemExit(main())
