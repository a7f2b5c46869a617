"""The cron sweep: publish reminders that entered the queue's delay horizon, then return.

Catch-up is by due time and state, never by remembering the last run: a sweep after a
paused cron finds every overdue ``scheduled`` row and publishes it with delay 0, and then
republishes the sends of ``enqueued`` rows whose queue message was lost
(``app/services/catchup.py``).
"""

from __future__ import annotations

import functools
import logging
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any, Protocol, runtime_checkable

from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from app.db import reminders_repo, sweep_repo
from app.db.dialects import plan_for_these_arrays
from app.db.reminders_repo import DueReminder
from app.domain.errors import PublishError
from app.domain.messages import DeliveryPayload, OutgoingMessage, idempotency_key
from app.domain.ports import QueuePublisher
from app.domain.queueing import DEDUP_WINDOW, RETENTION, check_publishable, horizon_end
from app.observability.tracing import current_traceparent, root_span, traced, tracing_enabled
from app.services.catchup import CatchUpLimits, catch_up_lost_messages
from app.services.materialize import materialize_schedules
from app.services.reminders import RECIPIENT_FIELDS
from app.services.retention import PurgeReport, RetentionPolicy, purge
from app.services.sweep_batches import Swept, publish_due

log = logging.getLogger("reminders.sweep")
# PostgreSQL: after a sweep that queued this many messages, the tables it changed are
# analyzed (a second or less). Plans made with the statistics of an empty queue scan and sort
# every queued message per dispatcher claim; a server with autovacuum on refreshes them on its
# own sooner or later, this makes it "now" for the sweep that caused the change.
ANALYZE_AFTER = 50_000


@dataclass(frozen=True, slots=True)
class SweepLimits:
    """How much one sweep may do."""

    batch_size: int = 5000
    time_budget_seconds: float = 60.0
    # Batches in flight at once on PostgreSQL (SKIP LOCKED gives each its own rows); SQLite
    # has one writer, so a second batch would only wait for the first's lock.
    workers: int = 2
    # A claimed row not marked enqueued by then (the sweep crashed) is swept again.
    claim_seconds: float = 120.0
    catch_up: CatchUpLimits = field(default_factory=CatchUpLimits)


@runtime_checkable
class SameDatabasePublisher(QueuePublisher, Protocol):
    """A queue kept in a database (the embedded queue): when it is the sweep's own, the
    messages and the mark that they were published commit in one transaction."""

    max_retries: int

    def shares_database(self, engine: AsyncEngine) -> bool: ...

    async def publish_within(
        self, conn: AsyncConnection, messages: Sequence[OutgoingMessage]
    ) -> list[str]: ...

    def notify_published(self) -> None: ...


@dataclass(frozen=True, slots=True)
class SweepReport:
    """What a sweep did; the cron route returns it as JSON."""

    enqueued: int
    messages: int
    remaining: int
    horizon_end: datetime
    duration_ms: int
    error: str | None = None
    # What retention deleted with the budget left after publishing (None: not run).
    purged: PurgeReport | None = None
    republished: int = 0  # messages of lost sends published again (app/services/catchup.py)

    def to_json(self) -> dict[str, object]:
        """The report as the cron route and ``reminders sweep`` print it."""
        body: dict[str, object] = {
            "enqueued": self.enqueued,
            "messages": self.messages,
            "remaining": self.remaining,
            "horizon_end": self.horizon_end.isoformat(),
            "duration_ms": self.duration_ms,
            "republished": self.republished,
        }
        if self.purged is not None:
            body["purged"] = self.purged.to_json()
        return body if self.error is None else {**body, "error": self.error}


def messages_for(
    due: DueReminder,
    *,
    now: datetime,
    max_delay: float,
    queue_for: Callable[[str], str],
    traceparent: str | None = None,
) -> list[OutgoingMessage]:
    """One message per channel, delayed until the reminder is due (0 when overdue)."""
    delay = min(max(0.0, (due.due_at - now).total_seconds()), max_delay)
    return [
        OutgoingMessage(
            queue=queue_for(channel),
            payload=DeliveryPayload(due.id, channel, due.schedule_version, traceparent).to_json(),
            delay_seconds=delay,
            idempotency_key=idempotency_key(due.id, channel, due.schedule_version),
            group=due.customer_id,
        )
        for channel in due.channels
    ]


