"""SQL for retention: find and delete old finished reminders, their ledger rows and the dead
letters operators are done with (redriven or discarded), a bounded batch at a time. Nothing
here commits.

A reminder is purgeable when it is ``done`` or ``cancelled``, last changed before the cutoff,
and nothing about it is still open: no ledger row that is not final (a send in flight or
waiting for a retry) and no dead letter waiting for an operator. The batch is picked with
``FOR UPDATE SKIP LOCKED`` on PostgreSQL, so a purge never waits behind, nor blocks for
longer than one batch, the requests working on other rows.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any

from sqlalchemy import Select, and_, delete, exists, func, or_, select
from sqlalchemy.ext.asyncio import AsyncConnection

from app.domain.states import FINAL_SEND_STATES, SETTLED_REMINDER_STATES, ReminderState

from . import ledger_rules as rules
from .dialects import among
from .tables import dead_letters, reminders, send_records

r, sr, dl = reminders, send_records, dead_letters
_FINAL = [state.value for state in FINAL_SEND_STATES]
PURGEABLE_STATES = tuple(sorted(SETTLED_REMINDER_STATES))

_OPEN_SEND = exists().where(sr.c.reminder_id == r.c.id, sr.c.state.not_in(_FINAL))
_LETTER_OPEN = and_(dl.c.redriven_at.is_(None), dl.c.discarded_at.is_(None))
_OPEN_DEAD_LETTER = or_(
    exists().where(dl.c.reminder_id == r.c.id, _LETTER_OPEN),
    exists().where(dl.c.send_record_id == sr.c.id, sr.c.reminder_id == r.c.id, _LETTER_OPEN),
)


def _purgeable(state: ReminderState, before: datetime) -> list:
    # One state per statement: (state, updated_at) is then one index range, read in order,
    # and the LIMIT stops the scan instead of sorting every old row of both states.
    return [rules.is_state(r, state), r.c.updated_at < before, ~_OPEN_SEND, ~_OPEN_DEAD_LETTER]


# A closed letter is purged by when it was closed: redriven or discarded before the cutoff.
_CLOSED_AT = (dl.c.redriven_at, dl.c.discarded_at)


def _closed_before(column: Any, before: datetime) -> list:
    return [column.is_not(None), column < before]


async def lock_purgeable_reminders(
    conn: AsyncConnection, state: ReminderState, *, before: datetime, limit: int
) -> list[str]:
    """Lock up to ``limit`` purgeable reminders in ``state``, oldest change first."""
    stmt: Select = (
        select(r.c.id)
        .where(*_purgeable(state, before))
        .order_by(r.c.updated_at)
        .limit(limit)
        .with_for_update(skip_locked=True)
    )
    return list((await conn.execute(stmt)).scalars())


async def delete_reminders(conn: AsyncConnection, reminder_ids: Sequence[str]) -> dict[str, int]:
    """Delete locked reminders with their final ledger rows and those rows' redriven dead
    letters; returns how many rows went from each table.

    A reminder whose send left its final state since it was locked (a redrive) keeps that
    send, and so is kept itself.
    """
    if not reminder_ids:
        return {"reminders": 0, "send_records": 0, "dead_letters": 0}
    of_sends, of_reminders = (
        among(conn, sr.c.reminder_id, reminder_ids),
        among(conn, r.c.id, reminder_ids),
    )
    final_sends = select(sr.c.id).where(of_sends, sr.c.state.in_(_FINAL))
    letters = await conn.execute(
        delete(dl).where(dl.c.send_record_id.in_(final_sends), dl.c.redriven_at.is_not(None))
    )
    sends = await conn.execute(delete(sr).where(of_sends, sr.c.state.in_(_FINAL)))
    gone = await conn.execute(
        delete(r).where(of_reminders, ~exists().where(sr.c.reminder_id == r.c.id))
    )
    return {
        "reminders": gone.rowcount,
        "send_records": sends.rowcount,
        "dead_letters": letters.rowcount,
    }


async def delete_closed_dead_letters(conn: AsyncConnection, *, before: datetime, limit: int) -> int:
    """Delete up to ``limit`` dead letters redriven or discarded before ``before``, oldest first."""
    ids: list[int] = []
    for column in _CLOSED_AT:  # one index range each, rather than an OR no index serves
        batch = (
            select(dl.c.id)
            .where(*_closed_before(column, before))
            .order_by(column)
            .limit(limit - len(ids))
            .with_for_update(skip_locked=True)
        )
        ids += (await conn.execute(batch)).scalars()
        if len(ids) >= limit:
            break
    if not ids:
        return 0
    return (await conn.execute(delete(dl).where(dl.c.id.in_(ids)))).rowcount  # few: no ANY


async def count_purgeable(conn: AsyncConnection, *, before: datetime) -> dict[str, int]:
    """What a purge with this cutoff would delete now (``--dry-run``)."""
    counts = {"reminders": 0, "send_records": 0}
    for state in PURGEABLE_STATES:
        ids = select(r.c.id).where(*_purgeable(state, before))
        counts["reminders"] += await _count(conn, select(func.count()).select_from(ids.subquery()))
        counts["send_records"] += await _count(
            conn,
            select(func.count()).where(sr.c.reminder_id.in_(ids), sr.c.state.in_(_FINAL)),
        )
    counts["dead_letters"] = 0
    for column in _CLOSED_AT:
        counts["dead_letters"] += await _count(
            conn, select(func.count()).where(*_closed_before(column, before))
        )
    return counts


async def _count(conn: AsyncConnection, stmt: Select) -> int:
    return int((await conn.execute(stmt)).scalar_one())
