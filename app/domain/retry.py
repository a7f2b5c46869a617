"""Capped exponential backoff with full jitter, and the retry delay for each failure class."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Protocol


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
        """Honour the provider's Retry-After; fall back to backoff when it gave none."""
        jittered = self.delay(attempt, rand)
        if retry_after is None:
            return jittered
        return max(retry_after, self.floor_seconds)
