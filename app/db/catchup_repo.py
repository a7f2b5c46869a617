"""SQL of the sweep's catch-up: enqueued reminders whose queue message may be lost.

Bounded and index-backed: the candidates come from ``ix_reminders_state_due_at`` (state,
due_at range) under a LIMIT, their ledger rows from the unique (reminder_id, channel,
provider) index. Nothing here commits.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any

from sqlalchemy import (
    JSON,
    ColumnElement,
    Select,
    and_,
    bindparam,
    exists,
    func,
    or_,
    select,
    update,
)
from sqlalchemy.ext.asyncio import AsyncConnection

from app.domain.catchup import LedgerRow, OverdueReminder
from app.domain.states import ReminderState, SendState

from . import ledger_rules as rules
from .tables import reminders, send_records
from .types import UTCDateTime

r, sr = reminders, send_records
_CUTOFF = bindparam("cutoff", type_=UTCDateTime())
# A row the queue should still bring back within the margin: leave its reminder alone.
_LIVE_ROW = exists().where(
    sr.c.reminder_id == r.c.id,
    or_(
        and_(rules.is_state(sr, SendState.SENDING), ~rules.lease_expired(sr, _CUTOFF)),
        and_(sr.c.state == SendState.PENDING.value, sr.c.next_attempt_at > _CUTOFF),
    ),
)
_FINAL_CHANNELS = (
    select(rules.final_channels(sr)).where(sr.c.reminder_id == r.c.id).scalar_subquery()
)
_DUE_AND_QUIET = (
    r.c.due_at <= _CUTOFF,
    or_(r.c.enqueued_at.is_(None), r.c.enqueued_at <= _CUTOFF),
    ~_LIVE_ROW,
)
# An enqueued reminder with a channel not final yet: its message may be lost.
_LOST = and_(
    rules.is_state(r, ReminderState.ENQUEUED),
    ~rules.all_channels_final(func.json_array_length(r.c.channels), _FINAL_CHANNELS),
)
# A cancelled reminder owes nothing, but a row a worker claimed and never settled (it died
# before reading the reminder, then the queue gave up) stays 'sending' forever unless one
# more delivery settles it. Found from the open rows ((state, lease_until) index, a small
# set), never by scanning every cancelled reminder.
_OPEN_ROW_OWNERS = select(sr.c.reminder_id).where(rules.is_open(sr))
_ORPHANED = and_(rules.is_state(r, ReminderState.CANCELLED), r.c.id.in_(_OPEN_ROW_OWNERS))
_COLUMNS = (
    r.c.id,
    r.c.due_at,
    r.c.channels,
    r.c.schedule_version,
    r.c.enqueued_at,
    r.c.state,
    r.c.customer_id,
)


def _select_candidates(kind: ColumnElement[bool]) -> Select[Any]:
    return (
        select(*_COLUMNS)
        .where(kind, *_DUE_AND_QUIET)
        .order_by(r.c.due_at)
        .limit(bindparam("limit"))
        # PostgreSQL: concurrent sweeps skip each other's rows (SQLite serializes writers).
        .with_for_update(of=r, skip_locked=True)
    )


_SELECT_LOST = _select_candidates(_LOST)
_SELECT_ORPHANED = _select_candidates(_ORPHANED)
_TOUCH = (
    update(r)
    .where(r.c.id == bindparam("reminder_id"), or_(_LOST, _ORPHANED), *_DUE_AND_QUIET)
    .values(enqueued_at=bindparam("now", type_=UTCDateTime()))
)


async def claim_overdue_reminders(
    conn: AsyncConnection, *, now: datetime, cutoff: datetime, limit: int
) -> list[OverdueReminder]:
    """Up to ``limit`` enqueued reminders due and published before ``cutoff`` with an open
    send and no live one; each is stamped ``enqueued_at = now`` so a concurrent or the next
    sweep leaves it alone for another margin."""
    params = {"cutoff": cutoff, "limit": limit}
    rows = (await conn.execute(_SELECT_LOST, params)).all()
    if len(rows) < limit:
        params["limit"] = limit - len(rows)
        rows += (await conn.execute(_SELECT_ORPHANED, params)).all()
    claimed = []
    for row in rows:
        touch = {"reminder_id": row.id, "cutoff": cutoff, "now": now}
        if (await conn.execute(_TOUCH, touch)).rowcount == 1:
            claimed.append(
                OverdueReminder(
                    row.id,
                    row.due_at,
                    tuple(row.channels),
                    row.schedule_version,
                    row.enqueued_at,
                    cancelled=row.state == ReminderState.CANCELLED.value,
                    customer_id=row.customer_id,
                )
            )
    return claimed


_ROWS = select(
    sr.c.reminder_id,
    sr.c.channel,
    sr.c.state,
    sr.c.lease_until,
    sr.c.next_attempt_at,
    sr.c.updated_at,
).where(sr.c.reminder_id.in_(bindparam("ids", expanding=True)))


async def ledger_rows(
    conn: AsyncConnection, reminder_ids: Sequence[str]
) -> dict[str, list[LedgerRow]]:
    """The ledger rows of these reminders, grouped by reminder id."""
    grouped: dict[str, list[LedgerRow]] = {reminder_id: [] for reminder_id in reminder_ids}
    if not reminder_ids:
        return grouped
    for row in await conn.execute(_ROWS, {"ids": list(reminder_ids)}):
        state = SendState(row.state)
        grouped[row.reminder_id].append(
            LedgerRow(row.channel, state, row.lease_until, row.next_attempt_at, row.updated_at)
        )
    return grouped


async def record_republished(
    conn: AsyncConnection, reminder_id: str, message_ids: Sequence[str]
) -> None:
    """Append the republished messages' ids to the reminder's enqueue bookkeeping."""
    current = (
        await conn.execute(select(r.c.enqueued_message_ids).where(r.c.id == reminder_id))
    ).scalar_one_or_none()
    ids = [*(current or []), *message_ids]
    await conn.execute(
        update(r)
        .where(r.c.id == reminder_id)
        .values(enqueued_message_ids=bindparam("ids", type_=JSON)),
        {"ids": ids},
    )


async def restore_enqueued_at(
    conn: AsyncConnection, claimed: Sequence[OverdueReminder], *, stamped: datetime
) -> None:
    """Undo the claim stamp of reminders whose republish failed (the next sweep retries)."""
    for reminder in claimed:
        await conn.execute(
            update(r)
            .where(r.c.id == reminder.id, r.c.enqueued_at == stamped)
            .values(enqueued_at=reminder.enqueued_at)
        )
