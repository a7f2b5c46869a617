"""SQL for operators: send-record listings and ledger-derived figures (redrives: ``redrive_repo``).

Nothing here commits. The figures (dead letters, stuck sends, sweep lag, queue depth)
are computed from the tables at read time, so metrics and the admin page always
equal the ledger.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from sqlalchemy import and_, case, func, inspect, literal, select
from sqlalchemy.ext.asyncio import AsyncConnection

from app.domain.redrive import SendFilter
from app.domain.states import ReminderState

from . import ledger_rules as rules
from .attempts_repo import attempt_result
from .queue_tables import QueueMessage
from .tables import dead_letters, reminders, send_attempts, send_records
from .types import UTCDateTime

sr = send_records


def _send_clauses(filters: SendFilter, now: datetime) -> list[Any]:
    clauses: list[Any] = []
    if filters.stuck:
        clauses.append(rules.stuck(sr, literal(now, UTCDateTime())))
    elif filters.state is not None:
        clauses.append(sr.c.state == filters.state.value)
    for column, value in (
        (sr.c.channel, filters.channel),
        (sr.c.last_error_class, filters.error_class),
        (sr.c.outcome, filters.outcome),
        (sr.c.reminder_id, filters.reminder_id),
    ):
        if value is not None:
            clauses.append(column == value)
    return clauses


async def list_sends(
    conn: AsyncConnection, filters: SendFilter, *, now: datetime, after_id: int = 0, limit: int = 50
) -> list[dict[str, Any]]:
    """Send records matching the filters, by id, after a cursor id."""
    stmt = (
        select(sr)
        .where(sr.c.id > after_id, *_send_clauses(filters, now))
        .order_by(sr.c.id)
        .limit(limit)
    )
    return [dict(row._mapping) for row in await conn.execute(stmt)]


async def get_send(conn: AsyncConnection, send_record_id: int) -> dict[str, Any] | None:
    """One send record as a mapping, or None."""
    row = (await conn.execute(select(sr).where(sr.c.id == send_record_id))).first()
    return dict(row._mapping) if row else None


# --- Figures for the admin page and /metrics. ---


async def outcome_counts_since(conn: AsyncConnection, since: datetime) -> dict[str, int]:
    """Attempts claimed since an instant, by result (``attempts_repo.attempt_result``): the
    append-only history, so a redrive does not erase the failures it fixed."""
    label = attempt_result()
    stmt = select(label, func.count()).where(send_attempts.c.claimed_at >= since).group_by(label)
    return {name: count for name, count in await conn.execute(stmt)}


async def stuck_sends(conn: AsyncConnection, *, now: datetime) -> tuple[int, datetime | None]:
    """How many ``sending`` rows are past their lease, and the oldest expired lease."""
    stmt = select(func.count(), func.min(sr.c.lease_until)).where(
        rules.stuck(sr, literal(now, UTCDateTime()))
    )
    count, oldest = (await conn.execute(stmt)).one()
    return int(count), as_utc(oldest)


async def open_dead_letters(conn: AsyncConnection) -> list[tuple[str, int, datetime | None]]:
    """Open (neither redriven nor discarded) dead letters by reason: count and oldest creation."""
    dl = dead_letters
    stmt = (
        select(dl.c.reason, func.count(), func.min(dl.c.created_at))
        .where(dl.c.redriven_at.is_(None), dl.c.discarded_at.is_(None))
        .group_by(dl.c.reason)
    )
    return [
        (reason, int(count), as_utc(oldest)) for reason, count, oldest in await conn.execute(stmt)
    ]


async def oldest_overdue_scheduled(conn: AsyncConnection, *, now: datetime) -> datetime | None:
    """The due time of the oldest ``scheduled`` reminder already due (the sweep's lag)."""
    stmt = select(func.min(reminders.c.due_at)).where(
        rules.is_state(reminders, ReminderState.SCHEDULED), reminders.c.due_at <= now
    )
    return as_utc((await conn.execute(stmt)).scalar_one())


async def embedded_queue_depth(
    conn: AsyncConnection, *, now: datetime
) -> list[tuple[str, str, int]] | None:
    """Messages in the embedded queue by queue and state — ``due`` (visible now), ``delayed``
    (visible later: a delay, a backoff or a delivery in flight) or ``dead`` — or None when
    that table is absent."""
    exists = await conn.run_sync(lambda sync: inspect(sync).has_table("queue_messages"))
    if not exists:
        return None
    messages = QueueMessage.__table__.c
    state = case(
        (and_(messages.state == "ready", messages.visible_at > now), "delayed"),
        (messages.state == "ready", "due"),
        else_=messages.state,
    ).label("depth_state")
    stmt = select(messages.queue, state, func.count()).group_by(messages.queue, state)
    return [(queue, name, int(count)) for queue, name, count in await conn.execute(stmt)]


def as_utc(value: Any) -> datetime | None:
    """An aggregate's datetime as aware UTC (SQLite can hand back naive text)."""
    if value is None:
        return None
    if isinstance(value, str):
        value = datetime.fromisoformat(value)
    return value if value.tzinfo is not None else value.replace(tzinfo=UTC)


async def settled_since(conn: AsyncConnection, since: datetime) -> dict[str, int]:
    """Reminders settled ``done`` since ``since``, by delivery summary. A done reminder's
    ``updated_at`` is its ``done_at`` (nothing changes it afterwards), so the (state,
    updated_at) index bounds the read to the window."""
    stmt = (
        select(reminders.c.delivery, func.count())
        .where(
            rules.is_state(reminders, ReminderState.DONE),
            reminders.c.updated_at >= since,
            reminders.c.done_at >= since,
        )
        .group_by(reminders.c.delivery)
    )
    return {str(delivery): int(count) for delivery, count in await conn.execute(stmt)}
