"""Metrics and the per-delivery log line: one JSON line and one set of counters per decision.

``record_delivery`` is the single place a delivery is counted and logged; the push route
and the pull worker both call it right after ``receive_delivery``. Logs are structlog
JSON on stdout, configured once at startup; a request id (from ``X-Request-ID`` or
generated) rides on every line (``app.observability.logs`` configures the output).

Metrics work with several uvicorn workers through prometheus-client's multiprocess mode
when ``PROMETHEUS_MULTIPROC_DIR`` is set (``reminders serve --workers N`` sets it up).
The ledger-derived gauges are computed from the database at scrape time, so every
worker reports the same values and they always equal the ledger.
"""

from __future__ import annotations

import glob
import os
import tempfile
import time
from collections.abc import Mapping
from typing import Any, Protocol

import structlog
from prometheus_client import Counter, Histogram

from app.domain.errors import ProviderError
from app.domain.messages import Delivery, RenderedMessage, SendResult
from app.domain.ports import ChannelProvider
from app.domain.states import Outcome
from app.observability.logs import EventLog
from app.observability.tracing import span


class DeliveryDecision(Protocol):
    """What the receiver answered for one delivery (``app.services.receive.Answer``)."""

    @property
    def outcome(self) -> Outcome: ...
    @property
    def channel(self) -> str | None: ...
    @property
    def claimed(self) -> bool: ...
    @property
    def attempt(self) -> int | None: ...
    @property
    def reminder_id(self) -> str | None: ...
    @property
    def retry_after(self) -> float | None: ...
    @property
    def detail(self) -> str | None: ...


class SweepOutcome(Protocol):
    """What one sweep did (``app.services.sweep.SweepReport``)."""

    @property
    def enqueued(self) -> int: ...
    @property
    def messages(self) -> int: ...
    @property
    def republished(self) -> int: ...
    @property
    def remaining(self) -> int: ...
    @property
    def duration_ms(self) -> float: ...
    @property
    def error(self) -> str | None: ...


DELIVERIES = Counter(
    "reminders_deliveries",
    "Delivery decisions of the receiver, by queue, channel and outcome.",
    ["queue", "channel", "outcome"],
)
DELIVERY_SECONDS = Histogram(
    "reminders_delivery_duration_seconds",
    "Time to decide one delivery (claim to answer), by queue.",
    ["queue"],
    buckets=(0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30),
)
CLAIMS = Counter("reminders_claims", "Ledger rows claimed for an attempt.", ["channel"])
RECLAIMS = Counter(
    "reminders_reclaims",
    "Claims of a later attempt (attempt > 1): retries and expired leases taken over.",
    ["channel"],
)
PROVIDER_SECONDS = Histogram(
    "reminders_provider_latency_seconds",
    "Provider call latency, by provider, channel and result (ok or the error class).",
    ["provider", "channel", "result"],
    buckets=(0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 20, 30),
)
LEASES_OUTLIVED = Counter(
    "reminders_leases_outlived",
    "Sends that outlived their lease: a renewal refused (another worker holds the row now) "
    "or the send ended after the last renewed lease (a stalled process).",
    ["reason"],
)
PUSH_REFUSED = Counter(
    "reminders_push_refused", "Pushes refused before parsing (401, 413).", ["reason"]
)
EMAIL_EVENTS = Counter(
    "reminders_email_events",
    "Provider events received (new ones, not repeats), by provider and kind.",
    ["provider", "kind"],
)
PUSH_REFUSED_REASONS = ("unauthenticated", "too_large", "keys_unavailable")
SWEEP_SECONDS = Histogram(
    "reminders_sweep_duration_seconds",
    "Duration of one sweep.",
    buckets=(0.01, 0.05, 0.1, 0.5, 1, 5, 10, 30, 60, 120, 300, 840),
)
SWEEP_ENQUEUED = Counter("reminders_sweep_enqueued", "Reminders the sweep marked enqueued.")
SWEEP_MESSAGES = Counter("reminders_sweep_messages", "Messages the sweep published.")
SWEEP_ERRORS = Counter("reminders_sweep_errors", "Sweeps stopped by a queue refusal.")
SWEEP_REPUBLISHED = Counter(
    "reminders_sweep_republished",
    "Messages of sends not final whose queue message was overdue, published again.",
)

