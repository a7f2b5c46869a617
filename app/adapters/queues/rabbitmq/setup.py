"""``reminders setup --queue rabbitmq``: declare the topology of every RabbitMQ channel queue.

Idempotent: declaring a queue or exchange that exists with the same arguments is a no-op
in AMQP; one that exists with other arguments is refused by the broker
(PRECONDITION_FAILED), reported here with the queue's name, and left alone (delete it by
hand after draining it if the change is wanted).
"""

from __future__ import annotations

from dataclasses import dataclass

import aio_pika
from aio_pika.exceptions import AMQPError

from app.domain.errors import ConfigError

from .topology import (
    buckets,
    dead_exchange,
    dead_queue,
    delay_queue,
    delay_queue_arguments,
    quorum,
    work_queue_arguments,
)
from .wire import connect


@dataclass(frozen=True, slots=True)
class Declared:
    """One declared resource, for the setup table."""

    kind: str
    name: str
    status: str = "declared"


async def declare_topology(
    url: str, queues: list[str], *, delivery_limit: int, max_delay_seconds: int, timeout: float
) -> list[Declared]:
    """Declare work queue, dead-letter exchange and queue, and delay buckets of each queue."""
    connection = await connect(url, timeout=timeout)
    try:
        channel = await connection.channel()
        done: list[Declared] = []
        for queue in queues:
            done += await _declare_one(channel, queue, delivery_limit, max_delay_seconds)
        return done
    except AMQPError as error:
        raise ConfigError(f"RabbitMQ refused the topology: {error}") from error
    finally:
        await connection.close()


async def _declare_one(
    channel: aio_pika.abc.AbstractChannel, queue: str, delivery_limit: int, max_delay: int
) -> list[Declared]:
    exchange = await channel.declare_exchange(
        dead_exchange(queue), aio_pika.ExchangeType.FANOUT, durable=True
    )
    dead = await channel.declare_queue(dead_queue(queue), durable=True, arguments=quorum())
    await dead.bind(exchange)
    await channel.declare_queue(
        queue, durable=True, arguments=work_queue_arguments(queue, delivery_limit)
    )
    done = [
        Declared("exchange", dead_exchange(queue)),
        Declared("queue", dead_queue(queue)),
        Declared("queue", queue),
    ]
    for seconds in buckets(max_delay):
        name = delay_queue(queue, seconds)
        await channel.declare_queue(
            name, durable=True, arguments=delay_queue_arguments(queue, seconds)
        )
        done.append(Declared("queue", name))
    return done
