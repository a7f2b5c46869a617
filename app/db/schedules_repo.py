"""SQL for recurring schedules and the reminders they materialize. Nothing here commits."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any

from sqlalchemy import JSON, Select, bindparam, func, select, update
from sqlalchemy.ext.asyncio import AsyncConnection

from app.domain.states import ReminderState

from .dialects import insert_for
from .schedule_tables import ScheduleState, schedules
from .tables import customers, reminders
from .types import UTCDateTime

_OPEN = (ReminderState.SCHEDULED.value, ReminderState.ENQUEUED.value)
BROKEN_ERROR_LENGTH = 500
s = schedules
r = reminders
# What planning needs from the customer: the default zone and the quiet-hours window.
_CUSTOMER_COLUMNS = (
    customers.c.time_zone.label("customer_time_zone"),
    customers.c.quiet_hours_start,
    customers.c.quiet_hours_end,
)
_WITH_CUSTOMER = select(s, *_CUSTOMER_COLUMNS).join_from(
    s, customers, s.c.customer_id == customers.c.id
)


def _mapping(row: Any) -> dict[str, Any]:
    return dict(row._mapping)


async def get_schedule(conn: AsyncConnection, schedule_id: str) -> dict[str, Any] | None:
    """One schedule as a mapping, or None."""
    row = (await conn.execute(select(s).where(s.c.id == schedule_id))).first()
    return _mapping(row) if row else None


async def lock_schedule(conn: AsyncConnection, schedule_id: str) -> dict[str, Any] | None:
    """A schedule with its customer's planning fields, row-locked until the transaction ends."""
    stmt = _WITH_CUSTOMER.where(s.c.id == schedule_id).with_for_update(of=s)
    row = (await conn.execute(stmt)).first()
    return _mapping(row) if row else None


async def insert_schedule(
    conn: AsyncConnection, schedule_id: str, values: dict[str, Any], *, now: datetime
) -> bool:
    """Insert a new active schedule; False when another request created it first."""
    stmt = insert_for(conn, s).values(
        id=schedule_id,
        state=ScheduleState.ACTIVE.value,
        version=1,
        created_at=now,
        updated_at=now,
        **values,
    )
    result = await conn.execute(stmt.on_conflict_do_nothing(index_elements=[s.c.id]))
    return result.rowcount == 1


async def update_schedule(
    conn: AsyncConnection, schedule_id: str, values: dict[str, Any], *, now: datetime
) -> None:
    """Overwrite fields of a schedule and bump its version."""
    await conn.execute(
        update(s)
        .where(s.c.id == schedule_id)
        .values(version=s.c.version + 1, updated_at=now, **values)
    )


async def set_materialized(
    conn: AsyncConnection, schedule_id: str, *, through: datetime, local: str | None
) -> None:
    """Move the bookkeeping cursors (not a change of the schedule: no version bump)."""
    await conn.execute(
        update(s)
        .where(s.c.id == schedule_id)
        .values(materialized_through=through, materialized_local=local)
    )


async def mark_broken(
    conn: AsyncConnection, schedule_id: str, *, error: str, now: datetime
) -> None:
    """Record that the schedule cannot be materialized (not a change: no version bump)."""
    await conn.execute(
        update(s)
        .where(s.c.id == schedule_id)
        .values(broken_at=now, broken_error=error[:BROKEN_ERROR_LENGTH])
    )


async def list_broken(conn: AsyncConnection, *, limit: int) -> list[dict[str, Any]]:
    """Broken schedules (not deleted), most recently broken first."""
    stmt = (
        select(s.c.id, s.c.customer_id, s.c.broken_at, s.c.broken_error)
        .where(s.c.broken_at.is_not(None), s.c.state != ScheduleState.DELETED.value)
        .order_by(s.c.broken_at.desc(), s.c.id)
        .limit(limit)
    )
    return [_mapping(row) for row in await conn.execute(stmt)]


async def count_broken(conn: AsyncConnection) -> int:
    """How many schedules (not deleted) are marked broken."""
    stmt = select(func.count()).where(
        s.c.broken_at.is_not(None), s.c.state != ScheduleState.DELETED.value
    )
    return int((await conn.execute(stmt)).scalar_one())


async def claim_schedules_to_materialize(
    conn: AsyncConnection, *, horizon_end: datetime, limit: int
) -> list[dict[str, Any]]:
    """Active schedules due for a visit (``materialized_through`` before the horizon).

    PostgreSQL locks them (skipping rows another sweep or a PUT holds) until the caller's
    transaction ends; SQLite's single writer serializes instead.
    """
    stmt = (
        _WITH_CUSTOMER.where(
            s.c.state == ScheduleState.ACTIVE.value,
            s.c.broken_at.is_(None),
            func.coalesce(s.c.materialized_through, s.c.created_at) < horizon_end,
        )
        .order_by(func.coalesce(s.c.materialized_through, s.c.created_at), s.c.id)
        .limit(limit)
        .with_for_update(of=s, skip_locked=True)
    )
    return [_mapping(row) for row in await conn.execute(stmt)]


