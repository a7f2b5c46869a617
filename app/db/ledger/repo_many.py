"""``repo``'s statements for many rows in one call: SQLite's shared transactions.

SQLite runs each statement in microseconds; what a delivery paid for was SQLAlchemy's work
around each one (compiled-cache lookup, parameter processing, a result object). Here the
same statements run once for a whole batch: an executemany (one call, the driver loops in
C) or one ``IN`` read. Nothing here commits: the caller owns the transaction.
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any

from sqlalchemy import bindparam, select
from sqlalchemy.ext.asyncio import AsyncConnection

from app.domain.ledger import SendRecordView
from app.domain.messages import CustomerView, ReminderView

from ..tables import customers, reminders
from .repo import CONTEXT_COLUMNS, SETTLE, finalize_parameters, finalize_statement
from .rows import send_context

# One finalize: the claimed row, the instant, the columns it sets.
Finalize = tuple[SendRecordView, datetime, Mapping[str, Any]]

_CONTEXTS = (
    select(reminders.c.id.label("context_of"), *CONTEXT_COLUMNS)
    .join_from(reminders, customers, reminders.c.customer_id == customers.c.id)
    .where(reminders.c.id.in_(bindparam("reminder_ids", expanding=True)))
)


async def load_send_contexts(
    conn: AsyncConnection, reminder_ids: Sequence[str]
) -> dict[str, tuple[ReminderView, CustomerView]]:
    """``repo.load_send_context`` of each reminder, in one statement; a reminder that no
    longer exists is missing from the answer."""
    if not reminder_ids:
        return {}
    result = await conn.execute(_CONTEXTS, {"reminder_ids": list(reminder_ids)})
    return {row.context_of: send_context(row.context_of, row._mapping) for row in result}


async def update_claimed_sends(conn: AsyncConnection, finalizes: Sequence[Finalize]) -> int:
    """``repo.update_claimed_send`` of each row: one executemany per set of columns. Returns
    how many rows the fence let through (all of them unless a lease was lost)."""
    by_columns = sorted(finalizes, key=_columns)
    updated = 0
    for columns, group in itertools.groupby(by_columns, key=_columns):
        parameters = [finalize_parameters(record, now, values) for record, now, values in group]
        updated += (await conn.execute(finalize_statement(columns), parameters)).rowcount
    return updated


def _columns(finalize: Finalize) -> tuple[str, ...]:
    return tuple(sorted(finalize[2]))


async def settle_reminders(
    conn: AsyncConnection, settles: Sequence[tuple[ReminderView, datetime]]
) -> None:
    """``repo.settle_reminder`` of each (reminder, instant), as one executemany."""
    if settles:
        await conn.execute(
            SETTLE,
            [
                {"reminder_id": reminder.id, "channel_count": len(reminder.channels), "now": now}
                for reminder, now in settles
            ],
        )
