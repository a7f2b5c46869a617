"""The embedded queue's publisher on a real database: limits, the dedup window, batches."""

from __future__ import annotations

from datetime import timedelta

import pytest
from sqlalchemy.ext.asyncio import AsyncEngine

from app.adapters.queues.embedded.publisher import EmbeddedQueuePublisher
from app.db import queue_repo
from app.domain.errors import PublishError
from app.domain.messages import OutgoingMessage
from app.domain.ports import MAX_MESSAGE_BYTES
from tests.support.clock import FakeClock

# Marked here, not only by conftest's collection hook: parametrized async tests need the
# anyio marker before parametrization.
pytestmark = pytest.mark.anyio


@pytest.fixture
def publisher(engine: AsyncEngine, clock: FakeClock) -> EmbeddedQueuePublisher:
    return EmbeddedQueuePublisher(engine, max_retries=5, clock=clock)


def message(key: str = "r1:email:v1", *, delay: float = 0.0, payload: dict | None = None):
    return OutgoingMessage(
        queue="reminders",
        payload=payload or {"v": 1, "reminder_id": "r1"},
        delay_seconds=delay,
        idempotency_key=key,
    )


async def stored(engine: AsyncEngine) -> list[dict]:
    async with engine.connect() as conn:
        return await queue_repo.list_messages(conn)


async def test_a_message_is_stored_visible_after_its_delay_with_30_days_retention(
    publisher, engine, clock
):
    """The row carries the payload, visible_at = now + delay, expires_at = now + 30 days."""
    message_id = await publisher.publish(message(delay=90))
    [row] = await stored(engine)
    assert row["message_id"] == message_id
    assert row["payload"] == {"v": 1, "reminder_id": "r1"}
    assert row["visible_at"] == clock.now + timedelta(seconds=90)
    assert row["expires_at"] == clock.now + timedelta(days=30)
    assert (row["state"], row["attempts"], row["max_retries"]) == ("ready", 0, 5)


async def test_the_same_key_within_five_minutes_is_one_message(publisher, engine, clock):
    """A key reused inside the dedup window returns the first id and stores nothing new."""
    first = await publisher.publish(message())
    clock.advance(minutes=4, seconds=59)
    assert await publisher.publish(message()) == first
    assert len(await stored(engine)) == 1


async def test_the_window_outlives_the_message(publisher, engine, clock):
    """Dedup is by key and publish time, not by whether the message is still queued."""
    first = await publisher.publish(message())
    ids = [row["id"] for row in await stored(engine)]
    async with engine.begin() as conn:  # the dispatcher acknowledged it
        await queue_repo.delete_messages(conn, ids)
    clock.advance(minutes=2)
    assert await publisher.publish(message()) == first
    assert await stored(engine) == []


async def test_after_five_minutes_the_same_key_is_a_new_message(publisher, engine, clock):
    """Like the managed queue, the window is 5 minutes only: later, the key publishes again."""
    first = await publisher.publish(message())
    clock.advance(minutes=5)
    second = await publisher.publish(message())
    assert second != first
    assert [row["message_id"] for row in await stored(engine)] == [first, second]


async def test_a_batch_returns_ids_in_order_and_dedups_inside_itself(publisher, engine):
    """publish_batch: one id per message in order; a key repeated in the batch shares its id."""
    ids = await publisher.publish_batch([message("a"), message("b"), message("a")])
    assert ids[0] == ids[2] != ids[1]
    assert len(await stored(engine)) == 2


async def test_a_large_batch_is_stored_in_chunks(publisher, engine):
    """More messages than one statement carries are all stored, ids distinct."""
    ids = await publisher.publish_batch([message(f"k{i}") for i in range(1200)])
    assert len(set(ids)) == 1200
    assert len(await stored(engine)) == 100  # list_messages' default page
    async with engine.connect() as conn:
        assert (await queue_repo.count_by_state(conn))["ready"] == 1200


@pytest.mark.parametrize(
    "bad",
    [
        message(delay=7 * 24 * 3600 + 1),
        message(delay=-1),
        message(key=""),
        message(payload={"blob": "x" * MAX_MESSAGE_BYTES}),
    ],
    ids=["delay-over-7-days", "negative-delay", "no-key", "payload-over-256KB"],
)
async def test_what_the_managed_queue_refuses_is_refused_and_nothing_is_stored(
    publisher, engine, bad
):
    """The managed queue's limits hold locally; a refused batch stores none of its messages."""
    with pytest.raises(PublishError):
        await publisher.publish_batch([message("fine"), bad])
    assert await stored(engine) == []


async def test_the_longest_allowed_delay_is_accepted(publisher, engine, clock):
    """Exactly 7 days of delay is within the limit."""
    await publisher.publish(message(delay=7 * 24 * 3600))
    [row] = await stored(engine)
    assert row["visible_at"] == clock.now + timedelta(days=7)


async def test_listeners_hear_about_each_committed_publish(publisher):
    """on_publish callbacks run after the publish committed (an in-process dispatcher wakes)."""
    calls = []
    publisher.on_publish(lambda: calls.append(1))
    await publisher.publish(message())
    await publisher.publish_batch([message("x"), message("y")])
    assert calls == [1, 1]
