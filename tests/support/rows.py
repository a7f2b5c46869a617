"""Read rows straight from the database, to assert what the service stored."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncEngine

from app.db.tables import dead_letters, send_records


async def dead_letter_rows(engine: AsyncEngine) -> list[dict[str, Any]]:
    """Every dead_letters row, oldest first."""
    async with engine.connect() as conn:
        rows = await conn.execute(select(dead_letters).order_by(dead_letters.c.id))
        return [dict(row._mapping) for row in rows]


async def send_record_rows(engine: AsyncEngine) -> list[dict[str, Any]]:
    """Every send_records row, in insertion order."""
    async with engine.connect() as conn:
        rows = await conn.execute(select(send_records).order_by(send_records.c.id))
        return [dict(row._mapping) for row in rows]


def instant(value: str | None) -> datetime | None:
    """An ISO timestamp from the API as an aware datetime."""
    return None if value is None else datetime.fromisoformat(value)
