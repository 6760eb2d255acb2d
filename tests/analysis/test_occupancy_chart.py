"""The occupancy chart, drawn by hand."""

from __future__ import annotations

from hermes_tui.analysis.occupancy_chart import bar_chart, buckets, sparkline, usage_chart


def test_bar_chart_draws_bars_eighths_and_the_high_mark():
    # Top 150% in 4 rows of 37.5 points; the high mark (100%) falls in the third row from the bottom.
    assert bar_chart([50, 100, 150], high_mark=100, height=4) == [
        "150% ┤  █",
        "100% ┼─▅█",
        "     │▃██",
        "     │███",
        "  0% └───",
        "      1 3 requests",
    ]


def test_buckets_keep_each_buckets_peak():
    assert buckets([1, 5, 2, 8, 3, 1], 3) == [5, 8, 3]
    assert buckets([1, 2], 3) == [1, 2]
    assert len(bar_chart(list(range(1000)), high_mark=100, width=40)[0]) == len("1000% ┤") + 40


def test_sparkline_and_empty_input():
    assert sparkline([0, 4, 8], top=8) == " ▄█"
    assert bar_chart([], high_mark=100) == [] and usage_chart([], 1000) == ""
    assert bar_chart([40], high_mark=100, height=2)[-1] == "      1 request"


def test_the_x_axis_numbers_never_run_together():
    # Two columns leave no room between "1" and "2": a space still parts them (not "12 requests").
    assert bar_chart([40, 60], high_mark=100, height=2)[-1] == "      1 2 requests"


def test_usage_chart_in_percent_of_the_threshold_or_tokens_while_unresolved():
    chart = usage_chart([500, 1500], 1000).splitlines()
    assert chart[0] == "occupancy per request (% of the threshold; peak 150.0%)"
    assert chart[1:] == bar_chart([50.0, 150.0], high_mark=100.0)
    tokens = usage_chart([500, 1500], None).splitlines()
    assert tokens[0] == "request size in tokens (window not resolved yet; peak 1,500)"
    assert not any("┼" in line for line in tokens)
