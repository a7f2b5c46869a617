"""Metrics of the pull worker, per queue: messages received, acked, nacked, given back,
failed, and the queue's backlog (its lag) where the queue says."""

from __future__ import annotations

from prometheus_client import Counter, Gauge

WORKER_MESSAGES = Counter(
    "reminders_worker_messages",
    "Messages the pull worker handled, by queue and event "
    "(received, acked, nacked, given_back, failed).",
    ["queue", "event"],
)
WORKER_BACKLOG = Gauge(
    "reminders_worker_queue_backlog",
    "Messages waiting in a pulled queue when the worker last looked (its lag).",
    ["queue"],
)


def record_message(queue: str, event: str) -> None:
    """Count one message event of the worker."""
    WORKER_MESSAGES.labels(queue=queue, event=event).inc()


def record_backlog(queue: str, waiting: int | None) -> None:
    """Publish a queue's backlog; nothing when the queue does not say."""
    if waiting is not None:
        WORKER_BACKLOG.labels(queue=queue).set(waiting)
