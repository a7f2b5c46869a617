"""Concurrent batches on separate connections: overlapping ids, opposite orders."""

from __future__ import annotations

import asyncio
from collections import Counter
from datetime import timedelta

import pytest
from sqlalchemy import func, select

from app.db.engine import create_engine
from app.db.tables import reminders
from app.services import customers
from app.services import reminders as service
from app.services.customers import CustomerChange

pytestmark = pytest.mark.anyio


async def test_overlapping_batches_in_opposite_orders_create_each_reminder_once(
    clean_database_url, clock
):
    """Two batches of the same 500 new ids (one reversed) and two of customers, at once on
    two engines: each id is created by exactly one batch and the other sees it unchanged (the
    lost create race re-reads the row), and 500 rows exist."""
    engines = [create_engine(clean_database_url) for _ in range(2)]
    try:
        due = clock.now + timedelta(hours=1)
        values = {
            "customer_id": "c1", "kind": "weekly_digest", "due_at": due, "expires_at": None,
            "channels": ["email"], "data": {},
        }  # fmt: skip
        items = [(f"r{n:03}", values) for n in range(500)]
        people = [(f"c{n}", CustomerChange(email=f"c{n}@example.com")) for n in range(1, 200)]

        async def register(engine, order):
            async with engine.begin() as conn:
                await customers.put_customers(conn, order(people), now=clock.now)
            async with engine.begin() as conn:
                return await service.put_reminders(conn, order(items), now=clock.now)

        async with engines[0].begin() as conn:
            await customers.put_customer(conn, "c1", CustomerChange(), now=clock.now)
        first, second = await asyncio.gather(
            register(engines[0], list), register(engines[1], lambda xs: list(reversed(xs)))
        )
        by_id: dict[str, list[str]] = {}
        for result in [*first, *second]:
            by_id.setdefault(result.id, []).append(result.status.value)
        assert Counter(tuple(sorted(s)) for s in by_id.values()) == {("created", "unchanged"): 500}
        async with engines[0].connect() as conn:
            count = await conn.execute(select(func.count()).select_from(reminders))
            assert count.scalar() == 500
    finally:
        for engine in engines:
            await engine.dispose()
