"""Amazon SQS on moto's server (its own process): batches, delays, FIFO deduplication, the
worker's verbs (visibility as the lease, ChangeMessageVisibility as nack), the redrive to
the DLQ and the sweep's catch-up after it."""

from __future__ import annotations

import asyncio
import json
import random
import time

import pytest

from app.adapters.queues.sqs.client import SqsClient
from app.adapters.queues.sqs.consumer import SqsConsumer
from app.adapters.queues.sqs.publisher import SqsPublisher
from app.adapters.queues.sqs.setup import create_queues, dead_letter_queue
from app.domain.errors import PublishError, TransientProviderError
from app.domain.messages import OutgoingMessage
from app.services.pull_worker import PullWorkerConfig, WorkerStats, poll_once, run_pull_worker
from tests.support.flow import put_customer, put_reminder, sweep
from tests.support.rows import send_record_rows
from tests.support.sqs_fixtures import REGION

pytestmark = pytest.mark.anyio


@pytest.fixture
def settings(settings, sqs_queue):
    """The service's settings with every channel on the test's queue."""
    return settings.model_copy(update={"queue_name": sqs_queue})


@pytest.fixture
async def publisher(sqs_endpoint):
    built = SqsPublisher(SqsClient(region=REGION, endpoint_url=sqs_endpoint))
    yield built
    await built.aclose()


@pytest.fixture
async def consumer(sqs_endpoint):
    built = SqsConsumer(SqsClient(region=REGION, endpoint_url=sqs_endpoint))
    yield built
    await built.close()


def config(queue: str, **overrides) -> PullWorkerConfig:
    return PullWorkerConfig(queues=(queue,), **{"wait_seconds": 1, **overrides})


async def drain(receiver, consumer, queue, stats, *, rounds: int = 3, **overrides) -> None:
    for _ in range(rounds):
        if not await poll_once(receiver, consumer, config(queue, **overrides), stats):
            return


async def test_batches_of_ten_with_delays_and_a_missing_queue_named(publisher, consumer, sqs_queue):
    """25 messages go out in SendMessageBatch calls; a 4 s delay holds one back that long."""
    messages = [OutgoingMessage(sqs_queue, {"n": n}, 0, f"k{n}") for n in range(25)]
    published = time.monotonic()
    delayed = OutgoingMessage(sqs_queue, {"n": 99}, 4, "late")
    ids = await publisher.publish_batch([*messages, delayed])
    assert len(set(ids)) == 26
    arrivals: dict[int, float] = {}
    while len(arrivals) < 26 and time.monotonic() - published < 20:
        batch = await consumer.receive(sqs_queue, max_messages=10, lease_seconds=30, wait_seconds=1)
        for message in batch:
            arrivals[message.delivery.payload["n"]] = time.monotonic() - published
            assert message.delivery.attempt == 1
            await consumer.ack(message)
    assert len(arrivals) == 26 and arrivals[99] >= 4
    with pytest.raises(PublishError, match="reminders setup --queue sqs"):
        await publisher.publish(OutgoingMessage("no-such-queue-x", {"v": 1}, 0, "k"))


async def test_fifo_deduplicates_by_idempotency_key(sqs_endpoint):
    """On a FIFO queue the same key published twice is one message (no delay there)."""
    client = SqsClient(region=REGION, endpoint_url=sqs_endpoint)
    queue = f"test-fifo-{time.time_ns()}.fifo"
    await create_queues(client, [queue], max_receive_count=4)
    publisher = SqsPublisher(client, fifo=True)
    try:
        assert publisher.max_delay_seconds == 0
        payload = {"v": 1, "reminder_id": "r1", "channel": "email", "schedule_version": 1}
        message = OutgoingMessage(queue, payload, 0, "r1:email:v1")
        await publisher.publish_batch([message, message])
        consumer = SqsConsumer(client)
        got = await consumer.receive(queue, max_messages=10, lease_seconds=30, wait_seconds=1)
        assert len(got) == 1
    finally:
        for name in (queue, dead_letter_queue(queue)):
            await client.call("delete_queue", QueueUrl=await client.queue_url(name))
        await client.aclose()


async def test_fifo_groups_by_customer(sqs_endpoint):
    """A FIFO message's MessageGroupId is its customer (one customer's reminders in order,
    others not held behind them); a message without one is grouped by its reminder."""
    client = SqsClient(region=REGION, endpoint_url=sqs_endpoint)
    queue = f"test-fifo-{time.time_ns()}.fifo"
    await create_queues(client, [queue], max_receive_count=4)
    publisher = SqsPublisher(client, fifo=True)

    def message(reminder_id: str, group: str | None) -> OutgoingMessage:
        payload = {"v": 1, "reminder_id": reminder_id, "channel": "email", "schedule_version": 1}
        return OutgoingMessage(queue, payload, 0, f"{reminder_id}:email:v1", group=group)

    try:
        await publisher.publish_batch(
            [message("a:cust_1", "cust_1"), message("b:cust_1", "cust_1"), message("c", None)]
        )
        url = await client.queue_url(queue)
        groups: dict[str, str] = {}
        for _ in range(5):
            got = await client.call(
                "receive_message",
                QueueUrl=url,
                MaxNumberOfMessages=10,
                AttributeNames=["MessageGroupId"],
                WaitTimeSeconds=1,
            )
            for item in got.get("Messages", []):
                body = json.loads(item["Body"])
                groups[body["reminder_id"]] = item["Attributes"]["MessageGroupId"]
                await client.call(
                    "delete_message", QueueUrl=url, ReceiptHandle=item["ReceiptHandle"]
                )
            if len(groups) == 3:
                break
        assert groups == {"a:cust_1": "cust_1", "b:cust_1": "cust_1", "c": "c"}
    finally:
        for name in (queue, dead_letter_queue(queue)):
            await client.call("delete_queue", QueueUrl=await client.queue_url(name))
        await client.aclose()