def _traced_messages(
    due: DueReminder, *, now: datetime, max_delay: float, queue_for: Callable[[str], str]
) -> list[OutgoingMessage]:
    if not tracing_enabled():
        return messages_for(due, now=now, max_delay=max_delay, queue_for=queue_for)
    # Each reminder's own trace starts here; its messages carry it to the receiver.
    attributes = {"reminder.id": due.id, "reminder.due_at": due.due_at.isoformat()}
    with root_span("reminders.enqueue", attributes=attributes):
        traceparent = current_traceparent()
        return messages_for(
            due, now=now, max_delay=max_delay, queue_for=queue_for, traceparent=traceparent
        )


@traced("reminders.sweep")
async def sweep(
    engine: AsyncEngine,
    publisher: QueuePublisher,
    *,
    queue_for: Callable[[str], str],
    clock: Callable[[], datetime],
    limits: SweepLimits,
    retention: RetentionPolicy | None = None,
    monotonic: Callable[[], float] = time.monotonic,
) -> SweepReport:
    """Publish due reminders in bounded batches until none are left or the budget is spent;
    then, with ``retention`` and budget left, purge what is old enough."""
    started = monotonic()
    now = clock()
    # Recurring schedules become ordinary reminder rows first, so this sweep publishes them.
    await materialize_schedules(
        engine,
        now=now,
        horizon_end=horizon_end(now, publisher),
        out_of_time=lambda: monotonic() - started >= limits.time_budget_seconds / 2,
    )
    shared = _same_database(publisher, engine)

    async def one_batch() -> Swept:
        if shared is not None and not tracing_enabled():
            return await _sweep_batch_in_database(
                engine, shared, now=clock(), limits=limits, queue_for=queue_for
            )
        if shared is not None:
            return await _sweep_batch_in_one_transaction(
                engine, shared, now=clock(), limits=limits, queue_for=queue_for, clock=clock
            )
        return await _sweep_batch(
            engine, publisher, now=clock(), limits=limits, queue_for=queue_for, clock=clock
        )

    published = await publish_due(
        one_batch,
        workers=_workers(engine, limits),
        batch_size=limits.batch_size,
        out_of_time=lambda: monotonic() - started >= limits.time_budget_seconds,
    )
    enqueued, messages, error = published.enqueued, published.messages, published.error
    now = clock()
    if shared is not None and messages >= ANALYZE_AFTER:
        async with engine.begin() as conn:
            await sweep_repo.refresh_statistics(conn)
    republished = 0
    if error is None and monotonic() - started < limits.time_budget_seconds:
        try:
            republished = await catch_up_lost_messages(
                engine, publisher, queue_for=queue_for, now=clock(), limits=limits.catch_up
            )
        except PublishError as failure:
            error = str(failure)
            log.error("sweep catch-up stopped: the queue refused a batch: %s", error)
    async with engine.connect() as conn:
        remaining = await reminders_repo.count_sweepable(
            conn, now=now, horizon_end=horizon_end(now, publisher)
        )
    purged = None
    if retention is not None and error is None:
        # Publishing first: a purge never delays a due reminder, only uses what is left.
        purged = await purge(
            engine,
            now=clock(),
            policy=retention,
            out_of_time=lambda: monotonic() - started >= limits.time_budget_seconds,
        )
    duration_ms = int((monotonic() - started) * 1000)
    return SweepReport(
        enqueued,
        messages,
        remaining,
        horizon_end(now, publisher),
        duration_ms,
        error,
        purged,
        republished,
    )


def _workers(engine: AsyncEngine, limits: SweepLimits) -> int:
    return limits.workers if engine.dialect.name == "postgresql" else 1


def _same_database(publisher: QueuePublisher, engine: AsyncEngine) -> SameDatabasePublisher | None:
    """The publisher, when its queue lives in the sweep's own database."""
    if isinstance(publisher, SameDatabasePublisher) and publisher.shares_database(engine):
        return publisher
    return None


def _window(now: datetime, limits: SweepLimits, publisher: QueuePublisher) -> dict[str, Any]:
    """Which due reminders one batch takes, and for how long a claim holds them."""
    return {
        "now": now,
        "horizon_end": horizon_end(now, publisher),
        "claim_until": now + timedelta(seconds=limits.claim_seconds),
        "limit": limits.batch_size,
    }


