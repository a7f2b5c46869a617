"""SQS on moto's server: a channel queue given by URL (``REMINDERS_SQS_QUEUE_URLS``) instead
of looked up by name, and a nack with a backoff beyond SQS's 12-hour visibility ceiling."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from app.adapters.queues.registry import build_publisher
from app.adapters.queues.sqs.build import build_sqs_consumer
from app.adapters.queues.sqs.client import SqsClient
from app.adapters.queues.sqs.consumer import SqsConsumer
from app.adapters.queues.sqs.publisher import SqsPublisher
from app.adapters.queues.sqs.settings import SqsSettings
from app.domain.errors import PublishError
from app.domain.messages import OutgoingMessage
from tests.support.sqs_fixtures import REGION

pytestmark = pytest.mark.anyio

ALIAS = "orders-by-url"  # a channel queue name no SQS queue is called


def test_queue_urls_are_read_as_queue_equals_url_pairs(monkeypatch):
    """``queue=url`` pairs separated by commas, blanks ignored; anything else is refused."""
    monkeypatch.setenv(
        "REMINDERS_SQS_QUEUE_URLS",
        " email = https://sqs.eu-west-1.amazonaws.com/123456789012/mail ,"
        "webhook=http://127.0.0.1:4566/000000000000/hooks,",
    )
    assert SqsSettings().queue_urls == {
        "email": "https://sqs.eu-west-1.amazonaws.com/123456789012/mail",
        "webhook": "http://127.0.0.1:4566/000000000000/hooks",
    }
    for wrong in ("email", "email=sqs.eu-west-1.amazonaws.com/1/mail"):
        monkeypatch.setenv("REMINDERS_SQS_QUEUE_URLS", wrong)
        with pytest.raises(ValidationError, match="is not queue=https://"):
            SqsSettings()


async def test_a_queue_given_by_url_is_published_to_and_received_from(
    settings, sqs_endpoint, sqs_queue
):
    """The alias has no SQS queue of its name (GetQueueUrl would fail, as without the
    setting); given its URL, the built publisher and consumer use the queue behind it."""
    lookup = SqsClient(region=REGION, endpoint_url=sqs_endpoint)
    url = await lookup.queue_url(sqs_queue)
    unmapped = SqsPublisher(SqsClient(region=REGION, endpoint_url=sqs_endpoint))
    message = OutgoingMessage(ALIAS, {"v": 1, "n": 1}, 0, "by-url-1")
    with pytest.raises(PublishError, match=f"SQS has no queue '{ALIAS}'"):
        await unmapped.publish(message)
    await unmapped.aclose()

    configured = settings.model_copy(
        update={
            "queue": "sqs",
            "queue_name": ALIAS,
            "sqs": SqsSettings(endpoint_url=sqs_endpoint, region=REGION, queue_urls={ALIAS: url}),
        }
    )
    publisher = build_publisher(configured)
    consumer = build_sqs_consumer(configured)
    try:
        message_id = await publisher.publish(message)
        [got] = await consumer.receive(ALIAS, max_messages=10, lease_seconds=30, wait_seconds=2)
        assert (got.delivery.queue, got.delivery.message_id) == (ALIAS, message_id)
        assert got.delivery.payload == {"v": 1, "n": 1}
        await consumer.ack(got)
        assert await consumer.backlog(ALIAS) == 0
    finally:
        await publisher.aclose()  # type: ignore[attr-defined]
        await consumer.close()
        await lookup.aclose()


async def test_a_nack_beyond_twelve_hours_is_capped_and_accepted(sqs_endpoint, sqs_queue):
    """A backoff of a day: SQS refuses a visibility ending more than 12 h after the receive
    (moto counts from the send), so the nack asks for what is left of the 12 hours. The
    message stays hidden and is not lost."""
    client = SqsClient(region=REGION, endpoint_url=sqs_endpoint)
    publisher = SqsPublisher(client)
    consumer = SqsConsumer(client)
    try:
        await publisher.publish(OutgoingMessage(sqs_queue, {"v": 1}, 0, "long-backoff"))
        [got] = await consumer.receive(sqs_queue, max_messages=1, lease_seconds=30, wait_seconds=2)
        assert await consumer.nack(got, delay=24 * 3600) is True
        assert (
            await consumer.receive(sqs_queue, max_messages=1, lease_seconds=30, wait_seconds=1)
            == []
        )
        attributes = await client.call(
            "get_queue_attributes",
            QueueUrl=await client.queue_url(sqs_queue),
            AttributeNames=["ApproximateNumberOfMessagesNotVisible"],
        )
        assert attributes["Attributes"]["ApproximateNumberOfMessagesNotVisible"] == "1"
    finally:
        await client.aclose()


async def test_a_nack_after_nearly_twelve_hours_held_asks_for_what_is_left(sqs_endpoint, sqs_queue):
    """The 12 hours count from the receive: a receipt held 11 h 59 min 30 s (the consumer's
    clock says) has nothing left to ask for, so the nack makes it visible again at once
    instead of asking for a visibility SQS would refuse."""
    client = SqsClient(region=REGION, endpoint_url=sqs_endpoint)
    now = [1000.0]
    consumer = SqsConsumer(client, clock=lambda: now[0])
    try:
        await SqsPublisher(client).publish(OutgoingMessage(sqs_queue, {"v": 1}, 0, "held-long"))
        [got] = await consumer.receive(sqs_queue, max_messages=1, lease_seconds=30, wait_seconds=2)
        now[0] += 12 * 3600 - 30
        assert await consumer.nack(got, delay=3600) is True
        [again] = await consumer.receive(
            sqs_queue, max_messages=1, lease_seconds=30, wait_seconds=2
        )
        assert again.delivery.attempt == 2
        await consumer.ack(again)
    finally:
        await client.aclose()
