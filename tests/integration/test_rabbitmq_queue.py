"""RabbitMQ on the real broker: topology, confirms, delay buckets, the worker's verbs, and
the drills (duplicates, connection closed under the worker, poison past the delivery limit)."""

from __future__ import annotations

import asyncio
import random
import time
import uuid

import pytest

from app.adapters.queues.rabbitmq.consumer import RabbitConsumer
from app.adapters.queues.rabbitmq.publisher import RabbitPublisher
from app.adapters.queues.rabbitmq.setup import declare_topology
from app.adapters.queues.rabbitmq.topology import dead_queue
from app.domain.errors import PublishError, TransientProviderError
from app.domain.messages import OutgoingMessage
from app.services.pull_worker import PullWorkerConfig, WorkerStats, poll_once, run_pull_worker
from tests.support.flow import put_customer, put_reminder, sweep
from tests.support.rabbit_fixtures import DELIVERY_LIMIT, MAX_DELAY, close_connections
from tests.support.rows import send_record_rows

pytestmark = pytest.mark.anyio


@pytest.fixture
def settings(settings, rabbit_queue):
    """The service's settings with every channel on the test's queue."""
    return settings.model_copy(update={"queue_name": rabbit_queue})


@pytest.fixture
async def publisher(rabbit_url):
    """The RabbitMQ publisher, replacing the memory one in the container."""
    built = RabbitPublisher(rabbit_url, max_delay_seconds=MAX_DELAY)
    yield built
    await built.aclose()


@pytest.fixture
async def consumer(rabbit_url):
    built = RabbitConsumer(
        rabbit_url,
        prefetch=10,
        max_delay_seconds=MAX_DELAY,
        connection_name=f"test-worker-{uuid.uuid4().hex[:8]}",
    )
    yield built
    await built.close()


def config(queue: str, **overrides) -> PullWorkerConfig:
    return PullWorkerConfig(queues=(queue,), wait_seconds=0.5, **overrides)


async def drain(receiver, consumer, queue, stats, *, rounds: int = 4, **overrides) -> None:
    """Poll until a round brings nothing (the broker has pushed everything due)."""
    for _ in range(rounds):
        if not await poll_once(receiver, consumer, config(queue, **overrides), stats):
            return


async def one_reminder(client, clock, reminder_id: str = "renewal:cust_1") -> None:
    await put_customer(client, "cust_1")
    await put_reminder(client, reminder_id, customer_id="cust_1", due_at=clock.now)
    assert (await sweep(client))["messages"] == 1


async def test_setup_is_idempotent_and_a_missing_queue_is_named(rabbit_url, rabbit_queue):
    """Declaring twice changes nothing; publishing to an undeclared queue names the setup."""
    again = await declare_topology(
        rabbit_url, [rabbit_queue], delivery_limit=DELIVERY_LIMIT, max_delay_seconds=MAX_DELAY,
        timeout=5,
    )  # fmt: skip
    assert [d.name for d in again][:3] == [
        f"{rabbit_queue}.dlx",
        f"{rabbit_queue}.dead",
        rabbit_queue,
    ]
    publisher = RabbitPublisher(rabbit_url, max_delay_seconds=MAX_DELAY)
    try:
        with pytest.raises(PublishError, match="reminders setup --queue rabbitmq"):
            await publisher.publish(OutgoingMessage("no-such-queue-x", {"v": 1}, 0, "k"))
    finally:
        await publisher.aclose()


async def test_swept_reminder_is_sent_once_and_acked(
    client, container, consumer, provider, clock, settings
):
    """Sweep → confirmed publish → the worker sends it and acks: nothing left in the queue."""
    await one_reminder(client, clock)
    stats = WorkerStats()
    await drain(container.receiver, consumer, settings.queue_name, stats)
    assert stats.outcomes == {"sent": 1} and stats.acked == 1
    assert len(provider.calls) == 1
    await until_async(lambda: consumer.backlog(settings.queue_name), 0)


async def test_a_message_published_twice_is_sent_once(
    container, publisher, consumer, provider, client, clock, settings
):
    """The same message published twice (RabbitMQ does not deduplicate): one send, one duplicate."""
    await one_reminder(client, clock)
    message = OutgoingMessage(
        settings.queue_name,
        {"v": 1, "reminder_id": "renewal:cust_1", "channel": "email", "schedule_version": 1},
        0,
        "renewal:cust_1:email:v1",
    )
    await publisher.publish_batch([message, message])
    stats = WorkerStats()  # one at a time: copies handled together would answer busy
    await drain(container.receiver, consumer, settings.queue_name, stats, rounds=6, max_messages=1)
    assert stats.outcomes == {"sent": 1, "duplicate": 2} and stats.acked == 3
    assert len(provider.calls) == 1


async def test_a_delay_is_spent_in_buckets_and_not_delivered_early(
    publisher, consumer, rabbit_queue
):
    """A 3 s delay (buckets 2 s then 1 s): nothing before 2.5 s, delivered by 5 s."""
    started = time.time()
    await publisher.publish(OutgoingMessage(rabbit_queue, {"v": 1}, 3.0, "delayed"))
    got = []
    while not got and time.time() - started < 8:
        got = await consumer.receive(
            rabbit_queue, max_messages=1, lease_seconds=60, wait_seconds=0.5
        )
    arrived = time.time() - started
    assert got and 2.5 <= arrived <= 5.0, arrived
    await consumer.ack(got[0])


