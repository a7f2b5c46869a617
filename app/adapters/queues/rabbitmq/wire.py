"""The AMQP side shared by the RabbitMQ publisher, consumer and setup: connecting, and
publishing one message (persistent, confirmed, mandatory) into its queue or delay bucket.

aio-pika comes with the ``[rabbitmq]`` extra and is imported only here and only when a
RabbitMQ queue is configured (the settings name the extra when it is missing).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from typing import Any

import aio_pika
from aio_pika.abc import AbstractChannel, AbstractRobustConnection
from aio_pika.exceptions import AMQPError, DeliveryError

from app.domain.errors import PublishError, QueueUnavailable

from .topology import ATTEMPT, MILLIS, NOT_BEFORE, route

SETUP_HINT = "run `reminders setup --queue rabbitmq`"
_MAX_MESSAGE_ID_BYTES = 255  # an AMQP short string


def amqp_message_id(idempotency_key: str) -> str:
    """The AMQP ``message_id`` of a key: the key itself when it fits a short string, else
    its SHA-256 (same key, same id). Keys may be 400 characters; AMQP takes 255 bytes."""
    if len(idempotency_key.encode()) <= _MAX_MESSAGE_ID_BYTES:
        return idempotency_key
    return hashlib.sha256(idempotency_key.encode()).hexdigest()


async def connect(
    url: str, *, timeout: float, name: str = "reminder-relay"
) -> AbstractRobustConnection:
    """A connection that reconnects by itself (and restores its consumers); ``name`` shows
    in the broker's connection list."""
    try:
        return await aio_pika.connect_robust(
            url, timeout=timeout, client_properties={"connection_name": name}
        )
    except (AMQPError, OSError, TimeoutError) as error:
        raise QueueUnavailable(f"RabbitMQ unreachable: {type(error).__name__}") from error


async def confirmed_channel(connection: AbstractRobustConnection) -> AbstractChannel:
    """A channel whose publishes wait for the broker's confirm; unroutable ones raise."""
    return await connection.channel(publisher_confirms=True, on_return_raises=True)


async def send(
    channel: AbstractChannel,
    queue: str,
    body: bytes,
    *,
    message_id: str,
    not_before: float,
    attempt: int,
    now: float,
    buckets: list[int],
) -> None:
    """Publish into ``queue`` or the delay bucket for ``not_before``; returns once confirmed."""
    message = aio_pika.Message(
        body,
        content_type="application/json",
        delivery_mode=aio_pika.DeliveryMode.PERSISTENT,
        message_id=message_id,
        headers={NOT_BEFORE: int(not_before * MILLIS), ATTEMPT: attempt},
    )
    routing_key = route(queue, not_before - now, buckets)
    try:
        await channel.default_exchange.publish(message, routing_key=routing_key, mandatory=True)
    except DeliveryError as error:
        raise PublishError(f"RabbitMQ refused a message for {routing_key}: {SETUP_HINT}") from error
    except (AMQPError, OSError, TimeoutError) as error:
        raise PublishError(f"RabbitMQ publish failed: {type(error).__name__}") from error


def encode(payload: Mapping[str, Any]) -> bytes:
    """The message body: our payload as compact JSON."""
    return json.dumps(payload, separators=(",", ":")).encode()