log = EventLog("reminders.delivery")  # the line per delivery, without structlog's layers
_LABEL_MAX = 64
# How loud each decision is, so log-level alerting sees failures: a retry or a refused
# message is a warning, a send that ended without delivery is an error. Only when this
# delivery made the decision (claimed): an old terminal row redelivered is routine.
_FAILURE_LEVELS = {
    Outcome.RETRY: "warning",
    Outcome.REJECTED: "warning",
    Outcome.TERMINAL: "error",
    Outcome.DEAD_LETTERED: "error",
}


def delivery_level(answer: DeliveryDecision) -> str:
    """The log level of one delivery decision's line."""
    level = _FAILURE_LEVELS.get(answer.outcome, "info")
    if level == "error" and not answer.claimed:
        return "info"
    return level


def _safe_detail(answer: DeliveryDecision) -> str | None:
    # A rejection's detail can quote the unusable payload; keep only its reason label.
    if answer.detail is None or answer.outcome != Outcome.REJECTED:
        return answer.detail
    return answer.detail.split(":", 1)[0]


def record_delivery(
    delivery: Delivery, answer: DeliveryDecision, duration: float, **request: object
) -> None:
    """Count and log one delivery decision (called by the push route and the pull worker).
    ``request``: the push route's method, route and status, making this line its request's
    access line too (one line per request)."""
    queue = delivery.queue[:_LABEL_MAX]
    channel = answer.channel or "none"
    decisions, seconds = _delivery_series(queue, channel, answer.outcome.value)
    decisions.inc()
    seconds.observe(duration)
    if answer.claimed:
        CLAIMS.labels(channel).inc()
        if (answer.attempt or 0) > 1:
            RECLAIMS.labels(channel).inc()
    level = delivery_level(answer)
    if not log.is_enabled_for(level):  # e.g. WARNING: no fields built for a line not written
        return
    log.log(
        level,
        "delivery",
        {
            "queue": queue,
            "message_id": delivery.message_id,
            "ledger_key": f"{answer.reminder_id}:{channel}" if answer.reminder_id else None,
            "outcome": answer.outcome.value,
            "ack": answer.outcome.acknowledges,
            "attempt": answer.attempt,
            "queue_attempt": delivery.attempt,
            "retry_after": answer.retry_after,
            "detail": _safe_detail(answer),
            "error_class": _safe_detail(answer) if answer.outcome in _FAILURE_LEVELS else None,
            "duration_ms": round(duration * 1000, 3),
            **request,
        },
    )


# The labelled series of each (queue, channel, outcome), looked up once: prometheus_client's
# labels() checks and locks on every call (~10% of record_delivery, the per-delivery cost).
# Only configured queues reach here (the push route answers 404 for any other name).
_SERIES: dict[tuple[str, str, str], tuple[Any, Any]] = {}


def _delivery_series(queue: str, channel: str, outcome: str) -> tuple[Any, Any]:
    key = (queue, channel, outcome)
    series = _SERIES.get(key)
    if series is None:
        series = (DELIVERIES.labels(queue, channel, outcome), DELIVERY_SECONDS.labels(queue))
        _SERIES[key] = series
    return series


def prime_series(channel_queues: Mapping[str, str]) -> None:
    """Export every labelled series an alert reads at zero from startup: an alert on
    ``rate(...)`` or ``increase(...)`` cannot fire on a series that does not exist yet, and
    the first event would otherwise look like no change. ``channel_queues``: channel → queue.
    """
    for reason in PUSH_REFUSED_REASONS:
        PUSH_REFUSED.labels(reason)
    for channel, queue in channel_queues.items():
        for outcome in Outcome:
            DELIVERIES.labels(queue[:_LABEL_MAX], channel, outcome.value)


AUTH_FAILURES = Counter(
    "reminders_auth_failures_total",
    "Failed credential checks (wrong or missing token, login, push signature), by credential.",
    ["credential"],
)
AUTH_THROTTLED = Counter(
    "reminders_auth_throttled_total",
    "Requests answered 429 because their client (or everyone) failed too many checks.",
    ["credential"],
)


def record_auth_failure(credential: str, *, throttled: bool) -> None:
    """Count a failed credential check, and whether it was answered 429."""
    AUTH_FAILURES.labels(credential).inc()
    if throttled:
        AUTH_THROTTLED.labels(credential).inc()


