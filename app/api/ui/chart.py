"""The admin page's outcome chart as inline SVG geometry: stacked bars, one per hour.

Server-rendered so the page needs no chart library and no build step; the template draws
the rectangles this module places.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

WIDTH, HEIGHT = 720, 180
TOP, BOTTOM, LEFT = 10, 22, 36  # room for the axis labels
# Settled outcomes in calm colours, failures in warm ones, anything else grey.
COLOURS = {
    "sent": "#2e7d32",
    "duplicate": "#81c784",
    "suppressed": "#90a4ae",
    "cancelled": "#b0bec5",
    "stale": "#cfd8dc",
    "expired": "#ffb74d",
    "terminal": "#e64a19",
    "terminal_failure": "#e64a19",
    "dead_lettered": "#b71c1c",
    "dead": "#b71c1c",
    "failed": "#c62828",  # an attempt the provider refused or failed
    "address_suppressed": "#90a4ae",
    "lease_expired": "#cfd8dc",
    "pending": "#64b5f6",
    "sending": "#1565c0",
    "in_flight": "#1565c0",
}
OTHER = "#9e9e9e"


@dataclass(frozen=True, slots=True)
class Bar:
    """One outcome's slice of one hour's bar."""

    x: float
    y: float
    width: float
    height: float
    colour: str
    outcome: str
    count: int
    start: datetime


@dataclass(frozen=True, slots=True)
class Chart:
    """Everything the template draws."""

    width: int
    height: int
    bars: list[Bar]
    legend: list[tuple[str, str, int]]  # outcome, colour, total
    peak: int  # the count the top of the plot stands for
    ticks: list[tuple[float, str]]  # x, "HH:00" under every sixth hour


def colour_of(outcome: str) -> str:
    """The fill of an outcome."""
    return COLOURS.get(outcome, OTHER)


def stacked_bars(starts: list[datetime], series: dict[str, list[int]]) -> Chart:
    """Place one stacked bar per hour, outcomes in ``series`` order from the bottom up."""
    totals = [sum(counts[i] for counts in series.values()) for i in range(len(starts))]
    peak = max(totals, default=0) or 1
    slot = (WIDTH - LEFT) / max(len(starts), 1)
    scale = (HEIGHT - TOP - BOTTOM) / peak
    bars: list[Bar] = []
    for i, start in enumerate(starts):
        base: float = HEIGHT - BOTTOM
        for outcome, counts in series.items():
            if counts[i]:
                height = counts[i] * scale
                base -= height
                x = LEFT + i * slot + 1
                bars.append(
                    Bar(x, base, slot - 2, height, colour_of(outcome), outcome, counts[i], start)
                )
    legend = [(outcome, colour_of(outcome), sum(counts)) for outcome, counts in series.items()]
    ticks = [
        (LEFT + i * slot, start.strftime("%H:00"))
        for i, start in enumerate(starts)
        if start.hour % 6 == 0
    ]
    return Chart(WIDTH, HEIGHT, bars, legend, peak, ticks)
