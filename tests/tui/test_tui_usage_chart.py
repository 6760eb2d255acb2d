"""``/usage`` draws occupancy over the session: one bar per chat request, the threshold across.

The real app (``App.run_test``) with the tiny in-process MLX chat model.
"""

from __future__ import annotations

from support.chat_app import SIZE, app_for, app_test, notes, settle, type_and_send, until


@app_test
async def test_usage_draws_occupancy_per_request_with_the_high_mark(config, store):
    app = app_for(config, store)
    async with app.run_test(size=SIZE) as pilot:
        screen = app.screen
        for text in ("Hello there", "And a second question"):
            await type_and_send(pilot, text)
            await settle(pilot, screen)
        session = screen.session
        assert len(session.requests) == 2
        # What each request carried, by our count: the second one holds the first reply too.
        assert 0 < session.requests[0] < session.requests[1] <= session.conv.total_tokens
        # The tiny model's chat template has no tools: the first turn says so in a note of its own.
        await type_and_send(pilot, "/usage")
        await until(pilot, lambda: usage_notes(screen), "the usage note")
        text = usage_notes(screen)[0].text
        threshold = session.compactor.ctx.window.threshold_tokens
        peak = 100 * session.requests[1] / threshold
        assert f"occupancy per request (% of the threshold; peak {peak:.1f}%)" in text
        chart = text.split("occupancy per request", 1)[1].splitlines()
        assert any("100% ┼" in line for line in chart)  # the high mark
        assert any("█" in line or any(block in line for block in "▁▂▃▄▅▆▇") for line in chart)
        assert chart[-1].endswith(" 1 2 requests")


def usage_notes(screen):
    return [note for note in notes(screen) if note.note_title == "Usage"]
