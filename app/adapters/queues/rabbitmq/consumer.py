"""RabbitMQ consumer for the pull worker: ``basic.qos`` prefetch, manual acks, our backoff.

* The broker pushes up to ``prefetch`` unacked messages per channel (``basic.qos``: the
  worker's bounded prefetch); they wait in a buffer per queue until ``receive`` takes them.
* ``ack`` after the finalize committed; ``nack`` (our retry backoff) publishes a copy into
  the delay bucket with one more attempt, waits for the broker's confirm, then acks the
  original: a crash in between leaves two messages, and the ledger answers the second
  ``duplicate``.
* A message received with time still to wait (it came out of a shorter bucket) is parked
  again the same way and never reaches the worker.
* ``abandon`` (handling raised) and ``give_back`` requeue: the quorum queue counts each
  return in ``x-delivery-count`` and dead-letters past ``x-delivery-limit``.
* ``connect_robust`` reconnects and restores the channel, its prefetch and the consumers;
  messages of the lost channel cannot be acked any more, the broker redelivers them and the
  ledger answers ``duplicate``. Every broker call that fails meanwhile (an ack on the lost
  channel, a backlog probe during the restore) raises ``QueueUnavailable``, the error the
  worker expects of a queue, never aiormq's own (``ChannelInvalidStateError`` is a
  ``RuntimeError``, which stopped the worker's loop).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
from collections.abc import Callable, Iterator, Sequence
from typing import Any

from aio_pika.abc import AbstractChannel, AbstractIncomingMessage, AbstractRobustConnection
from aio_pika.exceptions import AMQPError, ChannelInvalidStateError, ChannelNotFoundEntity

from app.domain.errors import ConfigError, QueueUnavailable
from app.domain.messages import Delivery, PulledMessage

from .topology import ATTEMPT, DUE_MARGIN_SECONDS, MILLIS, NOT_BEFORE, buckets
from .wire import SETUP_HINT, confirmed_channel, connect, send

_DELIVERY_COUNT = "x-delivery-count"  # set by quorum queues on a redelivered message
# What a broker call raises while the connection or its channel is gone (or being restored).
_BROKER_ERRORS = (AMQPError, ChannelInvalidStateError, OSError, TimeoutError)


@contextlib.contextmanager
def _broker_call(what: str) -> Iterator[None]:
    """Turn a lost connection or channel into ``QueueUnavailable`` naming ``what``."""
    try:
        yield
    except _BROKER_ERRORS as error:
        raise QueueUnavailable(f"RabbitMQ {what}: {type(error).__name__}: {error}") from error


class RabbitConsumer:
    """Implements ``app.domain.ports.PullConsumer`` over one robust AMQP connection."""

    name = "rabbitmq"
    long_polls = True
    leases = False  # an unacked message stays ours until the connection closes

    def __init__(
        self,
        url: str,
        *,
        prefetch: int,
        max_delay_seconds: int,
        connect_timeout: float = 10.0,
        clock: Callable[[], float] = time.time,
        connection_name: str = "reminder-relay worker",
    ) -> None:
        self._url = url
        self._name = connection_name
        self._prefetch = prefetch
        self._timeout = connect_timeout
        self._clock = clock
        self._buckets = buckets(max_delay_seconds)
        self._connection: AbstractRobustConnection | None = None
        self._channel: AbstractChannel | None = None
        self._buffers: dict[str, asyncio.Queue[AbstractIncomingMessage]] = {}
        self._tags: dict[str, str] = {}

    async def receive(
        self, queue: str, *, max_messages: int, lease_seconds: int, wait_seconds: float
    ) -> list[PulledMessage]:
        """Take up to ``max_messages`` the broker pushed, waiting up to ``wait_seconds``."""
        buffer = await self._consuming(queue)
        taken: list[AbstractIncomingMessage] = []
        with contextlib.suppress(TimeoutError):
            taken.append(await asyncio.wait_for(buffer.get(), timeout=max(wait_seconds, 0.01)))
        while taken and len(taken) < max_messages and not buffer.empty():
            taken.append(buffer.get_nowait())
        pulled = []
        for message in taken:
            if await self._parked_again(queue, message):
                continue
            pulled.append(PulledMessage(_delivery(queue, message), message))
        return pulled

    async def ack(self, message: PulledMessage) -> None:
        """Delete a handled message (on a lost channel: ``QueueUnavailable``, and the broker
        redelivers it to the restored consumer)."""
        with _broker_call("ack"):
            await _incoming(message).ack()

    async def nack(self, message: PulledMessage, *, delay: float) -> bool:
        """Park a copy for ``delay`` s with one more attempt, then ack the original."""
        incoming = _incoming(message)
        await self._park(
            message.delivery.queue,
            incoming,
            not_before=self._clock() + delay,
            attempt=(message.delivery.attempt or 1) + 1,
        )
        with _broker_call("ack"):
            await incoming.ack()
        return True

    async def extend_lease(self, message: PulledMessage, *, seconds: int) -> None:
        """Nothing to extend: an unacked message is ours until the connection closes."""

    async def abandon(self, message: PulledMessage) -> None:
        """Requeue: counted against the queue's delivery limit."""
        with _broker_call("reject"):
            await _incoming(message).reject(requeue=True)

    async def give_back(self, messages: Sequence[PulledMessage]) -> None:
        """Requeue messages that were received and not started."""
        with _broker_call("reject"):
            for message in messages:
                await _incoming(message).reject(requeue=True)

    async def backlog(self, queue: str) -> int | None:
        """Ready messages in the work queue (a passive declare)."""
        # On the raw channel: the robust channel hands back its cached queue object, whose
        # declaration result is from when it was first declared.
        with _broker_call("backlog"):
            underlay = await (await self._open()).get_underlay_channel()
            declared = await underlay.queue_declare(queue, passive=True)
        return None if declared.message_count is None else int(declared.message_count)

    async def close(self) -> None:
        """Stop consuming and close: unacked messages, buffered ones too, are requeued."""
        if self._connection is not None:
            with contextlib.suppress(AMQPError, OSError):
                await self._connection.close()
        self._connection = self._channel = None
        self._buffers.clear()

    async def _open(self) -> AbstractChannel:
        if self._connection is None:
            self._connection = await connect(self._url, timeout=self._timeout, name=self._name)
        if self._channel is None:
            self._channel = await confirmed_channel(self._connection)
            await self._channel.set_qos(prefetch_count=self._prefetch)
        return self._channel

    async def _consuming(self, queue: str) -> asyncio.Queue[AbstractIncomingMessage]:
        if queue in self._buffers:
            return self._buffers[queue]
        try:
            channel = await self._open()
            declared = await channel.get_queue(queue, ensure=True)
        except ChannelNotFoundEntity as error:
            self._channel = None  # the broker closed the channel with the 404
            raise ConfigError(f"RabbitMQ has no queue {queue!r}: {SETUP_HINT}") from error
        except _BROKER_ERRORS as error:
            raise QueueUnavailable(f"RabbitMQ: {type(error).__name__}: {error}") from error
        buffer: asyncio.Queue[AbstractIncomingMessage] = asyncio.Queue()
        self._tags[queue] = await declared.consume(buffer.put, no_ack=False)
        self._buffers[queue] = buffer
        return buffer

    async def _parked_again(self, queue: str, message: AbstractIncomingMessage) -> bool:
        """A message with time left to wait goes back into a delay bucket (then acked)."""
        not_before = _header_int(message, NOT_BEFORE) / MILLIS
        if not_before - self._clock() < DUE_MARGIN_SECONDS:
            return False
        await self._park(queue, message, not_before=not_before, attempt=_attempt(message))
        with _broker_call("ack"):
            await message.ack()
        return True

    async def _park(
        self, queue: str, message: AbstractIncomingMessage, *, not_before: float, attempt: int
    ) -> None:
        await send(
            await self._open(),
            queue,
            message.body,
            message_id=message.message_id or "",
            not_before=not_before,
            attempt=attempt,
            now=self._clock(),
            buckets=self._buckets,
        )


def _incoming(message: PulledMessage) -> AbstractIncomingMessage:
    incoming = message.receipt
    assert incoming is not None, "a RabbitMQ message carries its AMQP message"
    return incoming


def _header_int(message: AbstractIncomingMessage, name: str) -> int:
    value = (message.headers or {}).get(name)
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


def _attempt(message: AbstractIncomingMessage) -> int:
    """Our attempts (nacks republish) plus the broker's redeliveries of this copy."""
    return max(_header_int(message, ATTEMPT), 1) + _header_int(message, _DELIVERY_COUNT)


def _delivery(queue: str, message: AbstractIncomingMessage) -> Delivery:
    payload: Any
    try:
        payload = json.loads(message.body)
    except ValueError:
        payload = message.body.decode(errors="replace")  # quarantined by the receiver
    message_id = message.message_id or f"amqp:{message.delivery_tag}"
    return Delivery(
        queue=queue, message_id=message_id[:255], payload=payload, attempt=_attempt(message)
    )
