"""How late a delayed message reaches the RabbitMQ work queue through the TTL buckets, and
what each hop costs the broker (publish + confirm), on the local broker.

    .venv/bin/python bench/rabbitmq_delays.py [--messages 200]

Publishes N messages for each delay, consumes them with the worker's consumer (which parks
early ones again), and prints the lateness (arrival - due) percentiles and the hops.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import time
import uuid

from app.adapters.queues.rabbitmq.consumer import RabbitConsumer
from app.adapters.queues.rabbitmq.publisher import RabbitPublisher
from app.adapters.queues.rabbitmq.setup import declare_topology
from app.domain.messages import OutgoingMessage

URL = "amqp://guest:guest@127.0.0.1:5672/"
DELAYS = (0, 1, 5, 13, 30)
MAX_DELAY = 32


async def one_delay(queue: str, delay: int, count: int) -> tuple[list[float], float]:
    """Lateness of each message (arrival - due) and the publish time of the batch."""
    publisher = RabbitPublisher(URL, max_delay_seconds=MAX_DELAY)
    consumer = RabbitConsumer(URL, prefetch=200, max_delay_seconds=MAX_DELAY)
    await consumer.receive(queue, max_messages=1, lease_seconds=60, wait_seconds=0)  # consuming
    messages = [OutgoingMessage(queue, {"n": n}, delay, f"{delay}:{n}") for n in range(count)]
    started = time.time()
    await publisher.publish_batch(messages)
    published = time.time()
    due = started + delay  # the publisher stamps x-not-before from the batch start
    late: list[float] = []
    while len(late) < count:
        got = await consumer.receive(queue, max_messages=200, lease_seconds=60, wait_seconds=1)
        now = time.time()
        late += [now - due] * len(got)
        await asyncio.gather(*(consumer.ack(message) for message in got))
    await consumer.close()
    await publisher.aclose()
    return late, published - started


async def main(count: int) -> None:
    queue = f"bench-{uuid.uuid4().hex[:8]}"
    await declare_topology(URL, [queue], delivery_limit=10, max_delay_seconds=MAX_DELAY, timeout=5)
    try:
        header = ("delay s", "hops", "p50 late ms", "p99 late ms", "max ms", "publish/s")
        print(" ".join(f"{column:>12}" for column in header))
        for delay in DELAYS:
            late, seconds = await one_delay(queue, delay, count)
            late.sort()
            hops = bin(delay).count("1")
            p99 = late[int(len(late) * 0.99) - 1]
            print(
                f"{delay:>12} {hops:>12} {statistics.median(late) * 1000:>12.0f} "
                f"{p99 * 1000:>12.0f} {late[-1] * 1000:>12.0f} {count / seconds:>12.0f}"
            )
    finally:
        await delete_topology_all(queue)


async def delete_topology_all(queue: str) -> None:
    import aio_pika

    from app.adapters.queues.rabbitmq.topology import (
        buckets,
        dead_exchange,
        dead_queue,
        delay_queue,
    )

    connection = await aio_pika.connect(URL)
    async with connection:
        channel = await connection.channel()
        for name in [
            queue,
            dead_queue(queue),
            *(delay_queue(queue, s) for s in buckets(MAX_DELAY)),
        ]:
            await channel.queue_delete(name)
        await channel.exchange_delete(dead_exchange(queue))


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--messages", type=int, default=200)
    asyncio.run(main(parser.parse_args().messages))
