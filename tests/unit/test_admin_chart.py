"""The admin page's outcome chart: stacked bars in proportion, empty hours drawn as nothing."""

from datetime import UTC, datetime, timedelta

from app.api.ui.chart import BOTTOM, HEIGHT, TOP, stacked_bars

STARTS = [datetime(2026, 11, 30, 17, tzinfo=UTC) + timedelta(hours=i) for i in range(3)]


def test_outcomes_stack_bottom_up_and_the_busiest_hour_fills_the_plot():
    """Heights are proportional to counts; the tallest bar reaches the top of the plot."""
    chart = stacked_bars(STARTS, {"dead": [0, 1, 0], "sent": [2, 3, 0]})
    bars = [(bar.outcome, bar.count, bar.start.hour) for bar in chart.bars]
    assert bars == [("sent", 2, 17), ("dead", 1, 18), ("sent", 3, 18)]
    first, dead, sent = chart.bars
    assert chart.peak == 4 and dead.height * 3 == sent.height
    assert dead.y + dead.height == HEIGHT - BOTTOM  # the first outcome sits on the axis
    assert round(sent.y, 6) == TOP and first.height * 3 == sent.height * 2
    assert chart.legend == [("dead", "#b71c1c", 1), ("sent", "#2e7d32", 5)]
    assert [label for _, label in chart.ticks] == ["18:00"]  # every sixth hour is labelled


def test_no_sends_draw_no_bars_and_a_one_count_scale():
    """With nothing to show there are no rectangles and no division by zero."""
    chart = stacked_bars(STARTS, {})
    assert chart.bars == [] and chart.peak == 1 and chart.legend == []
