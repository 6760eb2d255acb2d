"""The garbage collector in the app (``tui.heap``): held off until the first screen, then
full collections only between keys.

The real app under ``App.run_test`` and the real collector (``gc.callbacks`` see each
collection); the figures are ``benchmarks/bench_startup.py``'s and
``bench_ui_latency.py --contention``'s.
"""

from __future__ import annotations

import gc
from pathlib import Path

import pytest
from support.chat_app import app_for, app_test, make_config, until

from hermes_tui.store import Store
from hermes_tui.tui import app as app_module
from hermes_tui.tui import heap
from hermes_tui.tui.app import HermesApp
from hermes_tui.tui.heap import FullCollections
from hermes_tui.tui.screens.chat import ChatScreen

SIZE = (100, 30)
APP_CSS = Path(app_module.__file__).parent / "app.tcss"  # a subclass would look beside itself


@pytest.fixture
def config(tiny_model, hf_offline_env, hermes_home):
    return make_config(tiny_model)


@pytest.fixture
def unsettled(monkeypatch):
    """The heap as a fresh process has it: not settled yet (the module settles once)."""
    monkeypatch.setattr(heap, "_settled", False)
    monkeypatch.setattr(heap, "_held", False)
    threshold = gc.get_threshold()
    yield
    heap.release_collections()
    gc.enable()
    gc.set_threshold(*threshold)


class CollectorAtFirstFrame(HermesApp):
    CSS_PATH = APP_CSS
    enabled_at_first_frame: bool | None = None

    def _display(self, screen, renderable) -> None:
        super()._display(screen, renderable)
        if self.enabled_at_first_frame is None and isinstance(screen, ChatScreen):
            self.enabled_at_first_frame = gc.isenabled()


@app_test
async def test_the_collector_is_off_until_the_chat_screen_is_up_then_on(config, tmp_path, unsettled):
    heap.hold_collections()
    assert not gc.isenabled()
    with Store(tmp_path / "state.db") as store:
        app = CollectorAtFirstFrame(config, store, reply_tokens=6)
        async with app.run_test(size=SIZE) as pilot:
            await until(pilot, lambda: app.enabled_at_first_frame is not None, "the first frame")
            assert app.enabled_at_first_frame is False
            await until(pilot, gc.isenabled, "the collector back on", timeout=heap.HOLD_LIMIT_S + 30)


@app_test
async def test_the_collector_comes_back_when_the_first_screen_is_not_the_chat(config, tmp_path, unsettled):
    bad = tmp_path / "broken.json"
    bad.write_text("{not json", encoding="utf-8")
    heap.hold_collections()
    with Store(tmp_path / "state.db") as store:
        app = app_for(config, store, import_path=bad)
        async with app.run_test(size=SIZE) as pilot:
            await until(pilot, lambda: type(app.screen).__name__ == "FirstRunScreen", "the can't-open screen")
            assert not any(isinstance(s, ChatScreen) for s in app.screen_stack)
            await until(pilot, gc.isenabled, "the collector back on", timeout=heap.HOLD_LIMIT_S + 30)


def test_the_apps_command_turns_the_collector_back_on_when_the_app_cannot_start(hermes_home, unsettled):
    """An error before any screen (here a config the app refuses) must not leave it off."""
    from hermes_tui.cli import main

    (hermes_home / "config.yaml").write_text("compression:\n  threshold: 7\n", encoding="utf-8")
    assert main([]) == 2
    assert gc.isenabled()


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def full_collections():
    """The oldest generation's collections as they happen."""
    seen: list[int] = []

    def callback(phase, info):
        if phase == "stop" and info["generation"] == 2:
            seen.append(1)

    gc.callbacks.append(callback)
    yield seen
    gc.callbacks.remove(callback)


def test_a_full_collection_waits_for_a_pause_in_the_typing(full_collections):
    clock = Clock()
    collections = FullCollections(clock)
    clock.now += FullCollections.EVERY_S - 1
    assert not collections.tick()                                   # not due yet
    clock.now += 2
    collections.typed()
    assert not collections.tick() and not full_collections          # due, but a key just came
    clock.now += FullCollections.QUIET_S
    assert collections.tick() and full_collections                  # the typing paused: it runs
    clock.now += 1
    assert not collections.tick()                                   # and is not due again at once


def test_typing_that_never_pauses_still_gets_one_after_the_latest(full_collections):
    clock = Clock()
    collections = FullCollections(clock)
    for _ in range(int(FullCollections.LATEST_S / 0.5) - 1):
        clock.now += 0.5
        collections.typed()
        assert not collections.tick()
    clock.now += 0.5
    collections.typed()
    assert collections.tick() and full_collections


def test_pythons_own_full_collections_are_off_while_they_are_ours():
    before = gc.get_threshold()
    collections = FullCollections()
    collections.start()
    try:
        assert gc.get_threshold() == (before[0], before[1], heap.NEVER)
    finally:
        collections.stop()
    assert gc.get_threshold() == before


@app_test
async def test_the_app_notes_each_key_and_asks_for_a_full_collection_every_second(config, tmp_path):
    with Store(tmp_path / "state.db") as store:
        app = app_for(config, store)
        async with app.run_test(size=SIZE) as pilot:
            await until(pilot, lambda: isinstance(app.screen, ChatScreen), "the chat")
            before = app.full_collections.last_key
            await pilot.press("h")
            assert app.full_collections.last_key > before
            app.full_collections.last_full -= FullCollections.EVERY_S  # due
            app.full_collections.last_key -= FullCollections.QUIET_S   # and quiet
            await until(pilot, lambda: app.full_collections.runs == 1, "a full collection", timeout=30)
            assert gc.get_threshold()[2] == heap.NEVER
    assert gc.get_threshold()[2] != heap.NEVER  # the app is gone: Python's own again
