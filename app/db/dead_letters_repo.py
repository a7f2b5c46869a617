"""SQL for the dead-letter set. Nothing here commits."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.ext.asyncio import AsyncConnection

from .tables import dead_letters

_INSERTS = {"postgresql": postgresql.insert, "sqlite": sqlite.insert}


async def add_dead_letter(
    conn: AsyncConnection,
    *,
    now: datetime,
    queue: str,
    reason: str,
    message_id: str | None = None,
    payload: Any = None,
    send_record_id: int | None = None,
    reminder_id: str | None = None,
    channel: str | None = None,
    error_class: str | None = None,
    error: str | None = None,
    attempts: int = 0,
    first_failed_at: datetime | None = None,
) -> None:
    """Record one message operators must look at (once per queue message id)."""
    insert = _INSERTS[conn.dialect.name]
    await conn.execute(
        insert(dead_letters)
        .values(
            send_record_id=send_record_id,
            queue=queue,
            message_id=message_id,
            reminder_id=reminder_id,
            channel=channel,
            payload=payload,
            reason=reason,
            error_class=error_class,
            error=error,
            attempts=attempts,
            first_failed_at=first_failed_at or now,
            last_failed_at=now,
            created_at=now,
        )
        .on_conflict_do_nothing(index_elements=[dead_letters.c.queue, dead_letters.c.message_id])
    )
