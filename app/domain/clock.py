"""The wall clock: the one function that reads the time; everything else takes a clock."""

from __future__ import annotations

from datetime import UTC, datetime


def utc_now() -> datetime:
    """The wall clock, in UTC."""
    return datetime.now(UTC)
