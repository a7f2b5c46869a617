"""The shared ledger reading's row: take the lease on the next reading, publish, read it."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import or_, select, update
from sqlalchemy.ext.asyncio import AsyncConnection

from .dialects import insert_for
from .ledger_reading_tables import READING_ROW
from .ledger_reading_tables import ledger_readings as lr


@dataclass(frozen=True, slots=True)
class StoredReading:
    """The last reading a process published: when it ended, and what it found."""

    taken_at: datetime
    snapshot: dict[str, Any]


async def last_reading(conn: AsyncConnection) -> StoredReading | None:
    """The last published reading, None before the first."""
    columns = (lr.c.taken_at, lr.c.snapshot)
    row = (await conn.execute(select(*columns).where(lr.c.id == READING_ROW))).first()
    if row is None or row.taken_at is None or row.snapshot is None:
        return None
    return StoredReading(row.taken_at, row.snapshot)


async def claim(
    conn: AsyncConnection, *, reader: str, now: datetime, lease_until: datetime
) -> bool:
    """Take the lease on the next reading if it is due (``next_at`` passed) and nobody
    holds it (or their lease expired: the reader died or froze); True when taken. The
    UPDATE decides: of two processes turning at once, one wins. The first process ever
    inserts the row."""
    due = or_(lr.c.next_at.is_(None), lr.c.next_at <= now)
    free = or_(lr.c.claimed_until.is_(None), lr.c.claimed_until <= now)
    taken = await conn.execute(
        update(lr)
        .where(lr.c.id == READING_ROW, due, free)
        .values(reader=reader, claimed_until=lease_until)
    )
    if taken.rowcount:
        return True
    first = insert_for(conn, lr).values(id=READING_ROW, reader=reader, claimed_until=lease_until)
    inserted = await conn.execute(first.on_conflict_do_nothing(index_elements=["id"]))
    return bool(inserted.rowcount)


async def publish(
    conn: AsyncConnection,
    *,
    reader: str,
    taken_at: datetime,
    next_at: datetime,
    snapshot: dict[str, Any],
) -> bool:
    """Store a reading and release the lease, if ``reader`` still holds it (a reader whose
    lease expired and was taken over leaves the newer reading alone); True when stored."""
    stored = await conn.execute(
        update(lr)
        .where(lr.c.id == READING_ROW, lr.c.reader == reader)
        .values(snapshot=snapshot, taken_at=taken_at, next_at=next_at, claimed_until=None)
    )
    return bool(stored.rowcount)
