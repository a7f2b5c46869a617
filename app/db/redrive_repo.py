"""SQL for redrives: the ledger and reminder views a plan reads, and the resets it writes.

Set-based: a batch of up to a thousand candidates is read in three statements and applied
in three (reset the sends, stamp the dead letters, reopen the reminders), whatever its
size. Nothing here commits.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from datetime import datetime
from typing import Any

from sqlalchemy import select, tuple_, update
from sqlalchemy.ext.asyncio import AsyncConnection

from app.domain.redrive import ReminderSnapshot, SendSnapshot
from app.domain.states import ReminderState, SendState

from .tables import reminders, send_records

sr = send_records
_SNAPSHOT_COLUMNS = (
    sr.c.id,
    sr.c.reminder_id,
    sr.c.channel,
    sr.c.state,
    sr.c.attempt_count,
    sr.c.attempt_budget_start,
    sr.c.redrive_count,
    sr.c.lease_until,
    sr.c.next_attempt_at,
)


def _snapshot(row: Any) -> SendSnapshot:
    return SendSnapshot(
        id=row.id,
        reminder_id=row.reminder_id,
        channel=row.channel,
        state=SendState(row.state),
        attempt_count=row.attempt_count,
        attempt_budget_start=row.attempt_budget_start,
        redrive_count=row.redrive_count,
        lease_until=row.lease_until,
        next_attempt_at=row.next_attempt_at,
    )


async def send_snapshot(conn: AsyncConnection, send_record_id: int) -> SendSnapshot | None:
    """The redrive view of one send record, or None."""
    return (await send_snapshots(conn, [send_record_id])).get(send_record_id)


async def send_snapshots(conn: AsyncConnection, ids: Iterable[int]) -> dict[int, SendSnapshot]:
    """The redrive views of several send records, by id (missing ids are absent)."""
    wanted = sorted(set(ids))
    if not wanted:
        return {}
    rows = await conn.execute(select(*_SNAPSHOT_COLUMNS).where(sr.c.id.in_(wanted)))
    return {row.id: _snapshot(row) for row in rows}


async def send_snapshots_for(
    conn: AsyncConnection, targets: Iterable[tuple[str, str]]
) -> dict[tuple[str, str], SendSnapshot]:
    """Each (reminder, channel)'s send record, the newest provider row where there are several."""
    wanted = sorted(set(targets))
    if not wanted:
        return {}
    stmt = (
        select(*_SNAPSHOT_COLUMNS)
        .where(tuple_(sr.c.reminder_id, sr.c.channel).in_(wanted))
        .order_by(sr.c.updated_at, sr.c.id)
    )
    # Oldest first, so the newest row of each pair is the one left in the dict.
    return {(row.reminder_id, row.channel): _snapshot(row) for row in await conn.execute(stmt)}


async def reminder_snapshots(
    conn: AsyncConnection, ids: Iterable[str]
) -> dict[str, ReminderSnapshot]:
    """The redrive views of several reminders, by id (missing ids are absent)."""
    wanted = sorted(set(ids))
    if not wanted:
        return {}
    r = reminders
    stmt = select(r.c.id, r.c.state, r.c.schedule_version, r.c.channels).where(r.c.id.in_(wanted))
    return {
        row.id: ReminderSnapshot(row.id, row.state, row.schedule_version, tuple(row.channels or ()))
        for row in await conn.execute(stmt)
    }


async def reset_sends_for_redrive(
    conn: AsyncConnection, sends: Sequence[SendSnapshot], *, now: datetime
) -> set[int]:
    """Compare-and-set records back to ``pending`` with a fresh budget; the ids that were.

    A record whose state, attempt count or redrive count changed since its snapshot is
    left alone (someone else moved it). ``attempt_budget_start = attempt_count`` restarts
    the attempt budget while the monotonic attempt count (the fencing token) and the
    error fields stay for audit.
    """
    if not sends:
        return set()
    unchanged = tuple_(sr.c.id, sr.c.state, sr.c.attempt_count, sr.c.redrive_count).in_(
        [(s.id, s.state.value, s.attempt_count, s.redrive_count) for s in sends]
    )
    stmt = (
        update(sr)
        .where(unchanged)
        .values(
            state=SendState.PENDING.value,
            attempt_budget_start=sr.c.attempt_count,
            redrive_count=sr.c.redrive_count + 1,
            lease_until=None,
            next_attempt_at=None,
            outcome=None,
            updated_at=now,
        )
        .returning(sr.c.id)
    )
    return set((await conn.execute(stmt)).scalars())


async def reopen_reminders(conn: AsyncConnection, ids: Iterable[str], *, now: datetime) -> None:
    """Redriven sends put their ``done`` reminders back to ``enqueued`` until final again."""
    wanted = sorted(set(ids))
    if not wanted:
        return
    await conn.execute(
        update(reminders)
        .where(reminders.c.id.in_(wanted), reminders.c.state == ReminderState.DONE.value)
        .values(state=ReminderState.ENQUEUED.value, done_at=None, delivery=None, updated_at=now)
    )
