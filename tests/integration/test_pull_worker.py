"""The pull worker against the fake Infrai: ack, nack, visibility expiry, backoff, stopping."""

from __future__ import annotations

import asyncio
import random

import pytest
from prometheus_client import REGISTRY

from app.adapters.queues.infrai.consumer import InfraiConsumer
from app.adapters.queues.infrai.publisher import InfraiPublisher
from app.domain.errors import TransientProviderError
from app.domain.retry import BackoffPolicy
from app.services.pull_worker import PullWorkerConfig, WorkerStats, poll_once, run_pull_worker
from tests.support.fake_infrai import Fault
from tests.support.flow import put_customer, put_reminder, sweep
from tests.support.infrai_fixtures import make_api
from tests.support.rows import dead_letter_rows, send_record_rows

pytestmark = pytest.mark.anyio

QUEUE = "reminders"
CONFIG = PullWorkerConfig(queues=(QUEUE,), max_messages=10, visibility_timeout=120)


@pytest.fixture
def consumer(fake_infrai, infrai_http, sleeps, clock) -> InfraiConsumer:
    """The worker's consumer on the fake, with the queue created (max_retries 5 + DLQ)."""
    fake_infrai.add_queue("reminders-dlq")
    fake_infrai.add_queue(QUEUE, dead_letter_queue="reminders-dlq", max_retries=5)
    return InfraiConsumer(make_api(infrai_http, fake_infrai.base_url, sleep=sleeps, now=clock))


@pytest.fixture
async def swept(client, container, fake_infrai, consumer, clock) -> str:
    """One reminder due now, swept through the Infrai publisher into the fake queue."""
    container.publisher = InfraiPublisher(consumer.api)
    await put_customer(client, "cust_1")
    await put_reminder(client, "renewal:cust_1", customer_id="cust_1", due_at=clock.now)
    assert (await sweep(client))["messages"] == 1
    return "renewal:cust_1"


async def test_ack_outcome_deletes_the_message(swept, container, consumer, fake_infrai, provider):
    """A sent delivery is acked: the fake queue is empty and the provider ran once."""
    stats = WorkerStats()
    assert await poll_once(container.receiver, consumer, CONFIG, stats) == 1
    assert stats.outcomes == {"sent": 1} and stats.acked == 1
    assert fake_infrai.queues[QUEUE].messages == []
    [ack] = fake_infrai.calls_to("/v1/queue/ack")
    assert ack.json["queue"] == QUEUE
    assert len(provider.calls) == 1


async def test_consume_asks_for_a_visibility_timeout_longer_than_the_lease(
    swept, container, consumer, fake_infrai, settings
):
    """The consume body carries the configured visibility timeout, above the 60 s lease."""
    await poll_once(container.receiver, consumer, CONFIG, WorkerStats())
    [call] = fake_infrai.calls_to("/v1/queue/consume")
    assert call.json == {"queue": QUEUE, "max_messages": 10, "visibility_timeout": 120}
    assert call.json["visibility_timeout"] > settings.lease_seconds


async def test_nack_outcome_redelivers_after_the_answer_retry_after(
    swept, container, consumer, fake_infrai, provider, clock
):
    """A transient failure is nacked with its Retry-After; the redelivery sends it."""
    provider.script.append(TransientProviderError("smtp 451"))
    stats = WorkerStats()
    await poll_once(container.receiver, consumer, CONFIG, stats)
    assert stats.outcomes == {"retry": 1} and stats.nacked == 1
    [nack] = fake_infrai.calls_to("/v1/queue/nack")
    delay = nack.json["delay_seconds"]
    assert delay >= 1
    clock.advance(seconds=delay - 1)
    assert await poll_once(container.receiver, consumer, CONFIG, stats) == 0
    clock.advance(seconds=1)
    assert await poll_once(container.receiver, consumer, CONFIG, stats) == 1
    assert stats.outcomes == {"retry": 1, "sent": 1}
    assert fake_infrai.queues[QUEUE].messages == []
    [record] = await send_record_rows(container.engine)
    assert (record["state"], record["attempt_count"]) == ("sent", 2)


async def test_without_a_nack_route_the_visibility_timeout_redelivers(
    swept, container, consumer, fake_infrai, provider, clock
):
    """No nack route (404): the message comes back when its visibility timeout expires."""
    fake_infrai.nack_enabled = False
    provider.script.append(TransientProviderError("smtp 451"))
    stats = WorkerStats()
    await poll_once(container.receiver, consumer, CONFIG, stats)
    assert stats.left_to_expire == 1 and consumer.nack_path == ""
    clock.advance(seconds=119)
    assert await poll_once(container.receiver, consumer, CONFIG, stats) == 0
    clock.advance(seconds=1)
    assert await poll_once(container.receiver, consumer, CONFIG, stats) == 1
    assert stats.outcomes["sent"] == 1
    assert len(fake_infrai.calls_to("/v1/queue/nack")) == 1  # not retried after the 404


