"""SQL for ``reminders import``'s progress rows. Nothing here commits."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import delete, select, update
from sqlalchemy.ext.asyncio import AsyncConnection

from .dialects import insert_for
from .tables import import_progress as ip


async def get_progress(conn: AsyncConnection, source: str) -> dict[str, Any] | None:
    """The progress row of a file, or None when it was never imported."""
    row = (await conn.execute(select(ip).where(ip.c.source == source))).first()
    return row._asdict() if row else None


async def save_progress(
    conn: AsyncConnection,
    source: str,
    *,
    path: str,
    lines_done: int,
    counts: dict[str, Any],
    now: datetime,
) -> None:
    """Record how far the import got, in the transaction that applied those lines."""
    values = {
        "path": path,
        "lines_done": lines_done,
        "counts": counts,
        "updated_at": now,
    }
    stmt = insert_for(conn, ip).values(source=source, created_at=now, **values)
    await conn.execute(stmt.on_conflict_do_update(index_elements=[ip.c.source], set_=values))


async def mark_finished(conn: AsyncConnection, source: str, *, now: datetime) -> None:
    """The whole file was applied."""
    await conn.execute(
        update(ip).where(ip.c.source == source).values(finished_at=now, updated_at=now)
    )


async def forget_progress(conn: AsyncConnection, source: str) -> None:
    """Start the file over (``--restart``)."""
    await conn.execute(delete(ip).where(ip.c.source == source))
