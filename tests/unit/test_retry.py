"""Capped exponential backoff with full jitter, and the rate-limited delay."""

import math
import random

import pytest

from app.domain.retry import BackoffPolicy


class FixedRandom:
    """A random source that always returns the same fraction."""

    def __init__(self, value: float) -> None:
        self.value = value

    def random(self) -> float:
        return self.value


ALMOST_ONE = math.nextafter(1.0, 0.0)


@pytest.mark.parametrize(
    ("attempt", "ceiling"),
    [(1, 10.0), (2, 20.0), (3, 40.0), (4, 80.0), (5, 160.0), (6, 320.0), (7, 600.0), (50, 600.0)],
)
def test_ceiling_doubles_per_attempt_up_to_the_cap(attempt, ceiling):
    """The largest delay of attempt n is min(cap, base * 2**(n-1))."""
    policy = BackoffPolicy(base_seconds=10, cap_seconds=600)
    assert policy.delay(attempt, FixedRandom(ALMOST_ONE)) == pytest.approx(ceiling)


def test_delay_is_the_random_fraction_of_the_ceiling():
    """Full jitter: the delay is uniform in [0, ceiling], here exactly half of it."""
    policy = BackoffPolicy(base_seconds=10, cap_seconds=600)
    assert policy.delay(3, FixedRandom(0.5)) == 20.0


def test_zero_jitter_is_raised_to_the_floor():
    """A zero draw never asks the queue to come back at once (no hot loop)."""
    policy = BackoffPolicy(base_seconds=10, cap_seconds=600, floor_seconds=1.0)
    assert policy.delay(1, FixedRandom(0.0)) == 1.0


@pytest.mark.parametrize("attempt", [0, -3])
def test_attempts_below_one_use_the_first_ceiling(attempt):
    """Attempt numbers below 1 behave like the first attempt instead of shrinking the ceiling."""
    policy = BackoffPolicy(base_seconds=10, cap_seconds=600)
    assert policy.delay(attempt, FixedRandom(ALMOST_ONE)) == pytest.approx(10.0)


def test_huge_attempt_numbers_do_not_overflow():
    """An absurd attempt count still yields the cap, not an overflow error."""
    policy = BackoffPolicy(base_seconds=10, cap_seconds=3600)
    assert policy.delay(10**9, FixedRandom(ALMOST_ONE)) == pytest.approx(3600.0)


def test_seeded_jitter_stays_within_floor_and_ceiling_and_varies():
    """Many seeded draws all land in [floor, ceiling] and are not all the same."""
    policy = BackoffPolicy(base_seconds=10, cap_seconds=600, floor_seconds=1.0)
    rand = random.Random(99)
    for attempt in range(1, 12):
        ceiling = min(600.0, 10.0 * 2 ** (attempt - 1))
        delays = [policy.delay(attempt, rand) for _ in range(200)]
        assert all(1.0 <= d <= ceiling for d in delays)
        assert len(set(delays)) > 100


def test_same_seed_gives_the_same_delays():
    """Jitter depends only on the injected random source: reproducible in tests."""
    policy = BackoffPolicy()
    first = [policy.delay(n, random.Random(7)) for n in range(1, 10)]
    second = [policy.delay(n, random.Random(7)) for n in range(1, 10)]
    assert first == second


def test_rate_limited_delay_honours_the_provider_retry_after():
    """A provider's Retry-After wins even when it is above the backoff cap."""
    policy = BackoffPolicy(base_seconds=10, cap_seconds=60)
    assert policy.rate_limited_delay(1, 120.0, FixedRandom(ALMOST_ONE)) == 120.0


def test_rate_limited_delay_never_goes_below_the_floor():
    """A Retry-After of zero still waits at least the floor."""
    policy = BackoffPolicy(floor_seconds=1.0)
    assert policy.rate_limited_delay(1, 0.0, FixedRandom(0.9)) == 1.0


def test_rate_limited_without_retry_after_falls_back_to_backoff():
    """Throttling without a hint is retried like a transient failure."""
    policy = BackoffPolicy(base_seconds=10, cap_seconds=600)
    assert policy.rate_limited_delay(2, None, FixedRandom(0.5)) == 10.0