async def test_a_lost_ack_is_redelivered_and_acknowledged_as_duplicate(
    swept, container, consumer, fake_infrai, provider, clock
):
    """The ack fails four times: after the visibility timeout the ledger says duplicate."""
    fake_infrai.inject("/v1/queue/ack", *[Fault(503)] * 4)
    stats = WorkerStats()
    await poll_once(container.receiver, consumer, CONFIG, stats)
    assert stats.errors == 1 and stats.acked == 0
    clock.advance(seconds=121)
    await poll_once(container.receiver, consumer, CONFIG, stats)
    assert stats.outcomes == {"sent": 1, "duplicate": 1} and stats.acked == 1
    assert fake_infrai.queues[QUEUE].messages == []
    assert len(provider.calls) == 1


async def test_our_dead_letter_set_catches_exhaustion_before_the_queue_dlq(
    swept, container, consumer, fake_infrai, provider, clock
):
    """max_attempts (3) < the queue's max_retries (5): we dead-letter and ack first."""
    provider.script.extend([TransientProviderError("down")] * 3)
    stats = WorkerStats()
    for _ in range(6):
        await poll_once(container.receiver, consumer, CONFIG, stats)
        clock.advance(seconds=700)
    assert stats.outcomes == {"retry": 2, "dead_lettered": 1}
    assert fake_infrai.queues[QUEUE].messages == []
    assert fake_infrai.queues["reminders-dlq"].messages == []
    [dead] = await dead_letter_rows(container.engine)
    assert dead["reason"] == "attempts_exhausted" and dead["queue"] == QUEUE


async def test_empty_queues_back_off_with_jitter_then_stop(container, consumer):
    """Idle polls wait 1 s, then jittered ceilings 2, 4, 8 s; the worker stops when asked."""
    stop = asyncio.Event()
    waits: list[float] = []

    async def wait(seconds: float) -> None:
        waits.append(seconds)
        if len(waits) == 4:
            stop.set()

    policy = BackoffPolicy(1.0, 30.0, 1.0)
    config = PullWorkerConfig(queues=(QUEUE,), idle_backoff=policy)
    stats = await run_pull_worker(
        container.receiver, consumer, config, stop=stop, rand=random.Random(3), wait=wait
    )
    rand = random.Random(3)
    assert waits == [policy.delay(n, rand) for n in range(1, 5)]
    assert all(1.0 <= w <= 2.0 ** (n - 1) for n, w in enumerate(waits, 1))
    assert stats.polls == 4 and stats.deliveries == 0


async def test_stopping_lets_in_flight_deliveries_finish_and_ack(
    swept, container, consumer, fake_infrai, provider
):
    """Stop set while a send is in flight: the send completes and is acked before exit."""
    provider.gate = asyncio.Event()
    stop = asyncio.Event()
    task = asyncio.create_task(
        run_pull_worker(container.receiver, consumer, CONFIG, stop=stop, rand=random.Random(1))
    )
    await asyncio.wait_for(provider.entered.wait(), 5)
    stop.set()
    provider.gate.set()
    stats = await asyncio.wait_for(task, 5)
    assert stats.outcomes == {"sent": 1} and stats.acked == 1
    assert fake_infrai.queues[QUEUE].messages == []


async def test_consume_failures_are_counted_and_backed_off(container, consumer, fake_infrai):
    """A failing consume does not crash the worker: an error, then an idle wait."""
    fake_infrai.inject("/v1/queue/consume", Fault(401, code="UNAUTHORIZED"))
    stop = asyncio.Event()
    waits: list[float] = []

    async def wait(seconds: float) -> None:
        waits.append(seconds)
        stop.set()

    stats = await run_pull_worker(
        container.receiver, consumer, CONFIG, stop=stop, rand=random.Random(1), wait=wait
    )
    assert stats.errors == 1 and len(waits) == 1


async def test_the_worker_counts_deliveries_like_the_push_route(swept, container, consumer):
    """Each pulled delivery is recorded by record_delivery: the same metric as a push."""
    labels = {"queue": QUEUE, "channel": "email", "outcome": "sent"}
    before = REGISTRY.get_sample_value("reminders_deliveries_total", labels) or 0.0
    await poll_once(container.receiver, consumer, CONFIG, WorkerStats())
    assert REGISTRY.get_sample_value("reminders_deliveries_total", labels) == before + 1
