"""SQL for the admin page's live views: outcomes per hour, recent sends, reminder search.

Nothing here commits. Each read is served by an index: ``send_attempts.claimed_at`` for the
hourly chart (the append-only history of attempts: a send's later success never moves its
earlier failures), the primary key for the newest-first send pages, ``reminders.customer_id``
and ``customers.email`` for the search.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import BigInteger, ColumnElement, Integer, cast, extract, func, or_, select
from sqlalchemy.ext.asyncio import AsyncConnection

from .attempts_repo import attempt_result
from .tables import customers, reminders, send_attempts, send_records

sr, r, sa_ = send_records, reminders, send_attempts
HOUR_SECONDS = 3600


def _epoch_hour(conn: AsyncConnection, moment: Any) -> ColumnElement[int]:
    """Whole hours since the Unix epoch of ``moment``, independent of the session's time
    zone (SQLite stores naive UTC text; PostgreSQL a timestamptz)."""
    if conn.dialect.name == "postgresql":
        epoch = extract("epoch", moment)
        return cast(func.floor(epoch / HOUR_SECONDS), BigInteger)
    seconds = cast(func.strftime("%s", moment), Integer)
    return cast(seconds / HOUR_SECONDS, Integer)


async def outcomes_per_hour(
    conn: AsyncConnection, *, since: datetime
) -> list[tuple[int, str, int]]:
    """Attempts claimed since an instant, counted per epoch hour of their claim and result
    (``attempts_repo.attempt_result``): ``(epoch hour, result, count)``."""
    hour, label = _epoch_hour(conn, sa_.c.claimed_at).label("hour"), attempt_result()
    stmt = (
        select(hour, label.label("outcome"), func.count())
        .where(sa_.c.claimed_at >= since)
        .group_by(hour, label)
        .order_by(hour)
    )
    return [(int(h), str(o), int(n)) for h, o, n in await conn.execute(stmt)]


async def send_states(conn: AsyncConnection, ids: list[int]) -> dict[int, str]:
    """The current state of each of these send records (to show rows after an action)."""
    if not ids:
        return {}
    rows = await conn.execute(select(sr.c.id, sr.c.state).where(sr.c.id.in_(ids)))
    return {int(ident): str(state) for ident, state in rows}


async def sends_newest_first(
    conn: AsyncConnection, *, before_id: int | None, limit: int
) -> list[dict[str, Any]]:
    """Send records by descending id, below a cursor id (None: from the newest)."""
    stmt = select(sr).order_by(sr.c.id.desc()).limit(limit)
    if before_id is not None:
        stmt = stmt.where(sr.c.id < before_id)
    return [dict(row._mapping) for row in await conn.execute(stmt)]


async def find_reminders(conn: AsyncConnection, term: str, *, limit: int) -> list[dict[str, Any]]:
    """Reminders whose id or customer id is ``term``, or whose customer's email is ``term``
    (exact, as stored), newest due first."""
    by_email = select(customers.c.id).where(customers.c.email == term)
    stmt = (
        select(r.c.id, r.c.customer_id, r.c.kind, r.c.state, r.c.delivery, r.c.due_at, r.c.channels)
        .where(or_(r.c.id == term, r.c.customer_id == term, r.c.customer_id.in_(by_email)))
        .order_by(r.c.due_at.desc(), r.c.id)
        .limit(limit)
    )
    return [dict(row._mapping) for row in await conn.execute(stmt)]
