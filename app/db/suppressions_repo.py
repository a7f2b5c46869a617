"""SQL for the suppression list. Nothing here commits."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any

from sqlalchemy import delete, func, select, update
from sqlalchemy.ext.asyncio import AsyncConnection

from app.domain.suppression import Suppression, SuppressionReason, replaces

from .deliverability_tables import suppressions as s
from .dialects import insert_for


async def add_suppression(conn: AsyncConnection, entry: Suppression, *, now: datetime) -> bool:
    """Put an address on the list; an address already there keeps its row unless the new
    reason is stronger (``replaces``). True when a row was written."""
    values = {
        "email": entry.email,
        "reason": entry.reason.value,
        "source": entry.source,
        "source_event_id": entry.source_event_id,
        "detail": entry.detail,
    }
    stmt = insert_for(conn, s).values(**values, created_at=now, updated_at=now)
    inserted = await conn.execute(stmt.on_conflict_do_nothing(index_elements=[s.c.email]))
    if inserted.rowcount > 0:
        return True
    old = await reason_for(conn, entry.email)
    if old is None or not replaces(entry.reason, SuppressionReason(old)):
        return False
    # Conditional on the reason read: a concurrent stronger report is never overwritten.
    changed = await conn.execute(
        update(s)
        .where(s.c.email == entry.email, s.c.reason == old)
        .values(**values, updated_at=now)
    )
    return changed.rowcount > 0


async def reason_for(conn: AsyncConnection, email: str) -> str | None:
    """The reason a normalized address is suppressed, or None."""
    return await conn.scalar(select(s.c.reason).where(s.c.email == email))


async def reasons_for(conn: AsyncConnection, emails: Sequence[str]) -> dict[str, str]:
    """The reasons of those normalized addresses that are suppressed (one statement)."""
    rows = await conn.execute(select(s.c.email, s.c.reason).where(s.c.email.in_(list(emails))))
    return {email: reason for email, reason in rows}


async def get_suppression(conn: AsyncConnection, email: str) -> dict[str, Any] | None:
    """One suppression as a mapping, or None."""
    row = (await conn.execute(select(s).where(s.c.email == email))).first()
    return dict(row._mapping) if row else None


async def list_suppressions(
    conn: AsyncConnection,
    *,
    email: str | None,
    domain: str | None,
    reason: str | None,
    after: str | None,
    limit: int,
) -> list[dict[str, Any]]:
    """Suppressions in email order after the keyset ``after``, narrowed by the filters."""
    stmt = select(s).order_by(s.c.email).limit(limit)
    if email is not None:
        stmt = stmt.where(s.c.email == email)
    if domain is not None:
        stmt = stmt.where(s.c.email.endswith(f"@{domain}", autoescape=True))
    if reason is not None:
        stmt = stmt.where(s.c.reason == reason)
    if after is not None:
        stmt = stmt.where(s.c.email > after)
    return [dict(row._mapping) for row in await conn.execute(stmt)]


async def remove_suppression(conn: AsyncConnection, email: str, *, reason: str) -> bool:
    """Lift a suppression still held for ``reason``; False when it changed or is gone."""
    result = await conn.execute(delete(s).where(s.c.email == email, s.c.reason == reason))
    return result.rowcount > 0


async def count_by_reason(conn: AsyncConnection) -> dict[str, int]:
    """How many addresses are suppressed, by reason (metrics, admin page)."""
    stmt = select(s.c.reason, func.count()).group_by(s.c.reason)
    return {reason: int(count) for reason, count in await conn.execute(stmt)}
