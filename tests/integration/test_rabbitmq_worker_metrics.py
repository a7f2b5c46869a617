"""The pull worker's metrics on the real RabbitMQ, read from ``GET /metrics``:
``reminders_worker_messages_total{queue, event}`` and ``reminders_worker_queue_backlog{queue}``."""

from __future__ import annotations

import asyncio
import random
import time
import uuid

import pytest

from app.adapters.queues.rabbitmq.consumer import RabbitConsumer
from app.adapters.queues.rabbitmq.publisher import RabbitPublisher
from app.domain.errors import TransientProviderError
from app.services.pull_worker import PullWorkerConfig, run_pull_worker
from tests.support.flow import put_customer, put_reminder, scrape, sweep
from tests.support.pull_queues import worker_series_in
from tests.support.rabbit_fixtures import MAX_DELAY

pytestmark = pytest.mark.anyio


@pytest.fixture
def settings(settings, rabbit_queue):
    """Every channel on the test's queue; a retry waits long enough not to come back
    during the test (the backoff's floor is 1 s whatever the draw)."""
    return settings.model_copy(update={"queue_name": rabbit_queue, "backoff_base_seconds": 3600})


@pytest.fixture
async def publisher(rabbit_url):
    """The sweep publishes into the broker."""
    built = RabbitPublisher(rabbit_url, max_delay_seconds=MAX_DELAY)
    yield built
    await built.aclose()


@pytest.fixture
async def consumer(rabbit_url):
    """Prefetch 1: while one send is held, the others stay ready in the queue (the backlog)."""
    built = RabbitConsumer(
        rabbit_url,
        prefetch=1,
        max_delay_seconds=MAX_DELAY,
        connection_name=f"test-metrics-{uuid.uuid4().hex[:8]}",
    )
    yield built
    await built.close()


async def test_worker_counts_received_acked_nacked_and_reports_the_backlog(
    client, container, consumer, provider, clock, settings
):
    """Three sends, the first held at the provider: the backlog reads 2, then 0 once all
    three are acked; a fourth fails and is nacked. Counters: received 4, acked 3, nacked 1."""
    queue = settings.queue_name
    provider.gate = asyncio.Event()
    await put_customer(client, "cust_1")
    for n in range(3):
        await put_reminder(client, f"r{n}:cust_1", customer_id="cust_1", due_at=clock.now)
    assert (await sweep(client))["messages"] == 3
    stop = asyncio.Event()
    worker = asyncio.create_task(
        run_pull_worker(
            container.receiver,
            consumer,
            PullWorkerConfig(queues=(queue,), wait_seconds=0.2),
            stop=stop,
            rand=random.Random(1),
        )
    )
    try:
        await until_scraped(client, queue, backlog=2.0, received=1.0)
        assert len(provider.calls) == 1
        provider.gate.set()
        await until_scraped(client, queue, backlog=0.0, received=3.0, acked=3.0)

        provider.script.append(TransientProviderError("smtp 451"))
        await put_reminder(client, "r3:cust_1", customer_id="cust_1", due_at=clock.now)
        assert (await sweep(client))["messages"] == 1
        await until_scraped(client, queue, nacked=1.0)
    finally:
        stop.set()
        stats = await asyncio.wait_for(worker, 15)
    assert (stats.acked, stats.nacked) == (3, 1)
    assert await worker_series(client, queue) == {
        "backlog": 0.0,
        "received": 4.0,
        "acked": 3.0,
        "nacked": 1.0,
    }


async def worker_series(client, queue: str) -> dict[str, float]:
    """The worker's series of one queue in a scrape: each event's count and the backlog."""
    return worker_series_in(await scrape(client, refresh=False), queue)


async def until_scraped(client, queue: str, *, seconds: float = 20.0, **expected: float) -> None:
    """Scrape until the queue's worker series show ``expected``."""
    deadline = time.monotonic() + seconds
    while True:
        series = await worker_series(client, queue)
        if all(series.get(name) == value for name, value in expected.items()):
            return
        assert time.monotonic() < deadline, f"{series} never showed {expected}"
        await asyncio.sleep(0.1)
