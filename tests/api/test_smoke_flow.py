"""The whole core path through HTTP: register, sweep, push, send once."""

from tests.support.flow import (
    deliver_all,
    get_reminder,
    push_message,
    put_customer,
    put_reminder,
    sweep,
)


async def test_due_reminder_is_swept_pushed_and_sent_exactly_once(
    client, clock, publisher, provider
):
    """A reminder due now goes through sweep → queue → receiver → provider once."""
    await put_customer(client, "cust_1")
    await put_reminder(client, "digest:cust_1:2026-W33", customer_id="cust_1", due_at=clock.now)

    report = await sweep(client)
    assert report["enqueued"] == 1
    assert report["remaining"] == 0
    [message] = list(publisher.messages)
    assert message.delay_seconds == 0
    assert message.idempotency_key == "digest:cust_1:2026-W33:email:v1"

    first = await push_message(client, message)
    assert first.status_code == 200
    assert first.json()["outcome"] == "sent"
    clock.advance(minutes=6)
    again = await push_message(client, message)
    assert again.json()["outcome"] == "duplicate"
    assert len(provider.calls) == 1

    reminder = await get_reminder(client, "digest:cust_1:2026-W33")
    assert reminder["state"] == "done"
    [record] = reminder["send_records"]
    assert record["state"] == "sent"
    assert record["attempt_count"] == 1
    publisher.drain()
    assert (await sweep(client))["enqueued"] == 0
    assert await deliver_all(client, publisher) == []
