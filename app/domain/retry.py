"""Capped exponential backoff with full jitter, and the retry delay for each failure class."""

from __future__ import annotations

import math
from dataclasses import dataclass
from datetime import UTC, datetime
from email.utils import parsedate_to_datetime
from typing import Protocol

# A Retry-After beyond a day is read as a day: a far-future date would park a send past its
# usefulness (and an absurd number would overflow datetime arithmetic).
MAX_RETRY_AFTER_SECONDS = 24 * 3600.0


class RandomSource(Protocol):
    """Anything with ``random() -> float in [0, 1)``; tests pass a seeded ``random.Random``."""

    def random(self) -> float: ...


@dataclass(frozen=True, slots=True)
class BackoffPolicy:
    """Delay before retry n is uniform in [0, min(cap, base * 2**(n-1))] (full jitter)."""

    base_seconds: float = 10.0
    cap_seconds: float = 3600.0
    # Never ask the queue to come back sooner than this: a zero delay would hot-loop.
    floor_seconds: float = 1.0

    def delay(self, attempt: int, rand: RandomSource) -> float:
        """Seconds to wait after the given (1-based) failed attempt."""
        exponent = min(max(attempt - 1, 0), 62)
        ceiling = min(self.cap_seconds, self.base_seconds * math.pow(2, exponent))
        return max(self.floor_seconds, rand.random() * ceiling)

    def rate_limited_delay(
        self, attempt: int, retry_after: float | None, rand: RandomSource
    ) -> float:
        """Honour a Retry-After (never below the floor); jittered backoff when there is none."""
        if retry_after is None:
            return self.delay(attempt, rand)
        return min(max(retry_after, self.floor_seconds), MAX_RETRY_AFTER_SECONDS)


def parse_retry_after(value: str | None, now: datetime) -> float | None:
    """Seconds a ``Retry-After`` header asks for: delta-seconds or an HTTP date (a past date
    means now), capped at a day; None when absent or not understood."""
    if value is None or not value.strip():
        return None
    text = value.strip()
    if text.isascii() and text.isdigit():
        return min(float(text), MAX_RETRY_AFTER_SECONDS)
    try:
        moment = parsedate_to_datetime(text)
    except (TypeError, ValueError):
        return None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return min(max(0.0, (moment - now).total_seconds()), MAX_RETRY_AFTER_SECONDS)
