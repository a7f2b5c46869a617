"""``repo``'s statements for many rows in one call: SQLite's shared transactions.

SQLite runs each statement in microseconds; what a delivery paid for was SQLAlchemy's work
around each one (compiled-cache lookup, parameter processing, a result object). Here the
same statements run once for a whole batch: an executemany (one call, the driver loops in
C), one ``IN`` read, or the claim with its rows given as one JSON array (``json_each``), as
PostgreSQL's group statements take arrays. Nothing here commits: the caller owns the
transaction.
"""

from __future__ import annotations

import itertools
import json
from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any

from sqlalchemy import String, bindparam, func, literal_column, select
from sqlalchemy.dialects import sqlite
from sqlalchemy.ext.asyncio import AsyncConnection

from app.domain.ledger import ClaimRequest, LedgerKey, SendRecordView
from app.domain.messages import CustomerView, ReminderView

from ..tables import customers, reminders, send_records
from ..types import UTCDateTime
from .repo import (
    CONTEXT_COLUMNS,
    SETTLE,
    claim_send,
    claim_source,
    claim_statement,
    finalize_parameters,
    finalize_statement,
)
from .rows import send_context, send_record_view

# One finalize: the claimed row, the instant, the columns it sets.
Finalize = tuple[SendRecordView, datetime, Mapping[str, Any]]

# Each claim as a JSON array of its fields, in ``claim_source``'s order.
_ITEMS = func.json_each(bindparam("items", type_=String())).table_valued("value").alias("item")


def _field(index: int) -> Any:
    return func.json_extract(_ITEMS.c.value, literal_column(f"'$[{index}]'"))


# ``repo.claim_statement`` for every item at once: each row claimable at its own instant
# (the insert's ``updated_at``), and back with its key to tell which item it answers.
_CLAIMS = claim_statement(
    sqlite.insert,
    source=claim_source(*(_field(index) for index in range(6))).select_from(_ITEMS),
    now=literal_column("excluded.updated_at"),
).returning(send_records.c.reminder_id, send_records.c.channel, send_records.c.provider)
# Instants as SQLite's column type stores them (the claimable rule compares that text).
_SQLITE = sqlite.dialect()
_STORE = UTCDateTime().dialect_impl(_SQLITE).bind_processor(_SQLITE)


def _stored(instant: datetime) -> Any:
    return _STORE(instant) if _STORE is not None else instant


def _carried(key: LedgerKey) -> bool:
    # Only text is written as text (a bound parameter of another type is refused by the
    # driver), and SQLite's JSON functions end a string at its first NUL.
    fields = (key.reminder_id, key.channel, key.provider, key.idempotency_key)
    return all(type(value) is str and "\x00" not in value for value in fields)


async def claim_sends(
    conn: AsyncConnection, claims: Sequence[ClaimRequest]
) -> list[SendRecordView | None]:
    """``repo.claim_send`` of each request (failover's guard aside) in one statement (SQLite;
    no two requests of one key): each claimed row, or None where it was not claimable.
    When a key cannot be carried exactly by the JSON array, each request runs the one-claim
    statement instead, in the same transaction."""
    if not all(_carried(item.key) for item in claims):
        return [
            await claim_send(conn, item.key, now=item.now, lease_until=item.lease_until)
            for item in claims
        ]
    items = [
        [item.key.reminder_id, item.key.channel, item.key.provider, _stored(item.lease_until),
         item.key.idempotency_key, _stored(item.now)]
        for item in claims
    ]  # fmt: skip
    result = await conn.execute(_CLAIMS, {"items": json.dumps(items)})
    claimed = {(row.reminder_id, row.channel, row.provider): row for row in result}
    rows = [
        claimed.get((item.key.reminder_id, item.key.channel, item.key.provider)) for item in claims
    ]
    return [None if row is None else send_record_view(row._mapping) for row in rows]


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
