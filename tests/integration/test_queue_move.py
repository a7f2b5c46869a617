"""Moving the embedded queue's waiting messages onto another queue kind (``reminders
move-embedded``): each keeps its due time, or goes back to the sweep when the new queue
cannot delay it that far; channels still on the embedded queue keep theirs; a failed
publish deletes nothing."""

from __future__ import annotations

from datetime import timedelta

import pytest
from sqlalchemy import update

from app.adapters.queues.embedded.publisher import EmbeddedQueuePublisher
from app.adapters.queues.memory.publisher import MemoryPublisher
from app.db import queue_repo
from app.db.queue_tables import queue_messages
from app.domain.errors import PublishError
from app.services.queue_move import QueueChange, move_embedded_messages
from tests.support.flow import get_reminder, put_customer, put_reminder, sweep

pytestmark = pytest.mark.anyio

SQS_HORIZON = 900.0
ON_SQS = QueueChange(
    queue_for=lambda channel: f"sqs-{channel}",
    kind_for=lambda channel: "sqs" if channel == "email" else "embedded",
    channels=frozenset({"email", "webhook"}),
)


@pytest.fixture
async def swept(client, container, clock):
    """Reminders due now, in 10 minutes (within SQS's horizon) and in 2 hours (beyond it),
    swept into the embedded queue; one webhook reminder whose channel stays embedded."""
    container.publisher = EmbeddedQueuePublisher(container.engine, clock=clock)
    await put_customer(client, "c1", webhook_url="https://hooks.example.com/r")
    await put_reminder(client, "now", customer_id="c1", due_at=clock.now)
    await put_reminder(client, "soon", customer_id="c1", due_at=clock.now + timedelta(minutes=10))
    await put_reminder(client, "later", customer_id="c1", due_at=clock.now + timedelta(hours=2))
    await put_reminder(client, "hook", customer_id="c1", due_at=clock.now, channels=("webhook",))
    assert (await sweep(client))["messages"] == 4
    return container


async def waiting(container) -> dict[str, str]:
    async with container.engine.connect() as conn:
        rows = await queue_repo.list_messages(conn)
    return {row["payload"]["reminder_id"]: row["state"] for row in rows}


async def test_each_message_keeps_its_due_time_or_returns_to_the_sweep(swept, client, clock):
    clock.advance(seconds=30)
    target = MemoryPublisher(max_delay_seconds=SQS_HORIZON, clock=clock)
    report = await move_embedded_messages(swept.engine, target, ON_SQS, clock=clock)
    assert report.as_dict() == {"published": 2, "returned_to_sweep": 1, "kept": 1}
    published = {m.payload["reminder_id"]: m for m in target.messages}
    assert set(published) == {"now", "soon"}
    assert published["now"].delay_seconds == 0
    assert published["soon"].delay_seconds == pytest.approx(570)
    assert published["soon"].queue == "sqs-email"
    assert published["soon"].idempotency_key == "soon:email:v1"
    assert await waiting(swept) == {"hook": "ready"}  # the webhook channel stays embedded
    assert (await get_reminder(client, "later"))["state"] == "scheduled"
    assert (await get_reminder(client, "soon"))["state"] == "enqueued"

    again = await move_embedded_messages(swept.engine, target, ON_SQS, clock=clock)
    assert again.as_dict() == {"published": 0, "returned_to_sweep": 0, "kept": 1}
    assert len(target.messages) == 2


async def test_a_message_a_dispatcher_holds_is_moved_too(swept, clock):
    """Claimed by a dispatcher of the old configuration (visible later, one delivery
    counted): it is published now as well; the ledger admits one of the two deliveries."""
    async with swept.engine.begin() as conn:
        await conn.execute(
            update(queue_messages)
            .where(queue_messages.c.visible_at <= clock.now)
            .values(visible_at=clock.now + timedelta(seconds=30), attempts=1)
        )
    target = MemoryPublisher(max_delay_seconds=SQS_HORIZON, clock=clock)
    report = await move_embedded_messages(swept.engine, target, ON_SQS, clock=clock)
    assert report.published == 2
    [held] = [m for m in target.messages if m.payload["reminder_id"] == "now"]
    assert held.delay_seconds == 30


async def test_a_refused_publish_deletes_nothing(swept, clock):
    class Refusing(MemoryPublisher):
        async def publish_batch(self, messages):
            raise PublishError("the queue is down")

    before = await waiting(swept)
    with pytest.raises(PublishError):
        await move_embedded_messages(
            swept.engine, Refusing(max_delay_seconds=SQS_HORIZON, clock=clock), ON_SQS,
            clock=clock,
        )  # fmt: skip
    assert await waiting(swept) == before
