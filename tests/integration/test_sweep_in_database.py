"""The sweep onto the embedded queue in its own database builds the messages in SQL
(app/db/sweep_repo.py): what it stores must be what the Python publisher stores, read the
same way by the dispatcher, on both databases."""

import asyncio
import json
import uuid
from datetime import timedelta

import pytest

from app.adapters.queues.embedded.publisher import EmbeddedQueuePublisher
from app.db import queue_claim, queue_repo, reminders_repo
from app.db.engine import create_engine
from app.domain.messages import OutgoingMessage, parse_delivery_payload
from app.domain.queueing import MAX_DELAY_SECONDS as SEVEN_DAYS
from app.services import sweep as sweep_service
from app.services.sweep import SweepLimits, messages_for, sweep
from tests.integration.test_sweep import add_customer, add_reminders, engine

pytestmark = pytest.mark.anyio
__all__ = ["engine"]  # the fixture: an engine on the emptied test database
CHANNELS = frozenset({"email", "webhook"})


def queue_for(channel):
    return f"q-{channel}"


def run(engine, queue, clock, *, batch_size=5000):
    return sweep(
        engine,
        queue,
        queue_for=queue_for,
        clock=clock,
        limits=SweepLimits(batch_size=batch_size),
    )


async def stored(engine, clock):
    """Every message as the dispatcher claims it (a day later, when all are due), with the
    payload's stored text."""
    later = clock.now + timedelta(days=1)
    async with engine.begin() as conn:
        rows = await queue_repo.list_messages(conn, limit=1000)
        claimed = await queue_claim.claim_messages(conn, now=later, visible_until=later, limit=1000)
        cast = "payload::text" if conn.dialect.name == "postgresql" else "payload"
        raw = dict(
            (await conn.exec_driver_sql(f"SELECT message_id, {cast} FROM queue_messages")).all()
        )
    return claimed, raw, {row["message_id"]: row for row in rows}


async def test_sql_built_message_is_the_python_built_one(engine, clock):
    """A reminder on two channels at schedule version 2, due in three hours: each message's
    payload (as stored text and as the dispatcher reads it), queue, key and visible time are
    those of ``messages_for`` for the same reminder, and the reminder records the ids in
    channel order."""
    queue = EmbeddedQueuePublisher(engine, clock=clock)
    await add_customer(engine, clock)
    due_at = clock.now + timedelta(hours=3)
    await add_reminders(
        engine, clock, {"digest:c1:2026-W33": due_at}, channels=("webhook", "email")
    )
    async with engine.begin() as conn:
        await reminders_repo.update_reminder(
            conn, "digest:c1:2026-W33", {"schedule_version": 2}, now=clock.now
        )
    report = await run(engine, queue, clock)
    assert (report.enqueued, report.messages) == (1, 2)
    due = reminders_repo.DueReminder("digest:c1:2026-W33", due_at, ("webhook", "email"), 2)
    expected = messages_for(due, now=clock.now, max_delay=SEVEN_DAYS, queue_for=queue_for)
    claimed, raw, rows = await stored(engine, clock)
    by_channel = {message.payload["channel"]: message for message in claimed}
    for message in expected:
        got = by_channel[message.payload["channel"]]
        assert got.payload == dict(message.payload)
        assert json.loads(raw[got.message_id]) == dict(message.payload)
        assert parse_delivery_payload(got.payload, channels=CHANNELS) == parse_delivery_payload(
            json.loads(json.dumps(dict(message.payload))), channels=CHANNELS
        )
        assert got.queue == message.queue
        row = rows[got.message_id]
        assert row["idempotency_key"] == message.idempotency_key
        assert row["visible_at"] == clock.now + timedelta(seconds=message.delay_seconds)
        assert (row["state"], row["attempts"], row["max_retries"]) == ("ready", 0, 16)
    reminder = await _reminder(engine, "digest:c1:2026-W33")
    assert reminder["state"] == "enqueued" and reminder["sweep_claimed_until"] is None
    assert reminder["enqueued_message_ids"] == [
        by_channel["webhook"].message_id,
        by_channel["email"].message_id,
    ]