async def test_a_retry_waits_our_backoff_then_sends(
    container, consumer, provider, client, clock, settings
):
    """A transient failure is nacked into a delay bucket; it comes back and is sent (attempt 2)."""
    provider.script.append(TransientProviderError("smtp 451"))
    await one_reminder(client, clock)
    stats = WorkerStats()
    await drain(container.receiver, consumer, settings.queue_name, stats)
    assert stats.outcomes == {"retry": 1} and stats.nacked == 1
    clock.advance(seconds=settings.backoff_cap_seconds)  # the ledger's clock: retry allowed
    deadline = time.time() + 15
    while stats.outcomes["sent"] == 0 and time.time() < deadline:
        await poll_once(container.receiver, consumer, config(settings.queue_name), stats)
    assert stats.outcomes["sent"] == 1
    [record] = await send_record_rows(container.engine)
    assert (record["state"], record["attempt_count"]) == ("sent", 2)


async def test_connection_closed_under_the_worker_reconnects_and_loses_nothing(
    container, consumer, provider, client, clock, settings, publisher
):
    """rabbitmqctl close_connection under the worker: it reconnects, each reminder sent once."""
    stop = asyncio.Event()
    worker = asyncio.create_task(
        run_pull_worker(
            container.receiver,
            consumer,
            config(settings.queue_name),
            stop=stop,
            rand=random.Random(1),
        )
    )
    await put_customer(client, "cust_1")
    for n in range(5):
        await put_reminder(client, f"r{n}:cust_1", customer_id="cust_1", due_at=clock.now)
    await sweep(client)
    await until(lambda: len(provider.calls) == 5)
    assert close_connections(consumer._name) == 1
    for n in range(5, 10):
        await put_reminder(client, f"r{n}:cust_1", customer_id="cust_1", due_at=clock.now)
    await sweep(client)
    # connect_robust reconnects with its own backoff; a loaded machine needs longer.
    await until(lambda: len(provider.calls) == 10, seconds=90)
    stop.set()
    await asyncio.wait_for(worker, 15)
    sent = sorted(call.idempotency_key for call in provider.calls)
    assert len(set(sent)) == 10 == len(sent)


async def test_stop_gives_back_what_was_not_started(
    container, consumer, provider, client, clock, settings
):
    """Two sends in flight, three prefetched: SIGTERM finishes two, the three go back."""
    provider.gate = asyncio.Event()
    await put_customer(client, "cust_1")
    for n in range(5):
        await put_reminder(client, f"r{n}:cust_1", customer_id="cust_1", due_at=clock.now)
    await sweep(client)
    stop = asyncio.Event()
    worker = asyncio.create_task(
        run_pull_worker(
            container.receiver,
            consumer,
            config(settings.queue_name, max_in_flight=2),
            stop=stop,
            rand=random.Random(1),
        )
    )
    await until(lambda: len(provider.calls) == 2)
    stop.set()
    provider.gate.set()
    stats = await asyncio.wait_for(worker, 15)
    assert stats.outcomes == {"sent": 2} and stats.acked == 2
    await until_async(lambda: consumer.backlog(settings.queue_name), 3)


async def test_poison_past_the_delivery_limit_is_dead_lettered_then_caught_up(
    container, consumer, provider, client, clock, settings, rabbit_url
):
    """A message whose worker dies on it every time (its connection gone before any ack) is
    redelivered until the broker dead-letters it; the sweep's catch-up sends it exactly once."""
    await one_reminder(client, clock)
    queue = settings.queue_name
    for _ in range(DELIVERY_LIMIT + 1):
        crashing = RabbitConsumer(rabbit_url, prefetch=10, max_delay_seconds=MAX_DELAY)
        got = await crashing.receive(queue, max_messages=10, lease_seconds=60, wait_seconds=5)
        assert len(got) == 1
        await crashing.close()  # dies holding it: the broker requeues it, one more delivery
    await until_async(lambda: consumer.backlog(dead_queue(queue)), 1)
    await until_async(lambda: consumer.backlog(queue), 0)
    assert provider.calls == []
    clock.advance(seconds=settings.catchup_margin_seconds + 60)
    assert (await sweep(client))["republished"] == 1
    stats = WorkerStats()
    await drain(container.receiver, consumer, queue, stats)
    assert stats.outcomes == {"sent": 1} and len(provider.calls) == 1


async def until(predicate, *, seconds: float = 15.0) -> None:
    deadline = time.monotonic() + seconds
    while not predicate():
        assert time.monotonic() < deadline, "timed out"
        await asyncio.sleep(0.05)


async def until_async(probe, expected, *, seconds: float = 10.0) -> None:
    deadline = time.monotonic() + seconds
    while (value := await probe()) != expected:
        assert time.monotonic() < deadline, f"timed out at {value}"
        await asyncio.sleep(0.1)
