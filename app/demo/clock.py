"""A clock that runs with the wall clock but can jump forward: the demo's time travel."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta


class TravelClock:
    """``datetime.now(UTC)`` plus an offset that only grows."""

    def __init__(self) -> None:
        self.offset = timedelta(0)

    def __call__(self) -> datetime:
        return datetime.now(UTC) + self.offset

    def travel_to(self, moment: datetime) -> None:
        """Jump forward to ``moment`` (never backwards: time only moves on)."""
        ahead = moment - self()
        if ahead > timedelta(0):
            self.offset += ahead
