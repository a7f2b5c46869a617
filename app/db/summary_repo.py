"""Read-only SQL summarizing the ledger: what ``reminders demo`` prints at the end."""

from __future__ import annotations

from typing import Any

from sqlalchemy import func, select
from sqlalchemy.ext.asyncio import AsyncConnection

from .tables import dead_letters, reminders, send_records

r, sr = reminders, send_records


async def ledger_rows(conn: AsyncConnection) -> list[dict[str, Any]]:
    """Every reminder with each of its ledger rows (a reminder without one appears once)."""
    stmt = (
        select(
            r.c.id.label("reminder_id"),
            r.c.state.label("reminder_state"),
            r.c.schedule_version,
            sr.c.channel,
            sr.c.provider,
            sr.c.state,
            sr.c.outcome,
            sr.c.attempt_count,
            sr.c.sent_at,
            sr.c.provider_request_id,
            sr.c.last_error_class,
        )
        .select_from(r.outerjoin(sr, sr.c.reminder_id == r.c.id))
        .order_by(r.c.created_at, r.c.id, sr.c.channel)
    )
    return [dict(row._mapping) for row in await conn.execute(stmt)]


async def outcome_counts(conn: AsyncConnection) -> dict[tuple[str, str | None], int]:
    """Ledger rows per (state, outcome)."""
    stmt = select(sr.c.state, sr.c.outcome, func.count()).group_by(sr.c.state, sr.c.outcome)
    return {(row[0], row[1]): int(row[2]) for row in await conn.execute(stmt)}


async def dead_letter_count(conn: AsyncConnection) -> int:
    """Rows in the dead-letter set."""
    return int((await conn.execute(select(func.count()).select_from(dead_letters))).scalar_one())
