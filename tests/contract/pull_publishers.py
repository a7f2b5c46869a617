"""Contract factories for the pull queues' publishers: SQS on moto's server and the real
RabbitMQ on 127.0.0.1:5672.

Neither queue deduplicates a standard publish (SQS standard queues keep no idempotency
window; RabbitMQ has none), so both cases declare ``deduplicates=False``: the ledger answers
a repeat ``duplicate``, which tests/integration covers on the real queues.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from app.adapters.queues.rabbitmq.publisher import RabbitPublisher
from app.adapters.queues.rabbitmq.setup import declare_topology
from app.adapters.queues.rabbitmq.topology import (
    MILLIS,
    NOT_BEFORE,
    buckets,
    dead_queue,
    delay_queue,
)
from app.adapters.queues.sqs.client import SqsClient
from app.adapters.queues.sqs.publisher import SqsPublisher
from tests.contract.publishers import (
    CONTRACT_QUEUE,
    HeldMessage,
    PublisherEnv,
    PublisherUnderTest,
)
from tests.support.aws_fixtures import ACCOUNT, REGION

# Long enough for the contract's 90.5 s message, short enough to keep the buckets few.
RABBIT_MAX_DELAY = 128


@asynccontextmanager
async def sqs_publisher(env: PublisherEnv) -> AsyncIterator[PublisherUnderTest]:
    """The SQS publisher against moto's server on loopback (a standard queue).

    moto runs in this process, so the view reads its backend: delayed messages included,
    which no ReceiveMessage would show.
    """
    moto = env.request.getfixturevalue("moto")  # emptied
    monkeypatch = env.request.getfixturevalue("monkeypatch")
    for name, value in {"AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing"}.items():
        monkeypatch.setenv(name, value)
    client = SqsClient(region=REGION, endpoint_url=moto.endpoint_url)
    await client.call("create_queue", QueueName=CONTRACT_QUEUE)

    async def held() -> list[HeldMessage]:
        from moto.sqs.models import sqs_backends

        queue = sqs_backends[ACCOUNT][REGION].queues[CONTRACT_QUEUE]
        return [
            HeldMessage(
                message.id,
                CONTRACT_QUEUE,
                json.loads(message.body),
                # SQS delays are whole seconds; moto stamps the two instants a moment apart.
                float(round(max(message.delayed_until - message.sent_timestamp, 0) / MILLIS)),
            )
            for message in queue._messages
        ]

    publisher = SqsPublisher(client)
    try:
        yield PublisherUnderTest(publisher, held, deduplicates=False)
    finally:
        await publisher.aclose()


@asynccontextmanager
async def rabbitmq_publisher(env: PublisherEnv) -> AsyncIterator[PublisherUnderTest]:
    """The RabbitMQ publisher against the real broker, in the run's own vhost.

    The view takes every message out of the delay buckets, then out of the work queue (a
    message only ever moves from a bucket into the work queue, so none is missed), and keeps
    them. A message's delay is its ``x-not-before`` less the clock's now: the publisher reads
    the same clock, which the tests that read delays never move.
    """
    import aio_pika

    url = env.request.getfixturevalue("contract_vhost")
    await declare_topology(
        url, [CONTRACT_QUEUE], delivery_limit=3, max_delay_seconds=RABBIT_MAX_DELAY, timeout=10
    )
    names = [delay_queue(CONTRACT_QUEUE, s) for s in buckets(RABBIT_MAX_DELAY)] + [CONTRACT_QUEUE]
    connection = await aio_pika.connect(url)
    channel = await connection.channel()
    for name in [*names, dead_queue(CONTRACT_QUEUE)]:
        await (await channel.get_queue(name, ensure=False)).purge()
    kept: list[HeldMessage] = []

    async def take_all() -> int:
        taken = 0
        for name in names:
            queue = await channel.get_queue(name, ensure=False)
            while (message := await queue.get(no_ack=True, fail=False)) is not None:
                not_before = int(message.headers[NOT_BEFORE]) / MILLIS  # type: ignore[arg-type]
                delay = not_before - env.clock().timestamp()
                body = json.loads(message.body)
                kept.append(HeldMessage(str(message.message_id), CONTRACT_QUEUE, body, delay))
                taken += 1
        return taken

    async def held() -> list[HeldMessage]:
        # A bucket dead-letters into the work queue asynchronously: look again until a pass
        # finds nothing in transit.
        for _ in range(20):
            if not await take_all():
                break
            await asyncio.sleep(0.05)
        # The broker numbers nothing across queues: the due time orders them (a stable sort,
        # so messages due together stay in the work queue's order, which is publish order).
        kept.sort(key=lambda message: message.delay_seconds)
        return list(kept)

    publisher = RabbitPublisher(
        url, max_delay_seconds=RABBIT_MAX_DELAY, clock=lambda: env.clock().timestamp()
    )
    try:
        yield PublisherUnderTest(publisher, held, deduplicates=False)
    finally:
        await publisher.aclose()
        await connection.close()