async def withdraw_occurrences(
    conn: AsyncConnection, schedule_id: str, *, now: datetime, due_after: datetime | None
) -> int:
    """Cancel a schedule's unsent occurrences (those due after ``due_after``, if given)."""
    conditions = [r.c.schedule_id == schedule_id, r.c.state.in_(_OPEN)]
    if due_after is not None:
        conditions.append(r.c.due_at > due_after)
    result = await conn.execute(
        update(r)
        .where(*conditions)
        .values(state=ReminderState.CANCELLED.value, cancelled_at=now, updated_at=now)
    )
    await conn.execute(update(s).where(s.c.id == schedule_id).values(withdrawn_at=now))
    return result.rowcount


async def revivable_occurrences(
    conn: AsyncConnection,
    schedule_id: str,
    reminder_ids: Sequence[str],
    *,
    withdrawn_at: datetime | None,
) -> set[str]:
    """Which of these ids the schedule itself withdrew (cancelled no later than withdrawn_at)."""
    if withdrawn_at is None or not reminder_ids:
        return set()
    stmt = select(r.c.id).where(
        r.c.id.in_(list(reminder_ids)),
        r.c.schedule_id == schedule_id,
        r.c.state == ReminderState.CANCELLED.value,
        r.c.cancelled_at <= withdrawn_at,
    )
    return set((await conn.execute(stmt)).scalars())


async def insert_occurrences(
    conn: AsyncConnection, rows: Sequence[dict[str, Any]], *, now: datetime
) -> int:
    """Insert occurrences as scheduled reminders, skipping ids that exist; how many were new."""
    if not rows:
        return 0
    values = [
        {
            **row,
            "state": ReminderState.SCHEDULED.value,
            "schedule_version": 1,
            "created_at": now,
            "updated_at": now,
        }
        for row in rows
    ]
    insert = insert_for(conn, r).values(values)
    stmt = insert.on_conflict_do_nothing(index_elements=[r.c.id]).returning(r.c.id)
    return len((await conn.execute(stmt)).all())


_REVIVE = (
    update(r)
    .where(
        r.c.id == bindparam("reminder_id"),
        r.c.state == ReminderState.CANCELLED.value,
    )
    .values(
        customer_id=bindparam("new_customer_id"),
        kind=bindparam("new_kind"),
        due_at=bindparam("new_due_at", type_=UTCDateTime()),
        channels=bindparam("new_channels", type_=JSON),
        data=bindparam("new_data", type_=JSON),
        state=ReminderState.SCHEDULED.value,
        schedule_version=r.c.schedule_version + 1,
        sweep_claimed_until=None,
        enqueued_at=None,
        enqueued_message_ids=None,
        cancelled_at=None,
        updated_at=bindparam("now", type_=UTCDateTime()),
    )
)


async def revive_occurrences(
    conn: AsyncConnection, rows: Sequence[dict[str, Any]], *, now: datetime
) -> None:
    """Bring withdrawn occurrences back under a new plan: new version, scheduled again."""
    if rows:
        params = [
            {
                "reminder_id": row["id"],
                "new_customer_id": row["customer_id"],
                "new_kind": row["kind"],
                "new_due_at": row["due_at"],
                "new_channels": row["channels"],
                "new_data": row["data"],
                "now": now,
            }
            for row in rows
        ]
        await conn.execute(_REVIVE, params)


async def update_open_content(
    conn: AsyncConnection, schedule_id: str, values: dict[str, Any], *, now: datetime
) -> None:
    """Apply a change of kind or data to unsent occurrences (rendering happens at send time)."""
    await conn.execute(
        update(r)
        .where(r.c.schedule_id == schedule_id, r.c.state.in_(_OPEN))
        .values(updated_at=now, **values)
    )


async def list_open_occurrences(
    conn: AsyncConnection, schedule_id: str, *, limit: int
) -> list[dict[str, Any]]:
    """The next unsent occurrences of a schedule, soonest first."""
    stmt = (
        select(r.c.id, r.c.due_at, r.c.state, r.c.schedule_version)
        .where(r.c.schedule_id == schedule_id, r.c.state.in_(_OPEN))
        .order_by(r.c.due_at, r.c.id)
        .limit(limit)
    )
    return [_mapping(row) for row in await conn.execute(stmt)]


def list_schedules_statement(
    *, customer_id: str | None, after: str | None, limit: int
) -> Select[Any]:
    """The query of ``list_schedules`` (the tests read its plan)."""
    stmt = select(s).where(s.c.state != ScheduleState.DELETED.value)
    if customer_id is not None:
        stmt = stmt.where(s.c.customer_id == customer_id)
    if after is not None:
        stmt = stmt.where(s.c.id > after)
    return stmt.order_by(s.c.id).limit(limit)


async def list_schedules(
    conn: AsyncConnection, *, customer_id: str | None, after: str | None, limit: int
) -> list[dict[str, Any]]:
    """Up to ``limit`` schedules not deleted, in id order after ``after``, of one customer
    when ``customer_id`` is given."""
    stmt = list_schedules_statement(customer_id=customer_id, after=after, limit=limit)
    return [_mapping(row) for row in await conn.execute(stmt)]
