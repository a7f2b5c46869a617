"""The embedded queue's claim takes its batch from the index in (visible_at, id) order and
stops there: no sort of the waiting messages, however many share one ``visible_at`` (a
sweep batch's thousands do)."""

from datetime import timedelta

import pytest
from sqlalchemy import event

from app.adapters.queues.embedded.publisher import EmbeddedQueuePublisher
from app.db import queue_claim
from app.domain.messages import OutgoingMessage

pytestmark = pytest.mark.anyio


def message(number: int) -> OutgoingMessage:
    return OutgoingMessage(
        queue="reminders",
        payload={"v": 1, "reminder_id": f"r{number}"},
        delay_seconds=0.0,
        idempotency_key=f"r{number}:email:v1",
    )


async def test_a_claim_reads_its_batch_in_order_from_the_index(engine, clock, db_backend):
    """2,000 messages due at one instant: the claim takes the 64 lowest ids, and its plan
    (PostgreSQL with statistics, as autovacuum keeps them; SQLite) sorts nothing. Before
    migration 0018 PostgreSQL sorted them all; SQLite's index ends with the rowid anyway."""
    publisher = EmbeddedQueuePublisher(engine, max_retries=5, clock=clock)
    await publisher.publish_batch([message(number) for number in range(2000)])
    if db_backend == "postgresql":
        async with engine.begin() as conn:
            await conn.exec_driver_sql("ANALYZE queue_messages")
    executed = []

    def remember(_conn, _cursor, statement, parameters, _context, _many):
        executed.append((statement, parameters))

    event.listen(engine.sync_engine, "before_cursor_execute", remember)
    try:
        async with engine.begin() as conn:
            claimed = await queue_claim.claim_messages(
                conn, now=clock.now, visible_until=clock.now + timedelta(minutes=2), limit=64
            )
    finally:
        event.remove(engine.sync_engine, "before_cursor_execute", remember)
    async with engine.connect() as conn:
        lowest = await conn.exec_driver_sql("SELECT id FROM queue_messages ORDER BY id LIMIT 64")
        assert [message.id for message in claimed] == [row[0] for row in lowest]
        [(statement, parameters)] = [item for item in executed if "UPDATE" in item[0]]
        explain = "EXPLAIN " if db_backend == "postgresql" else "EXPLAIN QUERY PLAN "
        plan = [row[-1] for row in await conn.exec_driver_sql(explain + statement, parameters)]
    sorts = [line for line in plan if "Sort" in line or "TEMP B-TREE" in line]
    assert sorts == [], "\n".join(plan)
