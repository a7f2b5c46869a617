"""SQL for customers. Nothing here commits."""

from __future__ import annotations

from collections.abc import Callable, Collection, Sequence
from datetime import datetime
from operator import itemgetter
from typing import Any

from sqlalchemy import select, update
from sqlalchemy.ext.asyncio import AsyncConnection

from .dialects import among, insert_for, lock_by_id
from .tables import customers


async def get_customer(conn: AsyncConnection, customer_id: str) -> dict[str, Any] | None:
    """One customer as a mapping, or None."""
    row = (await conn.execute(select(customers).where(customers.c.id == customer_id))).first()
    return dict(row._mapping) if row else None


async def lock_customers(
    conn: AsyncConnection, customer_ids: Collection[str]
) -> dict[str, dict[str, Any]]:
    """The existing customers among ``customer_ids`` by id, row-locked (see lock_by_id)."""
    return await lock_by_id(conn, customers, customer_ids)


async def contacts(
    conn: AsyncConnection, customer_ids: Collection[str]
) -> dict[str, dict[str, Any]]:
    """The existing customers among ``customer_ids`` by id, with their recipient fields."""
    if not customer_ids:
        return {}
    c = customers.c
    stmt = select(c.id, c.email, c.webhook_url).where(among(conn, c.id, customer_ids))
    return {row.id: row._asdict() for row in await conn.execute(stmt)}


async def upsert_customers(
    conn: AsyncConnection, rows: Sequence[dict[str, Any]], *, now: datetime
) -> None:
    """Create each customer or overwrite its fields (created_at is kept); one statement, rows
    in id order (as the locks are taken: concurrent batches wait, never deadlock)."""
    if not rows:
        return
    rows = sorted(rows, key=itemgetter("id"))
    stmt = insert_for(conn, customers)
    columns = [name for name in rows[0] if name != "id"]
    stmt = stmt.on_conflict_do_update(
        index_elements=[customers.c.id],
        set_={**{name: stmt.excluded[name] for name in columns}, "updated_at": now},
    )
    await conn.execute(stmt, [{**row, "created_at": now, "updated_at": now} for row in rows])


async def disable_webhook(conn: AsyncConnection, customer_id: str, *, now: datetime) -> None:
    """Stop webhook sends to this customer (its endpoint answered 410 Gone)."""
    await conn.execute(
        update(customers)
        .where(customers.c.id == customer_id, customers.c.webhook_disabled_at.is_(None))
        .values(webhook_disabled_at=now, updated_at=now)
    )


async def opt_out_channel(
    conn: AsyncConnection, customer_id: str, channel: str, *, now: datetime
) -> bool:
    """Add ``channel`` to the customer's opt-outs; False when the customer does not exist."""
    return await _change_opt_outs(conn, customer_id, lambda current: current | {channel}, now)


async def opt_in_channel(
    conn: AsyncConnection, customer_id: str, channel: str, *, now: datetime
) -> bool:
    """Remove ``channel`` from the customer's opt-outs; False when the customer does not exist."""
    return await _change_opt_outs(conn, customer_id, lambda current: current - {channel}, now)


async def _change_opt_outs(
    conn: AsyncConnection,
    customer_id: str,
    change: Callable[[set[str]], set[str]],
    now: datetime,
) -> bool:
    # Read-modify-write under the row lock: a concurrent PUT or unsubscribe waits.
    row = (
        await conn.execute(
            select(customers.c.opted_out_channels)
            .where(customers.c.id == customer_id)
            .with_for_update()
        )
    ).first()
    if row is None:
        return False
    current = set(row.opted_out_channels or ())
    wanted = change(current)
    if wanted != current:
        await conn.execute(
            update(customers)
            .where(customers.c.id == customer_id)
            .values(opted_out_channels=sorted(wanted), updated_at=now)
        )
    return True
