"""RabbitMQ publisher: persistent messages, publisher confirms, delays through TTL buckets.

A publish returns only after the broker confirmed the message (a quorum queue confirms once
a majority has it on disk); a batch is published concurrently on one channel and confirmed
as a whole. RabbitMQ does not deduplicate: a republish with the same key is a second
message, which the ledger answers ``duplicate``. The idempotency key is the AMQP
``message_id``, and the id we return (hashed when longer than AMQP allows).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Sequence

from aio_pika.abc import AbstractChannel, AbstractRobustConnection

from app.domain.messages import OutgoingMessage
from app.domain.queueing import check_publishable

from .topology import buckets
from .wire import amqp_message_id, confirmed_channel, connect, encode, send


class RabbitPublisher:
    """Publishes each message to its channel queue (or that queue's delay bucket)."""

    name = "rabbitmq"

    def __init__(
        self,
        url: str,
        *,
        max_delay_seconds: int,
        connect_timeout: float = 10.0,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.max_delay_seconds = float(max_delay_seconds)
        self._url = url
        self._timeout = connect_timeout
        self._clock = clock
        self._buckets = buckets(max_delay_seconds)
        self._connection: AbstractRobustConnection | None = None
        self._channel: AbstractChannel | None = None
        self._lock = asyncio.Lock()

    async def publish(self, message: OutgoingMessage) -> str:
        """Publish one message; its idempotency key once the broker confirmed it."""
        [message_id] = await self.publish_batch([message])
        return message_id

    async def publish_batch(self, messages: Sequence[OutgoingMessage]) -> list[str]:
        """Check every message, then publish all and wait for every confirm; ids in order."""
        for message in messages:
            check_publishable(message, max_delay_seconds=self.max_delay_seconds)
        channel = await self._open()
        now = self._clock()
        ids = [amqp_message_id(message.idempotency_key) for message in messages]
        await asyncio.gather(
            *(
                send(
                    channel,
                    message.queue,
                    encode(message.payload),
                    message_id=message_id,
                    not_before=now + message.delay_seconds,
                    attempt=1,
                    now=now,
                    buckets=self._buckets,
                )
                for message, message_id in zip(messages, ids, strict=True)
            )
        )
        return ids

    async def _open(self) -> AbstractChannel:
        async with self._lock:
            if self._channel is None or self._channel.is_closed:
                if self._connection is None:
                    self._connection = await connect(self._url, timeout=self._timeout)
                self._channel = await confirmed_channel(self._connection)
            return self._channel

    async def aclose(self) -> None:
        """Close the connection (the registry calls it when the container closes)."""
        if self._connection is not None:
            await self._connection.close()
            self._connection = self._channel = None
