"""SQL for recipients' own unsubscribes. Nothing here commits."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any

from sqlalchemy import delete, select
from sqlalchemy.ext.asyncio import AsyncConnection

from .dialects import insert_for
from .unsubscribe_tables import recipient_unsubscribes as unsubscribes


async def record(
    conn: AsyncConnection, customer_id: str, channel: str, *, method: str, now: datetime
) -> None:
    """Record a recipient's unsubscribe; the first one of a channel is kept."""
    stmt = insert_for(conn, unsubscribes).values(
        customer_id=customer_id, channel=channel, unsubscribed_at=now, method=method
    )
    keys = [unsubscribes.c.customer_id, unsubscribes.c.channel]
    await conn.execute(stmt.on_conflict_do_nothing(index_elements=keys))


async def list_for(conn: AsyncConnection, customer_id: str) -> list[dict[str, Any]]:
    """A customer's recorded unsubscribes, by channel."""
    stmt = (
        select(unsubscribes.c.channel, unsubscribes.c.unsubscribed_at, unsubscribes.c.method)
        .where(unsubscribes.c.customer_id == customer_id)
        .order_by(unsubscribes.c.channel)
    )
    return [dict(row._mapping) for row in await conn.execute(stmt)]


async def channels_by_customer(
    conn: AsyncConnection, customer_ids: Sequence[str]
) -> dict[str, set[str]]:
    """Recorded channels by customer, for these customers only."""
    if not customer_ids:
        return {}
    stmt = select(unsubscribes.c.customer_id, unsubscribes.c.channel).where(
        unsubscribes.c.customer_id.in_(list(customer_ids))
    )
    found: dict[str, set[str]] = {}
    for customer_id, channel in await conn.execute(stmt):
        found.setdefault(customer_id, set()).add(channel)
    return found


async def remove(conn: AsyncConnection, customer_id: str, channel: str) -> bool:
    """Forget a recipient's unsubscribe from a channel; False when there was none."""
    result = await conn.execute(
        delete(unsubscribes).where(
            unsubscribes.c.customer_id == customer_id, unsubscribes.c.channel == channel
        )
    )
    return result.rowcount > 0
