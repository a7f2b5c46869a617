"""A message the catch-up publishes again keeps the customer as its group, as the sweep's
first one did (SQS FIFO's MessageGroupId: one customer's reminders stay in order)."""

import pytest

from tests.support.flow import put_customer, put_reminder, sweep
from tests.support.recording import RecordingPublisher

pytestmark = pytest.mark.anyio


@pytest.fixture
def publisher(clock):
    """Every message the service asks to publish, recorded (none is delivered)."""
    return RecordingPublisher(clock)


async def test_a_republished_message_keeps_its_customer_as_group(client, clock, publisher):
    """Swept, never delivered, republished after the margin: both carry the customer."""
    await put_customer(client, "c1")
    await put_reminder(client, "r1", customer_id="c1", due_at=clock.now)
    assert (await sweep(client))["enqueued"] == 1
    clock.advance(minutes=31)
    assert (await sweep(client))["republished"] == 1
    keys = [(m.idempotency_key.split(":catchup:")[0], m.group) for m in publisher.requested]
    assert keys == [("r1:email:v1", "c1"), ("r1:email:v1", "c1")]
