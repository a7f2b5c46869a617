"""The lists' queries read an index in their keyset order: no scan of the table, no sort."""

from __future__ import annotations

from datetime import timedelta

import pytest
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncConnection

from app.db.engine import create_engine
from app.db.reminders_repo import list_reminders_statement
from app.db.schedules_repo import list_schedules_statement
from tests.support.clock import FakeClock

pytestmark = pytest.mark.anyio
T0 = FakeClock().now
CURSOR = (T0, "r-0042")


async def _plan(conn: AsyncConnection, stmt) -> str:
    sql = str(stmt.compile(dialect=conn.dialect, compile_kwargs={"literal_binds": True}))
    if conn.dialect.name == "postgresql":
        # An empty table is cheapest to read whole (or through a bitmap, then sorted): forbid
        # both to see whether an index serves the order; without one the plan sorts.
        await conn.execute(text("SET LOCAL enable_seqscan = off"))
        await conn.execute(text("SET LOCAL enable_bitmapscan = off"))
        rows = await conn.execute(text(f"EXPLAIN {sql}"))
        return "\n".join(row[0] for row in rows)
    rows = await conn.execute(text(f"EXPLAIN QUERY PLAN {sql}"))
    return "\n".join(str(row[-1]) for row in rows)


def _reminders(**query):
    values = {"equal": {}, "due_after": None, "due_before": None, "after": CURSOR, "limit": 51}
    return list_reminders_statement(**(values | query))


@pytest.mark.parametrize(
    ("stmt", "index"),
    [
        (_reminders(), "ix_reminders_due_at_id"),
        (_reminders(due_before=T0 + timedelta(days=1)), "ix_reminders_due_at_id"),
        (_reminders(equal={"customer_id": "c1"}), "ix_reminders_customer_id_due_at_id"),
        (
            _reminders(equal={"customer_id": "c1", "kind": "renewal"}),
            "ix_reminders_customer_id_due_at_id",
        ),
        (_reminders(equal={"schedule_id": "s1"}), "ix_reminders_schedule_id_due_at_id"),
        (
            list_schedules_statement(customer_id="c1", after="s1", limit=51),
            "ix_schedules_customer_id_id",
        ),
    ],
    ids=["all", "due-range", "customer", "customer-kind", "schedule", "schedules-of-customer"],
)
async def test_list_queries_read_their_index_in_order(clean_database_url, stmt, index):
    """Each list's query is served by its index, already in the page's order (no sort)."""
    engine = create_engine(clean_database_url)
    try:
        async with engine.begin() as conn:
            plan = await _plan(conn, stmt)
    finally:
        await engine.dispose()
    assert index in plan, plan
    assert "Sort" not in plan and "TEMP B-TREE" not in plan, plan
