"""Smoke test: the real ``hermes-tui`` in a real terminal (tmux), as a person uses it.

The installed ``hermes-tui`` script starts in a detached tmux session on a private tmux
server, with a throwaway HERMES_TUI_HOME whose config.yaml makes the chat model the tiny
random-weight model (in-process MLX) and passes use the extractive summarizer. Keys go in
with ``tmux send-keys``; what the terminal shows comes back with ``tmux capture-pane``.
The test types a message, sees it and a streamed reply, reads the status bar's fields,
runs ``/usage``, quits with Ctrl+Q and checks that the process exited 0, that the terminal
was handed back (alternate screen and mouse reporting off) and that no traceback reached
the terminal or the log.

The tiny model never stops by itself and the app has no setting for the reply length, so a
reply is the app's full 1,024 tokens of noise (about 10 s on a 2-core machine): assertions
are about structure and numbers, never about the text.

tmux missing: a skip with the reason on a developer machine, a failure under CI (``CI`` set),
where ``.ci/run`` installs it, so the test can never silently stop running there.
"""

from __future__ import annotations

import re
import shlex
import time
from dataclasses import dataclass

import pytest
from support.tmux import _app_command, wait_for

from hermes_tui.store import Store

pytestmark = pytest.mark.integration

WINDOW = 4096          # context_length in the config: the status bar shows "… / 4,096"
START_TIMEOUT = 90.0   # the app on screen (imports mlx, opens the store)
REPLY_TIMEOUT = 180.0  # the first reply: model load + 1,024 generated tokens, streamed
STEP_TIMEOUT = 30.0
EXIT_TIMEOUT = 30.0    # quitting takes well under a second; past this the app is stuck
MESSAGE = "Hello from tmux"

# The status bar line: model, tokens / window, gauge + occupancy, passes [· N saved], activity,
# then the approval mode (with the step during a turn; "tools off" for a model without tools).
STATUS_RE = re.compile(
    r"^\s*(?P<model>\S+)\s+(?P<tokens>[\d,.]+k?) / (?P<window>[\d,.]+k?|window …)\s+"
    r"(?P<gauge>[▰▱]{8})\s+(?P<occupancy>\d+%|–)\s+"
    r"(?P<passes>\d+) pass(?:es)?(?: · (?P<saved>[\d,.]+k?) saved)?\s+(?P<activity>\S.*?)"
    r"(?:\s{2,}(?P<mode>read-only|ask|auto-edit|⚠ FULL AUTO|tools off)(?: · step (?P<step>\d+)/\d+)?)?\s*$"
)


def _number(text: str) -> int:
    return int(text.replace(",", ""))


@dataclass
class Status:
    model: str
    tokens: str
    window: str
    gauge: str
    occupancy: str
    passes: int
    saved: str | None
    activity: str
    mode: str | None = None
    step: str | None = None


def status_of(screen: str) -> Status | None:
    """The status bar in a captured screen (the last line that parses as one)."""
    for line in reversed(screen.splitlines()):
        match = STATUS_RE.match(line)
        if match:
            fields = match.groupdict()
            return Status(**{**fields, "passes": int(fields["passes"])})
    return None


def message_area(screen: str) -> list[str]:
    """The rows above the composer's top border: the message list."""
    lines = screen.splitlines()
    for i, line in enumerate(lines):
        if line.lstrip().startswith("╭"):
            return lines[:i]
    return lines