def record_auth_throttled(credential: str) -> None:
    """Count a request refused 429 before its credential was checked."""
    AUTH_THROTTLED.labels(credential).inc()


def record_push_refused(reason: str) -> None:
    """Count a push refused before parsing (the route already logs it)."""
    PUSH_REFUSED.labels(reason).inc()


def record_sweep(report: SweepOutcome) -> None:
    """Count one sweep and log its report."""
    SWEEP_SECONDS.observe(report.duration_ms / 1000)
    SWEEP_ENQUEUED.inc(report.enqueued)
    SWEEP_MESSAGES.inc(report.messages)
    SWEEP_REPUBLISHED.inc(report.republished)
    if report.error:
        SWEEP_ERRORS.inc()
    structlog.get_logger("reminders.sweep").info(
        "sweep",
        enqueued=report.enqueued,
        messages=report.messages,
        republished=report.republished,
        remaining=report.remaining,
        duration_ms=report.duration_ms,
        error=report.error,
    )


class InstrumentedProvider:
    """Wraps a channel provider to time every call; behaves exactly like the wrapped one."""

    def __init__(self, inner: ChannelProvider) -> None:
        self.inner = inner
        self.name = inner.name
        self.deduplicates = bool(getattr(inner, "deduplicates", False))
        self._span_attributes = {"reminders.provider": inner.name}  # built once, not per send

    async def send(
        self, message: RenderedMessage, *, idempotency_key: str, timeout: float
    ) -> SendResult:
        """Call the wrapped provider and observe its latency under its result."""
        started, result = time.perf_counter(), "ok"
        try:
            with span("reminders.provider.send", attributes=self._span_attributes):
                return await self.inner.send(
                    message, idempotency_key=idempotency_key, timeout=timeout
                )
        except ProviderError as error:
            result = error.error_class.value
            raise
        except BaseException:
            result = "error"
            raise
        finally:
            elapsed = time.perf_counter() - started
            PROVIDER_SECONDS.labels(self.name, message.channel, result).observe(elapsed)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)  # close(), settings, ... of the wrapped provider


def instrument_providers(providers: Mapping[str, ChannelProvider]) -> dict[str, ChannelProvider]:
    """Every provider wrapped for latency metrics (done once, at build time)."""
    return {channel: InstrumentedProvider(provider) for channel, provider in providers.items()}


def instrument_chains(
    chains: Mapping[str, tuple[ChannelProvider, ...]],
) -> dict[str, tuple[ChannelProvider, ...]]:
    """``instrument_providers`` for each channel's providers in order, one wrapper per
    provider object (a provider two channels share is wrapped once)."""
    wrapped: dict[int, ChannelProvider] = {}
    for chain in chains.values():
        for provider in chain:
            wrapped.setdefault(id(provider), InstrumentedProvider(provider))
    return {channel: tuple(wrapped[id(p)] for p in chain) for channel, chain in chains.items()}


FAILOVERS = Counter(
    "reminders_failovers_total",
    "Sends handed from a provider whose circuit was open to the next one, by channel and "
    "the provider handed from.",
    ["channel", "provider"],
)


def record_failover(channel: str, provider: str) -> None:
    """Count one send handed over from ``provider`` (failover)."""
    FAILOVERS.labels(channel, provider).inc()


def prepare_metrics_dir(workers: int) -> str | None:
    """Before uvicorn starts several workers: a clean ``PROMETHEUS_MULTIPROC_DIR`` they share.

    Keeps an operator-set directory (emptied of a previous run's files), else makes a fresh
    temporary one. Workers inherit the variable, so their counters land in that directory
    and ``/metrics`` merges them. One worker needs nothing.
    """
    directory = os.environ.get("PROMETHEUS_MULTIPROC_DIR")
    if workers <= 1 and not directory:
        return None
    if directory:
        os.makedirs(directory, exist_ok=True)
        mine = f"_{os.getpid()}.db"  # this process's live files (metrics defined at import)
        for stale in glob.glob(os.path.join(directory, "*.db")):
            if not stale.endswith(mine):
                os.remove(stale)
    else:
        directory = tempfile.mkdtemp(prefix="reminders-metrics-")
        os.environ["PROMETHEUS_MULTIPROC_DIR"] = directory
    return directory
