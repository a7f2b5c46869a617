"""Failover between the providers of one channel: which failures prove a message was never
accepted, and a circuit breaker per provider.

Plain data and plain functions: the receiver (``services/failover.py``) asks the breaker
before choosing a provider and tells it how each call ended; the ledger rule that makes a
second provider safe (``db/ledger_rules.may_hand_over`` and ``others_handed_over``) reads
``PROVES_NOT_ACCEPTED`` and ``FAILED_OVER``. The breaker lives in memory, one per provider
per process: replicas each learn on their own that a provider is down.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass
from datetime import datetime, timedelta
from enum import StrEnum

# The outcome of a ledger row handed over to the next provider of its channel.
FAILED_OVER = "failed_over"
# The error class of a row handed over before any attempt: its provider's circuit was open.
CIRCUIT_OPEN = "circuit_open"

# Error classes (``ProviderError.detail_class``) that prove the provider did not accept the
# message: the request never reached it (connect, TLS, DNS), or it answered with a refusal
# before accepting (an HTTP 408/429/5xx, an SMTP 4xx or a failure before DATA). Not here,
# so never proof: ``unknown_outcome`` (a timeout or disconnect after the request was sent),
# ``unclassified`` (a provider bug), ``idempotency_in_progress`` (the provider is still
# working on the same key), and any class a provider adds later until it is listed.
PROVES_NOT_ACCEPTED = frozenset(
    {
        CIRCUIT_OPEN,
        "connect_error",
        "connect_timeout",
        "tls_error",
        "provider_4xx",
        "provider_5xx",
        "provider_auth",
        "provider_account",
        "rate_limited",
        "smtp_4xx",
        "smtp_auth",
        "smtp_connect_error",
        "smtp_connect_refused",
        "smtp_disconnected",
        "smtp_timeout",
        "smtp_tls",
    }
)


class CircuitState(StrEnum):
    """Whether a provider gets calls."""

    CLOSED = "closed"  # healthy: every call goes through
    OPEN = "open"  # failing: calls go to the next provider until the cooling period ends
    HALF_OPEN = "half_open"  # cooled: one probe call decides between closed and open

    @property
    def gauge(self) -> int:
        """The value of the circuit state gauge: 0 closed, 1 half open, 2 open."""
        return {"closed": 0, "half_open": 1, "open": 2}[self.value]


@dataclass(frozen=True, slots=True)
class BreakerPolicy:
    """When a circuit opens and how long it stays open."""

    # Opens after this many transient failures in a row...
    failures: int = 5
    # ...or when at least ``min_calls`` calls in the last ``window`` failed at this rate.
    error_rate: float = 0.5
    min_calls: int = 20
    window: timedelta = timedelta(seconds=60)
    # Open this long, then one probe call (half open).
    cooldown: timedelta = timedelta(seconds=30)


class CircuitBreaker:
    """One provider's circuit, in this process's memory."""

    def __init__(self, policy: BreakerPolicy) -> None:
        self.policy = policy
        self._open_since: datetime | None = None
        self._probe_at: datetime | None = None  # the half-open probe under way, if any
        self._in_a_row = 0
        self._calls: deque[tuple[datetime, bool]] = deque()  # (when, failed) in the window

    def state(self, now: datetime) -> CircuitState:
        """The circuit as it stands at ``now``."""
        if self._open_since is None:
            return CircuitState.CLOSED
        if now < self._open_since + self.policy.cooldown:
            return CircuitState.OPEN
        return CircuitState.HALF_OPEN

    def allow(self, now: datetime) -> bool:
        """May a call start now? Closed: yes. Half open: one probe at a time (a probe that
        never reported back is given up after a cooling period). Open: no."""
        state = self.state(now)
        if state == CircuitState.CLOSED:
            return True
        if state == CircuitState.OPEN:
            return False
        if self._probe_at is not None and now < self._probe_at + self.policy.cooldown:
            return False
        self._probe_at = now
        return True

    def seconds_until_probe(self, now: datetime) -> float:
        """How long until the circuit lets a probe through (0 when it would now)."""
        if self._open_since is None:
            return 0.0
        return max(0.0, (self._open_since + self.policy.cooldown - now).total_seconds())

    def record(self, now: datetime, *, failed: bool) -> None:
        """How a call ended: ``failed`` for a transient failure (an error the provider
        answers for; a refused recipient is not one)."""
        self._calls.append((now, failed))
        while self._calls and self._calls[0][0] <= now - self.policy.window:
            self._calls.popleft()
        if not failed:
            self._in_a_row = 0
            self._open_since = self._probe_at = None
            return
        self._in_a_row += 1
        if self._open_since is not None:  # a failed probe (or a call already under way)
            self._open_since, self._probe_at = now, None
        elif self._in_a_row >= self.policy.failures or self._rate_exceeded():
            self._open_since = now

    def _rate_exceeded(self) -> bool:
        calls = len(self._calls)
        if calls < self.policy.min_calls:
            return False
        failed = sum(1 for _, bad in self._calls if bad)
        return failed / calls >= self.policy.error_rate