def test_hermes_tui_in_a_real_terminal(tmux, tmp_path, tiny_model, hf_offline_env):
    home = tmp_path / "hermes_home"
    home.mkdir()
    (home / "config.yaml").write_text(
        "model:\n"
        "  provider: mlx\n"
        f"  model: {tiny_model.fp32}\n"
        f"  context_length: {WINDOW}\n"
        "compression:\n"
        "  policy: per_exchange\n"  # a pass after the turn, which the test waits for
        "auxiliary:\n"
        "  compression:\n"
        "    provider: extractive\n"
    )
    # PYTHONFAULTHANDLER: a crash, or the SIGABRT sent to an app stuck at exit, prints every
    # thread's stack into the pane, where the failure message shows it.
    env = {"HERMES_TUI_HOME": str(home), **hf_offline_env, "PYTHONFAULTHANDLER": "1"}
    command = shlex.join(["env", *(f"{k}={v}" for k, v in env.items()), *_app_command()])
    tmux.start(command, cwd=tmp_path)  # not the repo: no stray .env or config is picked up

    # --- the app is up: an empty session, the composer focused, the status bar idle ----------
    screen = wait_for(tmux, lambda s: (st := status_of(s)) is not None and st.activity == "idle",
                      "the app's first screen", START_TIMEOUT)
    status = status_of(screen)
    assert (status.model, status.tokens, status.window, status.passes) == ("fp32", "0", "4,096", 0)
    assert "Message · Enter sends" in screen  # the composer's placeholder
    # The terminal is in application mode while the app runs (so the checks after quitting bite).
    assert tmux.pane("#{alternate_on} #{mouse_any_flag} #{mouse_sgr_flag}") == "1 1 1"

    # --- a message: shown at once, then a reply streams in ---------------------------------------
    tmux.keys(MESSAGE, literal=True)
    wait_for(tmux, lambda s: MESSAGE in s, "the typed text in the composer", STEP_TIMEOUT, poll=0.05)
    tmux.keys("Enter")
    seen_user = seen_streaming = False
    deadline = time.monotonic() + REPLY_TIMEOUT
    while True:
        screen = tmux.screen()
        area = message_area(screen)
        status = status_of(screen)
        if any(line.strip() == f"█ {MESSAGE}" for line in area):
            seen_user = True  # the user's message, as its own block in the message list
        if status is not None and status.activity.endswith("replying…"):
            user_row = next((i for i, line in enumerate(area) if line.strip() == f"█ {MESSAGE}"), -1)
            if any(line.strip() for line in area[user_row + 1:]):
                seen_streaming = True  # reply text on screen while the reply is still being written
        if status is not None and status.activity.startswith("last: "):
            break  # the reply landed and the turn's pass ran
        assert time.monotonic() < deadline, f"no finished reply after {REPLY_TIMEOUT:.0f} s; the screen:\n{screen}"
        assert tmux.pane("#{pane_dead}") == "0", f"the app exited during the reply:\n{tmux.everything()}"
        time.sleep(0.05)
    assert seen_user, "the user's message never showed in the message list"
    assert seen_streaming, "no reply text showed while the reply was being written"

    # --- the status bar after one turn: tokens, window, occupancy, passes -----------------------
    status = status_of(screen)
    assert status.model == "fp32" and status.window == "4,096"
    tokens = _number(status.tokens)
    assert tokens > 0
    threshold = int(WINDOW * 0.80)
    assert status.occupancy == f"{tokens / threshold * 100:.0f}%", status
    assert status.gauge.count("▰") == max(0, min(8, round(tokens / threshold * 8)))
    assert status.activity in ("last: nothing_to_absorb", "last: absorbed"), status  # the pass after the turn ran
    # As Hermes counts: a pass that found nothing to absorb is not a pass.
    assert status.passes == (1 if status.activity == "last: absorbed" else 0), status
    area = message_area(screen)
    reply_rows = [line for line in area if line.strip() and not line.lstrip().startswith("█")]
    assert reply_rows, f"no assistant text on screen:\n{screen}"

    # --- /usage -----------------------------------------------------------------------------------
    tmux.keys("/usage", literal=True)
    tmux.keys("Enter")
    screen = wait_for(tmux, lambda s: "█ last pass" in s, "the /usage note", STEP_TIMEOUT)
    rows = {}
    for line in message_area(screen):
        # The note (with its chart) is taller than the pane: drop the scrollbar at the right edge.
        line = re.sub(r"\s{2,}[▁▂▃▄▅▆▇█▔]\s*$", "", line)
        match = re.match(r"^\s*█ (\S.*?)\s{2,}(\S.*?)\s*$", line)
        if match:
            rows[match[1]] = match[2]
    assert "█ Usage" in screen
    assert rows["tokens in context"] == f"{tokens:,} (3 messages)"  # the system prompt, the message, the reply
    assert rows["context window"] == f"{WINDOW:,} tokens (config)"
    assert rows["compaction threshold"] == f"{threshold:,} tokens"
    assert re.fullmatch(r"\d+\.\d% of the compaction threshold", rows["occupancy"])
    assert round(float(rows["occupancy"].split("%")[0])) == int(status.occupancy.rstrip("%"))
    assert rows["micro passes"] == str(status.passes)
    assert rows["tokens saved"] == "0"  # one user message and one reply: nothing to absorb yet
    assert rows["last pass"] == status.activity.removeprefix("last: ")

    # --- quit: exit status 0, the terminal handed back, no traceback anywhere ----------------------
    tmux.keys("C-q")
    ended = tmux.wait_exit(EXIT_TIMEOUT)
    everything = tmux.everything()
    assert ended == "0", f"the app ended with {ended}:\n{everything}"
    # Left the alternate screen and turned mouse reporting off (tmux keeps the modes a dead
    # pane's process left set; the cursor flag is not kept, so it cannot be checked).
    assert tmux.pane("#{alternate_on} #{mouse_any_flag} #{mouse_sgr_flag} #{mouse_button_flag}") == "0 0 0 0"
    assert "Traceback" not in everything and "Error" not in everything, everything
    log = (home / "logs" / "agent.log").read_text()
    assert "Traceback" not in log and " ERROR " not in log, log[-4000:]
    assert "micro compaction telemetry" in log  # the pass ran and logged, as in normal use

    # What was on screen is what was stored, and quitting left the store readable.
    with Store(home / "state.db") as store:
        (session,) = store.list_sessions()
        stored = store.load_active(session.id)
    assert [m.role for m in stored] == ["system", "user", "assistant"] and stored[0].is_system_prompt
    assert stored[1].content == MESSAGE and stored[2].content.strip()
    assert session.title == MESSAGE
