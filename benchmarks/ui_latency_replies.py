"""``bench_ui_latency.py --during reply``: typing while replies stream, with a busy CPU beside.

The parts of that mode that are its own: the typist that keeps replies streaming and
measures the keys that land meanwhile, the 2,000-message session, and the CPU-bound
process that runs beside the app (``--contention``). The rest (the endpoint, the hooks that
time a key, the statistics) is ``bench_ui_latency``'s.

A reply is ``REPLY_WORDS`` words streamed by the loopback endpoint 5 ms apart (about 2 s of
streaming, a fast model's pace), each word its own SSE event, through the real OpenAI client
into the chat screen. The typist presses a key every ``--interval`` seconds; whenever no
reply is being written it sends what it typed (Enter), so the next reply starts streaming;
a key counts when a reply was streaming as it was pressed. Passes still run after each
reply (the slow summarizer, ``--pass-seconds``), as they do for a user.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

REPLY_WORDS = 400
LONG_MESSAGES = 2_000
LONG_CONTEXT_LENGTH = 2_000_000  # the 2,000 messages (~570K tokens) far below the threshold
DEMO_SESSION = Path(__file__).resolve().parents[1] / "hermes_tui" / "assets" / "demo_session.json"
BURN = "while True: pass"


def long_session(count: int = LONG_MESSAGES) -> list:
    """``count`` messages: the demo session's (after its system prompt) over and over, each
    copy's tool call ids its own; ends after a whole exchange."""
    from hermes_tui.core.transcript import parse_transcript

    raw = json.loads(DEMO_SESSION.read_text(encoding="utf-8"))
    out, copy = [raw[0]], 0
    while len(out) < count:
        for message in raw[1:]:
            message = json.loads(json.dumps(message))
            for call in message.get("tool_calls") or []:
                call["id"] = f"{call['id']}_{copy}"
            if message.get("tool_call_id"):
                message["tool_call_id"] = f"{message['tool_call_id']}_{copy}"
            out.append(message)
        copy += 1
    out = out[:count]
    while out[-1]["role"] == "tool" or out[-1].get("tool_calls"):
        out.pop()
    return parse_transcript(json.dumps(out))


class CpuBurner:
    """One CPU-bound process beside the benchmark (a busy machine: a build, a test run)."""

    def __enter__(self) -> CpuBurner:
        # Its output goes nowhere: holding the benchmark's pipes, it would keep a parent
        # waiting for their end if the run died before stopping it.
        self.proc = subprocess.Popen([sys.executable, "-c", BURN], stdin=subprocess.DEVNULL,
                                     stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        return self

    def __exit__(self, *exc) -> None:
        self.proc.kill()
        self.proc.wait()


def reply_typist(base):
    """The typist class for ``--during reply``, built on ``bench_ui_latency.Typist``."""

    class ReplyTypist(base):
        def during(self) -> int:
            return sum(s.replying for s in self.samples)

        def _run(self) -> None:
            letters = "abcdefghijklmnopqrstuvwxyz"
            deadline = time.monotonic() + self.deadline_s
            for ch in "start":
                self._press(ch)
            self._enter()
            while not self.screen.turns.replying:
                if time.monotonic() > deadline:
                    raise TimeoutError("the first reply never started")
                time.sleep(0.01)
            self.samples.clear()  # measured from here on

            typed = n = 0
            while self.during() < self.keys:
                if time.monotonic() > deadline:
                    raise TimeoutError(f"only {self.during()} keypresses while a reply streamed "
                                       f"in {self.deadline_s:.0f} s")
                if typed >= 3 and not self.screen.turns.busy:
                    self._enter()  # the next reply starts streaming
                    typed = 0
                else:
                    self._press(letters[n % len(letters)])
                    n += 1
                    typed += 1
                time.sleep(self.interval)

    return ReplyTypist
