"""Google Pub/Sub publisher (``REMINDERS_QUEUE=pubsub``): topic = the channel's queue name.

The payload is the message data, the idempotency key an attribute (Pub/Sub itself keeps no
publish idempotency: a repeated publish is a second message that the ledger answers
``duplicate``). Pub/Sub cannot delay a message, so ``max_delay_seconds`` is 0: the sweep
publishes a reminder once it is due, and its cron cadence bounds the delivery latency.
"""

from __future__ import annotations

import base64
from collections.abc import Sequence
from typing import Any

import orjson

from app.domain.errors import PublishError
from app.domain.messages import OutgoingMessage
from app.domain.queueing import check_publishable

from .api import PubSubApi, PubSubApiError

IDEMPOTENCY_ATTRIBUTE = "idempotency_key"
MAX_MESSAGES_PER_REQUEST = 1000  # Pub/Sub's publish request limit


class PubSubPublisher:
    """Publishes each message to the topic named by its queue."""

    name = "pubsub"
    max_delay_seconds = 0.0

    def __init__(self, api: PubSubApi) -> None:
        self.api = api

    async def publish(self, message: OutgoingMessage) -> str:
        """Publish one message; its Pub/Sub message id."""
        [message_id] = await self.publish_batch([message])
        return message_id

    async def publish_batch(self, messages: Sequence[OutgoingMessage]) -> list[str]:
        """Check every message, then publish per topic in chunks; ids in the given order."""
        for message in messages:
            check_publishable(message, max_delay_seconds=self.max_delay_seconds)
        ids: dict[int, str] = {}
        for topic, positions in _by_topic(messages).items():
            for start in range(0, len(positions), MAX_MESSAGES_PER_REQUEST):
                chunk = positions[start : start + MAX_MESSAGES_PER_REQUEST]
                published = await self._publish(topic, [messages[i] for i in chunk])
                ids.update(zip(chunk, published, strict=True))
        return [ids[i] for i in range(len(messages))]

    async def _publish(self, topic: str, messages: list[OutgoingMessage]) -> list[str]:
        try:
            return await self.api.publish(topic, [_wire(message) for message in messages])
        except PubSubApiError as error:
            raise PublishError(f"Pub/Sub refused the publish to {topic!r}: {error}") from error

    async def aclose(self) -> None:
        """Nothing of its own to close: the HTTP pool belongs to the container."""


def _by_topic(messages: Sequence[OutgoingMessage]) -> dict[str, list[int]]:
    positions: dict[str, list[int]] = {}
    for index, message in enumerate(messages):
        positions.setdefault(message.queue, []).append(index)
    return positions


def _wire(message: OutgoingMessage) -> dict[str, Any]:
    data = base64.b64encode(orjson.dumps(dict(message.payload))).decode()
    return {"data": data, "attributes": {IDEMPOTENCY_ATTRIBUTE: message.idempotency_key}}