async def test_overdue_goes_now_and_beyond_the_horizon_waits(engine, clock):
    """An overdue reminder is visible at once; one due past the 7-day horizon is not taken."""
    queue = EmbeddedQueuePublisher(engine, clock=clock)
    await add_customer(engine, clock)
    await add_reminders(
        engine,
        clock,
        {"late": clock.now - timedelta(days=2), "far": clock.now + timedelta(days=8)},
    )
    report = await run(engine, queue, clock)
    assert (report.enqueued, report.remaining) == (1, 0)
    _, _, rows = await stored(engine, clock)
    [row] = rows.values()
    assert (row["payload"]["reminder_id"], row["visible_at"]) == ("late", clock.now)
    assert (await _reminder(engine, "far"))["state"] == "scheduled"


async def test_two_concurrent_sweeps_queue_each_reminder_channel_once(
    clean_database_url, engine, clock
):
    """Two sweeps on separate engines, small batches: one message per (reminder, channel)."""
    await add_customer(engine, clock)
    ids = {f"r{n:04}": clock.now + timedelta(minutes=n % 50) for n in range(300)}
    await add_reminders(engine, clock, ids, channels=("email", "webhook"))
    engines = [create_engine(clean_database_url) for _ in range(2)]
    try:
        reports = await asyncio.gather(
            *(
                run(other, EmbeddedQueuePublisher(other, clock=clock), clock, batch_size=7)
                for other in engines
            )
        )
    finally:
        for other in engines:
            await other.dispose()
    assert sum(report.enqueued for report in reports) == 300
    assert all(report.error is None for report in reports)
    _, _, rows = await stored(engine, clock)
    keys = sorted(row["idempotency_key"] for row in rows.values())
    assert keys == sorted(f"{rid}:{ch}:v1" for rid in ids for ch in ("email", "webhook"))


async def test_a_large_sweep_refreshes_the_planner_statistics(
    engine, clock, db_backend, monkeypatch
):
    """PostgreSQL: a sweep that queued at least ANALYZE_AFTER messages analyzes the tables
    it changed (a server with autovacuum off would otherwise plan with an empty queue's);
    a smaller one does not."""
    if db_backend != "postgresql":
        pytest.skip("SQLite plans without collected statistics")
    queue = EmbeddedQueuePublisher(engine, clock=clock)
    await add_customer(engine, clock)
    await add_reminders(engine, clock, {f"r{n}": clock.now for n in range(5)})
    monkeypatch.setattr(sweep_service, "ANALYZE_AFTER", 6)
    before = await _analyze_count(engine)
    await run(engine, queue, clock)
    assert await _analyze_count(engine) == before
    await add_reminders(engine, clock, {f"s{n}": clock.now for n in range(6)})
    await run(engine, queue, clock)
    assert await _analyze_count(engine) == before + 1


async def _analyze_count(engine):
    async with engine.connect() as conn:
        # The statistics collector reports with a delay; a fresh snapshot reads it now.
        await conn.exec_driver_sql("SELECT pg_stat_clear_snapshot()")
        result = await conn.exec_driver_sql(
            "SELECT analyze_count FROM pg_stat_user_tables WHERE relname = 'queue_messages'"
        )
        return result.scalar_one()


async def _reminder(engine, reminder_id):
    async with engine.connect() as conn:
        return await reminders_repo.get_reminder(conn, reminder_id)


def _uuid7_millis(message_id: str) -> int:
    """The Unix milliseconds of a UUIDv7 (RFC 9562), after checking its version and variant."""
    parsed = uuid.UUID(message_id)
    assert str(parsed) == message_id  # canonical lower-case text
    assert parsed.version == 7 and parsed.variant == uuid.RFC_4122, message_id
    return parsed.int >> 80


async def test_message_ids_are_uuid7s_of_the_publish_instant_on_both_paths(engine, clock):
    """The sweep's SQL and the Python publisher build the same kind of id: a UUIDv7 whose
    time is the publish instant (ids of one period sit together in the unique index), all
    distinct."""
    queue = EmbeddedQueuePublisher(engine, clock=clock)
    await add_customer(engine, clock)
    await add_reminders(engine, clock, {f"r{n}": clock.now for n in range(50)})
    report = await run(engine, queue, clock)
    assert report.enqueued == 50
    clock.advance(seconds=3)
    [python_built] = await queue.publish_batch([OutgoingMessage("q-email", {}, 0.0, "k:v1")])
    _, _, rows = await stored(engine, clock)
    swept = [message_id for message_id in rows if message_id != python_built]
    assert len(set(swept)) == 50
    millis = int(clock.now.timestamp() * 1000)
    assert {_uuid7_millis(message_id) for message_id in swept} == {millis - 3000}
    assert _uuid7_millis(python_built) == millis
    assert max(swept) < python_built  # time-ordered as text, too