async def _sweep_batch(
    engine: AsyncEngine,
    publisher: QueuePublisher,
    *,
    now: datetime,
    limits: SweepLimits,
    queue_for: Callable[[str], str],
    clock: Callable[[], datetime],
) -> Swept:
    """Claim a batch, publish it with no transaction open, mark it: for any queue."""
    async with engine.begin() as conn:
        batch = await reminders_repo.claim_due_reminders(conn, **_window(now, limits, publisher))
    if not batch:
        return Swept(0, 0)
    # The claim (sweep_claimed_until) keeps other sweeps off these rows. A crash before
    # mark_enqueued re-publishes with the same keys once the claim expires.
    per_reminder, flat = _messages(batch, now, publisher.max_delay_seconds, queue_for)
    try:
        ids = await publisher.publish_batch(flat)
    except PublishError:
        async with engine.begin() as conn:
            await reminders_repo.release_sweep_claims(conn, [due.id for due in batch])
        raise
    async with engine.begin() as conn:
        await reminders_repo.mark_enqueued(conn, _pair(batch, per_reminder, ids), now=clock())
    return Swept(len(batch), len(flat))


async def _sweep_batch_in_database(
    engine: AsyncEngine,
    publisher: SameDatabasePublisher,
    *,
    now: datetime,
    limits: SweepLimits,
    queue_for: Callable[[str], str],
) -> Swept:
    """Move a batch of due reminders into the queue's table with statements run by the
    database (``sweep_repo``): no row comes into Python. Each channel's queue is checked
    against the queue's limits first (a refusal stores nothing); ids, delays and keys are
    within them by construction (ids of at most 200 characters, delays clamped)."""
    queues = {channel: queue_for(channel) for channel in RECIPIENT_FIELDS}
    for queue in set(queues.values()):
        probe = OutgoingMessage(queue, {}, 0.0, idempotency_key("probe", "probe", 1))
        check_publishable(probe, max_delay_seconds=publisher.max_delay_seconds)
    async with engine.begin() as conn:
        moved, messages = await sweep_repo.move_due_reminders(
            conn,
            now=now,
            horizon_end=horizon_end(now, publisher),
            latest=now + timedelta(seconds=publisher.max_delay_seconds),
            window_start=now - DEDUP_WINDOW,
            expires_at=now + RETENTION,
            limit=limits.batch_size,
            queues=queues,
            max_retries=publisher.max_retries,
        )
    if moved:
        publisher.notify_published()
    return Swept(moved, messages)


async def _sweep_batch_in_one_transaction(
    engine: AsyncEngine,
    publisher: SameDatabasePublisher,
    *,
    now: datetime,
    limits: SweepLimits,
    queue_for: Callable[[str], str],
    clock: Callable[[], datetime],
) -> Swept:
    """Select, publish and mark a batch in one transaction of the queue's own database.

    A crash or a refusal before the commit leaves no message and no mark. PostgreSQL's
    rows hold no claim either, so the next sweep publishes them with the same keys;
    SQLite's wait for their claim to expire (see ``lock_due_reminders``)."""
    async with engine.begin() as conn:
        await plan_for_these_arrays(conn)
        batch = await reminders_repo.lock_due_reminders(conn, **_window(now, limits, publisher))
        if not batch:
            return Swept(0, 0)
        per_reminder, flat = _messages(batch, now, publisher.max_delay_seconds, queue_for)
        refusal: PublishError | None = None
        try:
            ids = await publisher.publish_within(conn, flat)
        except PublishError as failure:
            refusal = failure  # checked before anything was written
        else:
            await reminders_repo.mark_enqueued(conn, _pair(batch, per_reminder, ids), now=clock())
    if refusal is not None:
        # SQLite's claim committed apart (see lock_due_reminders): let the next sweep retry.
        async with engine.begin() as conn:
            await reminders_repo.release_sweep_claims(conn, [due.id for due in batch])
        raise refusal
    publisher.notify_published()
    return Swept(len(batch), len(flat))


def _messages(
    batch: list[DueReminder], now: datetime, max_delay: float, queue_for: Callable[[str], str]
) -> tuple[list[list[OutgoingMessage]], list[OutgoingMessage]]:
    """Each reminder's messages, and all of them in one list; a channel's queue is looked
    up once per batch."""
    per_channel = functools.cache(queue_for)
    per_reminder = [
        _traced_messages(due, now=now, max_delay=max_delay, queue_for=per_channel) for due in batch
    ]
    return per_reminder, [message for group in per_reminder for message in group]


def _pair(
    batch: list[DueReminder], per_reminder: list[list[OutgoingMessage]], ids: list[str]
) -> list[tuple[DueReminder, list[str]]]:
    """Each reminder with the ids of its messages (``ids`` in the order of the flat list)."""
    published, position = [], 0
    for due, group in zip(batch, per_reminder, strict=True):
        published.append((due, ids[position : position + len(group)]))
        position += len(group)
    return published
