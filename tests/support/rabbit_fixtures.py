"""The real RabbitMQ on 127.0.0.1:5672: uniquely named queues per test, deleted after.

Under ``REMINDERS_CI`` a broker that is down fails the tests (``.ci/run`` starts it);
elsewhere they are skipped.
"""

from __future__ import annotations

import os
import socket
import subprocess
import uuid
from collections.abc import AsyncIterator

import pytest

RABBIT_URL = os.environ.get("REMINDERS_TEST_RABBITMQ_URL", "amqp://guest:guest@127.0.0.1:5672/")
DELIVERY_LIMIT = 3
MAX_DELAY = 8  # buckets 1, 2, 4, 8 s


def broker_is_up() -> bool:
    """True when something listens on the broker's port."""
    try:
        with socket.create_connection(("127.0.0.1", 5672), timeout=1):
            return True
    except OSError:
        return False


@pytest.fixture(scope="session")
def rabbit_url() -> str:
    """The broker's URL; skipped (failed under CI) when it is down."""
    if not broker_is_up():
        if os.environ.get("REMINDERS_CI"):
            pytest.fail("RabbitMQ is not running on 127.0.0.1:5672 (.ci/run starts it)")
        pytest.skip("RabbitMQ is not running on 127.0.0.1:5672")
    return RABBIT_URL


@pytest.fixture
async def rabbit_queue(rabbit_url: str) -> AsyncIterator[str]:
    """A channel queue with its full topology, declared by the setup code; deleted after."""
    from app.adapters.queues.rabbitmq.setup import declare_topology

    name = f"test-{uuid.uuid4().hex[:12]}"
    await declare_topology(
        rabbit_url, [name], delivery_limit=DELIVERY_LIMIT, max_delay_seconds=MAX_DELAY, timeout=5
    )
    try:
        yield name
    finally:
        await delete_topology(rabbit_url, name)


async def delete_topology(url: str, queue: str) -> None:
    """Delete a channel queue's queues and exchange."""
    import aio_pika

    from app.adapters.queues.rabbitmq.topology import (
        buckets,
        dead_exchange,
        dead_queue,
        delay_queue,
    )

    connection = await aio_pika.connect(url)
    async with connection:
        channel = await connection.channel()
        names = [queue, dead_queue(queue), *(delay_queue(queue, s) for s in buckets(MAX_DELAY))]
        for name in names:
            await channel.queue_delete(name)
        await channel.exchange_delete(dead_exchange(queue))


def close_connections(connection_name: str) -> int:
    """``rabbitmqctl close_connection`` every connection with this client-given name."""
    listed = subprocess.run(
        ["rabbitmqctl", "-q", "list_connections", "pid", "client_properties"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    marker = f'{{"connection_name","{connection_name}"}}'
    closed = 0
    for line in listed.splitlines():
        pid, _, properties = line.partition("\t")
        if marker in properties:
            subprocess.run(["rabbitmqctl", "-q", "close_connection", pid, "drill"], check=True)
            closed += 1
    return closed
