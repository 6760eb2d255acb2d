"""Screenshots of the main screens, taken from the app itself (SVG, as Textual saves them).

    uv run python assets/make_screenshots.py [--out assets]

Re-runnable and offline: a throwaway home (``HERMES_TUI_HOME``, and a Hugging Face cache of
its own, so no model of this machine shows), a config whose chat model is an endpoint on
127.0.0.1 that is never called and whose passes use the built-in extractive summarizer, and
sessions made from the bundled demo session (a real agent session): the first 24 of its
messages after a micro pass in a 12K window (so the chat shows the marker with the rolling
summary after the task) and two more sessions for the sessions screen. The app runs headless under
``App.run_test`` at 110x34; each screen is opened as a user would open it and saved with
``App.save_screenshot``. What differs between runs is only what the app shows of the clock
(when a session was last used).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import shutil
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

DEMO_SESSION = REPO / "hermes_tui" / "assets" / "demo_session.json"
SIZE = (110, 34)
CHAT_MESSAGES = 24   # of the demo session: a task, its first tool exchanges, a reply
SCREENS = ("chat", "sessions", "models", "bench", "settings")
CONFIG = """\
model:
  provider: openai-api
  base_url: http://127.0.0.1:9/v1
  model: qwen2.5-coder-7b-instruct
  context_length: 12288
compression:
  policy: per_exchange  # a pass after the first exchanges, so the chat shows its marker
auxiliary:
  compression:
    provider: extractive
"""


def prepare(home: Path) -> str:
    """The home's config and sessions; returns the id of the compacted chat."""
    from hermes_tui.config import load_config
    from hermes_tui.core.transcript import parse_transcript
    from hermes_tui.providers.extractive.summarizer import ExtractiveSummarizer
    from hermes_tui.session.wiring import open_session
    from hermes_tui.store import Store

    (home / "config.yaml").write_text(CONFIG, encoding="utf-8")
    config = load_config(home / "config.yaml")
    messages = parse_transcript(DEMO_SESSION.read_text(encoding="utf-8"), source=str(DEMO_SESSION))
    with Store(home / "state.db") as store:
        store.create_session("release notes draft")
        store.create_session("flaky test in CI")
        session = open_session(config, store, title="demo: an agent session, compacting",
                               summarizer=ExtractiveSummarizer())
        session.conv.extend(messages[:CHAT_MESSAGES])
        store.flush(session.info.id, session.conv.messages)
        session.resolve_context_window()
        reports = session.finalize_turn()
        if not any(r.kind == "micro" and r.outcome in ("absorbed", "defrag") for r in reports):
            raise SystemExit(f"make_screenshots: no marker to show: {reports}")
        return session.info.id


async def shoot(home: Path, session_id: str, out: Path) -> list[Path]:
    from hermes_tui.config import load_config
    from hermes_tui.store import Store
    from hermes_tui.tui.app import HermesApp
    from hermes_tui.tui.screens.chat import ChatScreen
    from hermes_tui.tui.widgets.composer import Composer
    from hermes_tui.tui.widgets.message_views import MarkerMessage
    from hermes_tui.tui.widgets.messages import MessageList

    written = []
    config = load_config(home / "config.yaml")
    with Store(home / "state.db") as store:
        app = HermesApp(config, store, session_id=session_id, config_path=home / "config.yaml")
        async with app.run_test(size=SIZE) as pilot:
            while not isinstance(app.screen, ChatScreen):
                await pilot.pause(0.05)
            chat = app.screen
            chat.query_one(Composer).cursor_blink = False  # the same frame every run: cursor shown
            await settled(app, pilot)
            # The marker (the rolling summary) follows the task at the top of the session.
            chat.query_one(MessageList).scroll_to_widget(chat.query_one(MarkerMessage), animate=False, top=True)
            await settled(app, pilot)
            written.append(save(app, out, "chat"))
            for name in SCREENS[1:]:
                if name == "sessions":
                    app.show_sessions()
                else:
                    app.open_tool_screen(name)
                await settled(app, pilot)
                written.append(save(app, out, name))
                app.pop_screen()
                await pilot.pause(0.1)
            app.exit()
    return written


async def settled(app, pilot, *, step: float = 0.2, tries: int = 50) -> None:
    """Wait until two frames in a row are the same (a loaded machine draws a screen in steps:
    its footer's keys, for one, come after its first frame)."""
    last = None
    for _ in range(tries):
        await pilot.pause(step)
        frame = app.export_screenshot()
        if frame == last:
            return
        last = frame


def save(app, out: Path, name: str) -> Path:
    return Path(app.save_screenshot(filename=f"{name}.svg", path=str(out)))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=Path(__file__).resolve().parent,
                        help="folder for the SVG files (default: this folder, assets/)")
    args = parser.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    # A fixed place, not a random one: the settings screen shows the config's path.
    tmp = Path(tempfile.gettempdir()) / "hermes-tui-screenshots"
    shutil.rmtree(tmp, ignore_errors=True)
    home = tmp / "home"
    home.mkdir(parents=True)
    try:
        # Before any hermes_tui import: paths and the hub read these.
        os.environ.update({
            "HERMES_TUI_HOME": str(home), "HERMES_HOME": str(tmp / "hermes-agent"),
            "HF_HOME": str(tmp / "hf"), "HF_HUB_OFFLINE": "1",
        })
        os.environ.pop("OPENAI_API_KEY", None)
        session_id = prepare(home)
        for path in asyncio.run(shoot(home, session_id, args.out)):
            print(path)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
