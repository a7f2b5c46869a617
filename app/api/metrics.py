"""``GET /metrics``: process counters plus the ledger gauges of the last snapshot.

Closed by default: outside dev mode ``REMINDERS_METRICS_TOKEN`` is required as a bearer
token unless ``REMINDERS_METRICS_PUBLIC=true`` opens the route. A scrape never touches the
database: the ledger gauges and ``reminders_audit_violations`` (per invariant) come from
the snapshot one background task takes every ``REMINDERS_METRICS_INTERVAL_SECONDS``
(``services/ledger_metrics.py``); ``reminders_ledger_snapshot_age_seconds`` says how old it
is, and ``reminders_ledger_up 0`` that the last reading failed (or none was taken yet).
With ``PROMETHEUS_MULTIPROC_DIR`` set, the counters and histograms of every worker process
are merged (prometheus-client multiprocess mode).

Every series an alert in docs/operations.md (and deploy/prometheus/alerts.yml) reads exists
from the first scrape: open dead letters at zero for each reason, reminders settled in the
last 24 h at zero for each delivery summary, the embedded queue's depth
at zero for each configured queue and state (``due``: deliverable now, ``delayed``: held
back by a delay, a retry's backoff or a delivery in flight, ``dead``), and the labelled
counters primed at startup (``metrics.prime_series``). ``process_*`` come from the worker
that answers the scrape; ``reminders_build_info{version}`` is 1.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Iterator
from functools import cache
from importlib import metadata

from fastapi import APIRouter, Request
from fastapi.responses import Response
from prometheus_client import PROCESS_COLLECTOR, REGISTRY, CollectorRegistry, generate_latest
from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.multiprocess import MultiProcessCollector
from prometheus_client.registry import Collector

from app.domain.failover import CircuitState
from app.domain.states import DeadLetterReason, DeliverySummary
from app.services.audit import AuditReport
from app.services.deliverability import DeliverabilityFigures
from app.services.failover import circuit_states
from app.services.ledger_metrics import LedgerMetrics
from app.services.operations import LedgerFigures

from .deps import ContainerDep, check_bearer

router = APIRouter(include_in_schema=False)
CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"


class LedgerCollector(Collector):
    """Yields the gauges of the latest ledger snapshot (taken by the background task)."""

    def __init__(self, metrics: LedgerMetrics, *, embedded_queues: Iterable[str] = ()) -> None:
        self.figures: LedgerFigures | None = metrics.snapshot.figures
        self.audit: AuditReport | None = metrics.snapshot.audit
        self.deliverability = metrics.snapshot.deliverability
        self.age = metrics.age_seconds()
        self.embedded_queues = tuple(embedded_queues)

    def collect(self) -> Iterator[Metric]:
        """The ledger gauges, or only ``reminders_ledger_up 0`` when the read failed."""
        up = GaugeMetricFamily("reminders_ledger_up", "1 when the last ledger reading worked.")
        up.add_metric([], 0 if self.figures is None else 1)
        yield up
        yield _build_info()
        if self.age is not None:
            yield GaugeMetricFamily(
                "reminders_ledger_snapshot_age_seconds",
                "Seconds since the ledger gauges and the audit were last read.",
                self.age,
            )
        if self.figures is not None:
            yield from _ledger_metrics(self.figures, self.embedded_queues)
        if self.audit is not None:
            yield _audit_gauge(self.audit)
        if self.deliverability is not None:
            yield from _deliverability_metrics(self.deliverability)


class CircuitCollector(Collector):
    """Failover's circuit per provider, as this process sees it (0 closed, 1 half open,
    2 open); every provider of a channel with several is there from the first scrape."""

    def __init__(self, states: list[tuple[str, str, CircuitState]]) -> None:
        self.states = states

    def collect(self) -> Iterator[Metric]:
        """``reminders_provider_circuit_state{channel,provider}``."""
        gauge = GaugeMetricFamily(
            "reminders_provider_circuit_state",
            "Failover circuit of each provider in this process: 0 closed, 1 half open, 2 open.",
            labels=["channel", "provider"],
        )
        for channel, provider, state in self.states:
            gauge.add_metric([channel, provider], state.gauge)
        yield gauge


def _deliverability_metrics(figures: DeliverabilityFigures) -> Iterator[Metric]:
    suppressed = GaugeMetricFamily(
        "reminders_suppressions", "Addresses on the suppression list, by reason.", labels=["reason"]
    )
    for reason, count in sorted(figures.suppressions.items()):
        suppressed.add_metric([reason], count)
    yield suppressed
    yield GaugeMetricFamily(
        "reminders_email_bounce_rate_24h",
        "Hard bounces over emails sent in the last 24 h (SES: review at 0.05, pause at 0.10).",
        figures.bounce_rate,
    )
    yield GaugeMetricFamily(
        "reminders_email_complaint_rate_24h",
        "Complaints over emails sent in the last 24 h (Gmail/Yahoo bulk senders: under 0.003).",
        figures.complaint_rate,
    )
    yield GaugeMetricFamily(
        "reminders_emails_sent_24h",
        "Emails a provider accepted in the last 24 h.",
        figures.emails_sent,
    )


def _audit_gauge(report: AuditReport) -> Metric:
    gauge = GaugeMetricFamily(
        "reminders_audit_violations",
        "Offending ids per ledger invariant found by the last audit (capped; 0: holds).",
        labels=["invariant"],
    )
    for name, ids in report.violations.items():
        gauge.add_metric([name], len(ids))
    return gauge


@cache
def _version() -> str:
    try:
        return metadata.version("reminder-relay")
    except metadata.PackageNotFoundError:  # run from a source tree that is not installed
        return "unknown"


def _build_info() -> Metric:
    info = GaugeMetricFamily(
        "reminders_build_info", "Always 1; the running version as a label.", labels=["version"]
    )
    info.add_metric([_version()], 1)
    return info


def _ledger_metrics(figures: LedgerFigures, embedded_queues: tuple[str, ...]) -> Iterator[Metric]:
    count = GaugeMetricFamily(
        "reminders_dead_letters",
        "Open (neither redriven nor discarded) dead letters, by reason.",
        labels=["reason"],
    )
    oldest = GaugeMetricFamily(
        "reminders_dead_letter_oldest_age_seconds",
        "Age of the oldest open dead letter, by reason.",
        labels=["reason"],
    )
    found = {reason: (n, age) for reason, n, age in figures.dead_letters}
    for reason in sorted({*DeadLetterReason, *found}):
        n, age = found.get(reason, (0, None))
        count.add_metric([reason], n)
        oldest.add_metric([reason], age or 0.0)
    yield count
    yield oldest
    yield GaugeMetricFamily(
        "reminders_sends_stuck", "Sends in state sending past their lease.", figures.stuck_sends
    )
    yield GaugeMetricFamily(
        "reminders_sweep_lag_seconds",
        "How overdue the oldest still-scheduled reminder is (0 when none is).",
        figures.sweep_lag_seconds,
    )
    yield GaugeMetricFamily(
        "reminders_schedules_broken",
        "Schedules that could not be materialized; sweeps skip them until fixed.",
        figures.broken_schedules,
    )
    settled = GaugeMetricFamily(
        "reminders_settled_24h",
        "Reminders that became done in the last 24 h, by what their channels came to.",
        labels=["delivery"],
    )
    for summary in sorted({*DeliverySummary, *figures.settled_24h}):
        settled.add_metric([summary], figures.settled_24h.get(summary, 0))
    yield settled
    if figures.queue_depth is not None:
        depth = GaugeMetricFamily(
            "reminders_embedded_queue_messages",
            "Messages in the embedded queue, by queue and state (due, delayed, dead).",
            labels=["queue", "state"],
        )
        counted = {(queue, state): n for queue, state, n in figures.queue_depth}
        for queue in embedded_queues:
            for state in ("due", "delayed", "dead"):
                counted.setdefault((queue, state), 0)
        for (queue, state), n in sorted(counted.items()):
            depth.add_metric([queue, state], n)
        yield depth


def process_registry() -> CollectorRegistry:
    """This process's metrics, or every worker's merged in multiprocess mode."""
    if not os.environ.get("PROMETHEUS_MULTIPROC_DIR"):
        return REGISTRY
    registry = CollectorRegistry()
    MultiProcessCollector(registry)
    registry.register(PROCESS_COLLECTOR)  # the answering worker's process_* figures
    return registry


@router.get("/metrics")
async def metrics(request: Request, container: ContainerDep) -> Response:
    """Prometheus exposition: counters, histograms and the ledger gauges (from memory)."""
    settings = container.settings
    expected = settings.metrics_token
    # Settings refuse an empty token outside dev mode unless the route is declared public.
    if not settings.metrics_public and expected.get_secret_value():
        check_bearer(request, container, "metrics_token")
    ledger = CollectorRegistry(auto_describe=False)
    queues = container.settings.queue_kinds
    embedded = [queue for queue, kind in queues.items() if kind == "embedded"]
    ledger.register(LedgerCollector(container.ledger_metrics, embedded_queues=embedded))
    ledger.register(CircuitCollector(circuit_states(container.receiver)))
    body = generate_latest(process_registry()) + generate_latest(ledger)
    return Response(body, media_type=CONTENT_TYPE)
