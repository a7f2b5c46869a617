"""The per-provider circuit breaker of failover (``app.domain.failover``), on a given clock."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from app.domain.failover import BreakerPolicy, CircuitBreaker, CircuitState

T0 = datetime(2026, 12, 2, 9, 0, tzinfo=UTC)
POLICY = BreakerPolicy(
    failures=3, error_rate=0.5, min_calls=10, window=timedelta(seconds=60),
    cooldown=timedelta(seconds=30),
)  # fmt: skip


def at(seconds: float) -> datetime:
    return T0 + timedelta(seconds=seconds)


def test_a_run_of_transient_failures_opens_the_circuit():
    """Three failures in a row open it; a success in between starts the count again."""
    breaker = CircuitBreaker(POLICY)
    for second, failed in enumerate([True, True, False, True, True]):
        breaker.record(at(second), failed=failed)
    assert breaker.state(at(5)) == CircuitState.CLOSED
    breaker.record(at(6), failed=True)
    assert breaker.state(at(6)) == CircuitState.OPEN
    assert not breaker.allow(at(7))
    assert breaker.seconds_until_probe(at(7)) == 29


def test_an_error_rate_over_the_window_opens_the_circuit():
    """Never three in a row, but six of eleven calls within a minute failed."""
    breaker = CircuitBreaker(POLICY)
    for second in range(10):
        breaker.record(at(second), failed=second % 2 == 0)
    assert breaker.state(at(10)) == CircuitState.CLOSED  # the rate is judged on a failure
    breaker.record(at(10), failed=True)
    assert breaker.state(at(10)) == CircuitState.OPEN


def test_calls_older_than_the_window_do_not_count_towards_the_rate():
    """Five failures a while ago and five successes now: 0 of 5 in the window."""
    breaker = CircuitBreaker(POLICY)
    for second in range(5):
        breaker.record(at(second), failed=second % 2 == 0)
    for second in range(100, 105):
        breaker.record(at(second), failed=second == 100)
    assert breaker.state(at(105)) == CircuitState.CLOSED


def test_after_the_cooldown_one_probe_closes_or_reopens_it():
    """Half open: one call goes through (a second waits); its success closes the circuit,
    its failure opens it for another cooling period."""
    breaker = CircuitBreaker(POLICY)
    for second in range(3):
        breaker.record(at(second), failed=True)
    assert breaker.state(at(32)) == CircuitState.HALF_OPEN
    assert breaker.allow(at(32))
    assert not breaker.allow(at(33))  # the probe is under way
    breaker.record(at(34), failed=True)
    assert breaker.state(at(35)) == CircuitState.OPEN
    assert not breaker.allow(at(63))
    assert breaker.allow(at(64))
    breaker.record(at(65), failed=False)
    assert breaker.state(at(65)) == CircuitState.CLOSED
    assert breaker.allow(at(66)) and breaker.allow(at(66))


def test_a_probe_that_never_reports_back_is_given_up_after_a_cooldown():
    """The probe's delivery never called the provider (busy, suppressed): another may go."""
    breaker = CircuitBreaker(POLICY)
    for second in range(3):
        breaker.record(at(second), failed=True)
    assert breaker.allow(at(40))
    assert not breaker.allow(at(69))
    assert breaker.allow(at(70))
