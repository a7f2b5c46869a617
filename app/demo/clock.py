"""A clock that runs with the wall clock but can jump forward: the demo's time travel."""

from __future__ import annotations

from datetime import datetime, timedelta

from app.domain.clock import utc_now


class TravelClock:
    """The wall clock plus an offset that only grows."""

    def __init__(self) -> None:
        self.offset = timedelta(0)

    def __call__(self) -> datetime:
        return utc_now() + self.offset

    def travel_to(self, moment: datetime) -> None:
        """Jump forward to ``moment`` (never backwards: time only moves on)."""
        ahead = moment - self()
        if ahead > timedelta(0):
            self.offset += ahead
