"""The session's counters (micro passes, tokens saved) as the status bar shows them survive a
settings save (the session is reopened with new clients) and a resume in a new app, including
passes that failed on an exchange and left no marker to carry them (the real store, the real app)."""

from __future__ import annotations

from support.chat_app import (
    FailingSummarizer,
    app_for,
    app_test,
    label,
    settle,
    store_session,
    type_and_send,
    until,
)

from hermes_tui.tui.widgets.composer import Composer


def counters(app) -> tuple[int, int]:
    usage = app.screen.session.usage()
    return usage["passes"], usage["tokens_saved"]


@app_test
async def test_counters_survive_a_settings_save_and_a_resume(config, store):
    session_id = store_session(config, store, compacted=True)  # one absorbed pass, in its marker
    app = app_for(config, store, session_id=session_id, summarizer=FailingSummarizer())
    async with app.run_test() as pilot:
        screen = app.screen
        first = counters(app)
        assert first[0] == 1 and first[1] > 0
        await type_and_send(pilot, "Carry on.")
        await settle(pilot, screen)
        assert screen.passes.last_outcome == "summarize_failed"  # it found an exchange: a pass
        before = counters(app)
        assert before == (2, first[1])
        shown = label(screen, "passes")
        assert shown.startswith("2 passes")

        app.reconfigure(app.config)  # what saving the settings does
        await until(pilot, lambda: app.screen is not screen and bool(app.screen.query(Composer)),
                    "the session reopened")
        assert counters(app) == before
        assert label(app.screen, "passes") == shown

    resumed = app_for(config, store, session_id=session_id)
    async with resumed.run_test() as pilot:
        await until(pilot, lambda: bool(resumed.screen.query(Composer)), "the resumed session")
        assert counters(resumed) == before
