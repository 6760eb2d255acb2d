"""Screen snapshots of the chat (pytest-textual-snapshot): a stored session with a
compaction marker and tool calls, resumed and pictured before anything is sent, so
no model output and nothing time-dependent is in the picture.

Update after an intended change of look: ``uv run pytest tests/tui/test_tui_snapshots.py --snapshot-update``.
"""

from __future__ import annotations

import pytest
from support.chat_app import REPLY, make_config, store_session

from hermes_tui.store import Store
from hermes_tui.tui.app import HermesApp
from hermes_tui.tui.widgets.composer import Composer
from hermes_tui.tui.widgets.message_views import MarkerMessage, ToolCallView


@pytest.fixture
def app(tiny_model, hf_offline_env, hermes_home, tmp_path):
    config = make_config(tiny_model)
    with Store(tmp_path / "state.db") as store:
        session_id = store_session(config, store, compacted=True)
        yield HermesApp(config, store, session_id=session_id, reply_tokens=REPLY)


async def still(pilot) -> None:
    await pilot.pause()
    pilot.app.screen.query_one(Composer).cursor_blink = False
    await pilot.pause()


async def opened(pilot) -> None:
    """The marker opened with its archived originals, and one tool call opened."""
    await still(pilot)
    marker = pilot.app.screen.query_one(MarkerMessage)
    marker.query_one("Collapsible").collapsed = False
    pilot.app.screen.query(ToolCallView)[1].collapsed = False
    marker.query_one("#show-archived").press()
    for _ in range(100):
        await pilot.pause(0.02)
        if marker.query(".archived .message"):
            break
    marker.scroll_visible(animate=False, top=True)
    await pilot.pause()


def test_chat_80x24(snap_compare, app):
    assert snap_compare(app, terminal_size=(80, 24), run_before=still)


def test_chat_160x48(snap_compare, app):
    assert snap_compare(app, terminal_size=(160, 48), run_before=still)


def test_chat_marker_and_tool_call_opened_160x48(snap_compare, app):
    assert snap_compare(app, terminal_size=(160, 48), run_before=opened)
