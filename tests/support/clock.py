"""An injectable clock: tests move time instead of sleeping."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta


class FakeClock:
    """Returns a fixed instant until told to move; callable like ``datetime.now(UTC)``."""

    def __init__(self, start: datetime | None = None) -> None:
        self.now = start or datetime(2026, 8, 10, 9, 0, tzinfo=UTC)

    def __call__(self) -> datetime:
        return self.now

    def advance(self, **delta: float) -> datetime:
        """Move forward by ``timedelta(**delta)``; returns the new instant."""
        self.now += timedelta(**delta)
        return self.now

    def set(self, moment: datetime) -> None:
        """Jump to an instant."""
        self.now = moment
