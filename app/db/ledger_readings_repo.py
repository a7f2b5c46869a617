"""The shared ledger reading's row: read it, take the lease on the next reading, publish."""

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
class ReadingRow:
    """The row as it is: the last reading published, when the next is due, the lease."""

    taken_at: datetime | None
    next_at: datetime | None
    claimed_until: datetime | None
    snapshot: dict[str, Any] | None

    def open_to(self, now: datetime) -> bool:
        """Whether a process may take the next reading at ``now``: it is due, and nobody
        holds the lease (or their lease expired: the reader died or froze)."""
        due = self.next_at is None or self.next_at <= now
        return due and (self.claimed_until is None or self.claimed_until <= now)


async def reading_row(conn: AsyncConnection) -> ReadingRow | None:
    """The row, None before any process wrote it."""
    columns = (lr.c.taken_at, lr.c.next_at, lr.c.claimed_until, lr.c.snapshot)
    row = (await conn.execute(select(*columns).where(lr.c.id == READING_ROW))).first()
    return None if row is None else ReadingRow(*row)


async def claim(
    conn: AsyncConnection, *, reader: str, now: datetime, lease_until: datetime
) -> bool:
    """Take the lease on the next reading if it is still open to ``now`` (the same test as
    ``ReadingRow.open_to``, made again by the UPDATE: of two processes, one wins); True
    when taken. The first process ever inserts the row."""
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
