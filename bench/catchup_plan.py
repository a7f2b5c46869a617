"""The sweep catch-up query's plan on PostgreSQL with 300k reminders (EXPLAIN ANALYZE).

Usage: ``.venv/bin/python bench/catchup_plan.py`` (PostgreSQL on 127.0.0.1:5432, trust auth).

Seeds 270k done, 27k scheduled and 3k enqueued reminders (about half of the enqueued ones
with a ledger row retrying in an hour, the rest with none: lost messages), then prints the
plan of the catch-up's candidate query exactly as ``app/db/catchup_repo.py`` builds it: an
index scan on ``ix_reminders_state_due_at`` with per-reminder lookups on the ledger's unique
index, stopping at the LIMIT.
"""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta

import asyncpg
from sqlalchemy import event

from app.db.catchup_repo import _SELECT_OVERDUE
from app.db.engine import create_engine
from app.db.migrations import upgrade_to_head

ADMIN = "postgresql://postgres@127.0.0.1:5432/postgres"
DB = "rr_bench_catchup_plan"
SEED = [
    "INSERT INTO customers (id, email, time_zone, opted_out_channels, created_at, updated_at)"
    " VALUES ('c1', 'a@example.com', 'UTC', '[]', now(), now())",
    "INSERT INTO reminders (id, customer_id, kind, due_at, channels, data, state,"
    " schedule_version, enqueued_at, created_at, updated_at)"
    " SELECT 'r' || i, 'c1', 'k', now() - i * interval '1 second', '[\"email\"]', '{}',"
    " CASE WHEN i % 100 = 0 THEN 'enqueued' WHEN i % 10 = 0 THEN 'scheduled' ELSE 'done' END,"
    " 1, now() - i * interval '1 second', now(), now() FROM generate_series(1, 300000) i",
    "INSERT INTO send_records (reminder_id, channel, provider, state, attempt_count,"
    " attempt_budget_start, idempotency_key, redrive_count, created_at, updated_at,"
    " next_attempt_at) SELECT id, 'email', 'outbox',"
    " CASE WHEN state = 'done' THEN 'sent' ELSE 'pending' END, 1, 0, id, 0, now(), now(),"
    " now() + interval '1 hour' FROM reminders"
    " WHERE state = 'done' OR (state = 'enqueued' AND random() < 0.5)",
    "ANALYZE",
]


def _explain(conn, cursor, statement, parameters, context, executemany):
    return "EXPLAIN (ANALYZE, BUFFERS) " + statement, parameters


async def main() -> None:
    admin = await asyncpg.connect(ADMIN)
    await admin.execute(f"DROP DATABASE IF EXISTS {DB}")
    await admin.execute(f"CREATE DATABASE {DB}")
    await admin.close()
    url = f"postgresql+asyncpg://postgres@127.0.0.1:5432/{DB}"
    await asyncio.to_thread(upgrade_to_head, url)
    engine = create_engine(url)
    try:
        async with engine.begin() as conn:
            for statement in SEED:
                await conn.exec_driver_sql(statement)
            # The statement as the repository runs it, with EXPLAIN put in front on the wire.
            event.listen(engine.sync_engine, "before_cursor_execute", _explain, retval=True)
            cutoff = datetime.now(UTC) - timedelta(minutes=30)
            plan = await conn.execute(_SELECT_OVERDUE, {"cutoff": cutoff, "limit": 500})
            print("\n".join(row[0] for row in plan))
    finally:
        await engine.dispose()
        admin = await asyncpg.connect(ADMIN)
        await admin.execute(f"DROP DATABASE IF EXISTS {DB}")
        await admin.close()


if __name__ == "__main__":
    asyncio.run(main())