async def test_swept_reminder_sent_once_and_deleted(
    client, container, consumer, provider, clock, settings, publisher
):
    """Sweep → SQS → the worker sends and deletes it; a duplicate publish is acked as such."""
    container.publisher = publisher
    await put_customer(client, "cust_1")
    await put_reminder(client, "renewal:cust_1", customer_id="cust_1", due_at=clock.now)
    assert (await sweep(client))["messages"] == 1
    payload = {"v": 1, "reminder_id": "renewal:cust_1", "channel": "email", "schedule_version": 1}
    await publisher.publish(
        OutgoingMessage(settings.queue_name, payload, 0, "renewal:cust_1:email:v1")
    )
    stats = WorkerStats()
    await drain(container.receiver, consumer, settings.queue_name, stats, max_messages=1)
    assert stats.outcomes == {"sent": 1, "duplicate": 1} and stats.acked == 2
    assert len(provider.calls) == 1
    assert await consumer.backlog(settings.queue_name) == 0


async def test_nack_is_a_visibility_change_and_the_receive_count_is_the_attempt(
    client, container, consumer, provider, clock, settings, publisher
):
    """A transient failure: visible again after our backoff, then sent as attempt 2."""
    container.publisher = publisher
    provider.script.append(TransientProviderError("smtp 451"))
    await put_customer(client, "cust_1")
    await put_reminder(client, "renewal:cust_1", customer_id="cust_1", due_at=clock.now)
    await sweep(client)
    stats = WorkerStats()
    await drain(container.receiver, consumer, settings.queue_name, stats, rounds=1)
    assert stats.outcomes == {"retry": 1} and stats.nacked == 1
    clock.advance(seconds=settings.backoff_cap_seconds)
    deadline = time.monotonic() + 20
    pulled = []
    while not pulled and time.monotonic() < deadline:
        pulled = await consumer.receive(
            settings.queue_name, max_messages=1, lease_seconds=30, wait_seconds=1
        )
    assert pulled[0].delivery.attempt == 2
    await consumer.give_back(pulled)
    await drain(container.receiver, consumer, settings.queue_name, stats)
    assert stats.outcomes["sent"] == 1
    [record] = await send_record_rows(container.engine)
    assert (record["state"], record["attempt_count"]) == ("sent", 2)


async def test_a_slow_send_keeps_its_lease(
    client, container, consumer, provider, clock, settings, publisher
):
    """Visibility 3 s, a send of 5 s: the lease is extended, nobody else receives it."""
    container.publisher = publisher
    provider.gate = asyncio.Event()
    await put_customer(client, "cust_1")
    await put_reminder(client, "renewal:cust_1", customer_id="cust_1", due_at=clock.now)
    await sweep(client)
    stop = asyncio.Event()
    worker = asyncio.create_task(
        run_pull_worker(
            container.receiver,
            consumer,
            config(settings.queue_name, visibility_timeout=3, wait_seconds=1),
            stop=stop,
            rand=random.Random(1),
        )
    )
    await asyncio.wait_for(provider.entered.wait(), 10)
    await asyncio.sleep(5)
    other = SqsConsumer(consumer.client)
    assert (
        await other.receive(settings.queue_name, max_messages=10, lease_seconds=3, wait_seconds=0)
        == []
    )
    provider.gate.set()
    stop.set()
    stats = await asyncio.wait_for(worker, 15)
    assert stats.outcomes == {"sent": 1} and stats.acked == 1


async def test_past_max_receive_count_sqs_moves_it_to_the_dlq_and_catch_up_sends_once(
    client, container, consumer, provider, clock, settings, publisher
):
    """Received and never settled 4 times (a worker dying on it): SQS redrives it to the DLQ;
    the sweep's catch-up republishes and it is sent exactly once."""
    container.publisher = publisher
    await put_customer(client, "cust_1")
    await put_reminder(client, "renewal:cust_1", customer_id="cust_1", due_at=clock.now)
    await sweep(client)
    queue = settings.queue_name
    for _ in range(4):
        got = await consumer.receive(queue, max_messages=1, lease_seconds=1, wait_seconds=3)
        assert len(got) == 1
        await asyncio.sleep(1.1)  # dies holding it: visible again when the lease ends
    assert await consumer.receive(queue, max_messages=1, lease_seconds=1, wait_seconds=2) == []
    assert await consumer.backlog(dead_letter_queue(queue)) == 1
    clock.advance(seconds=settings.catchup_margin_seconds + 60)
    assert (await sweep(client))["republished"] == 1
    stats = WorkerStats()
    await drain(container.receiver, consumer, queue, stats)
    assert stats.outcomes == {"sent": 1} and len(provider.calls) == 1
