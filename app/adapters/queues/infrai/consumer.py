"""Pull from Infrai for ``reminders worker``: consume, ack, nack (all seen, not documented).

Implements ``app.domain.ports.PullConsumer``. Infrai has no route seen to extend a lease
or to report a backlog: ``extend_lease`` does nothing (the visibility timeout is set above
the claim lease instead) and ``backlog`` is None.

* consume: ``POST {consume_path}`` ``{queue, max_messages, visibility_timeout}`` →
  ``data.messages: [{message_id, payload, ...}]``.
* ack: ``POST {ack_path}`` ``{queue, message_id}`` deletes the message.
* nack: Infrai has one (``max_retries`` counts nacks) but its path and fields were not
  seen: ``{nack_path}`` with ``{queue, message_id, <nack_delay_field>}``. With an empty
  path, or when the route answers 404/405/501, we do not nack: the message reappears when
  its visibility timeout expires (later than our own ``Retry-After`` may have asked for).
"""

from __future__ import annotations

import json
import logging
from collections.abc import Sequence
from typing import Any

from app.adapters.queues.infrai.settings import InfraiSettings
from app.domain.messages import Delivery, PulledMessage

from .api import InfraiApi, InfraiError
from .requests import ack_body, consume_body, nack_body

log = logging.getLogger("reminders.infrai")

_ATTEMPT_FIELDS = ("attempt", "receive_count", "delivery_attempt", "attempts")


class InfraiConsumer:
    """Implements ``app.domain.ports.PullConsumer`` over Infrai's HTTP API."""

    name = "infrai"
    long_polls = False
    leases = False

    def __init__(
        self,
        api: InfraiApi,
        *,
        consume_path: str = "/queue/consume",
        ack_path: str = "/queue/ack",
        nack_path: str = "/queue/nack",
        nack_delay_field: str = "delay_seconds",
        owns_api: bool = False,
    ) -> None:
        self.api = api
        self._owns_api = owns_api
        self._consume_path = consume_path
        self._ack_path = ack_path
        self.nack_path = nack_path
        self._nack_delay_field = nack_delay_field

    async def receive(
        self, queue: str, *, max_messages: int, lease_seconds: int, wait_seconds: float = 0.0
    ) -> list[PulledMessage]:
        """Lease up to ``max_messages`` messages of one queue (Infrai answers at once)."""
        deliveries = await self.consume(
            queue, max_messages=max_messages, visibility_timeout=lease_seconds
        )
        return [PulledMessage(d, d.message_id) for d in deliveries]

    async def consume(
        self, queue: str, *, max_messages: int, visibility_timeout: int
    ) -> list[Delivery]:
        """Lease up to ``max_messages`` messages of one queue."""
        data = await self.api.call(
            "queue.consume",
            "POST",
            self._consume_path,
            consume_body(queue, max_messages=max_messages, visibility_timeout=visibility_timeout),
        )
        raw = data.get("messages", [])
        if not isinstance(raw, list):
            raise InfraiError(
                "Infrai queue.consume: malformed response: data.messages is not a list",
                code="MALFORMED_RESPONSE",
            )
        return [d for d in (_delivery(queue, item) for item in raw) if d is not None]

    async def ack(self, message: PulledMessage) -> None:
        """Delete a handled message."""
        body = ack_body(message.delivery.queue, message.delivery.message_id)
        await self.api.call("queue.ack", "POST", self._ack_path, body)

    async def extend_lease(self, message: PulledMessage, *, seconds: int) -> None:
        """No route seen: the visibility timeout already outlasts the claim lease."""

    async def abandon(self, message: PulledMessage) -> None:
        """Left to the visibility timeout and Infrai's max_retries / DLQ."""

    async def give_back(self, messages: Sequence[PulledMessage]) -> None:
        """Nack each at once (no nack route: they return when their timeout ends)."""
        for message in messages:
            if not await self.nack(message, delay=0):
                return

    async def backlog(self, queue: str) -> int | None:
        """Infrai reports no backlog that was seen."""
        return None

    async def close(self) -> None:
        """Close the API client when this consumer built it."""
        if self._owns_api:
            await self.api.client.aclose()

    async def nack(self, message: PulledMessage, *, delay: float) -> bool:
        """Ask for redelivery after ``delay`` s; False when there is no nack route."""
        if not self.nack_path:
            return False
        queue, message_id = message.delivery.queue, message.delivery.message_id
        body = nack_body(queue, message_id, delay=delay, delay_field=self._nack_delay_field)
        try:
            await self.api.call("queue.nack", "POST", self.nack_path, body)
        except InfraiError as error:
            if not error.route_missing:
                raise
            log.warning(
                "Infrai has no nack route at %s; relying on visibility expiry", self.nack_path
            )
            self.nack_path = ""
            return False
        return True


def _delivery(queue: str, item: Any) -> Delivery | None:
    """A delivery from one consumed item; None (logged) when it has no usable id."""
    message_id = item.get("message_id") if isinstance(item, dict) else None
    if isinstance(message_id, bool) or not isinstance(message_id, str | int) or message_id == "":
        # Without an id it can be neither acked nor recorded; the visibility timeout and
        # Infrai's max_retries/DLQ take care of it.
        log.error("Infrai queue.consume returned an item without message_id on %s", queue)
        return None
    assert isinstance(item, dict)
    return Delivery(
        queue=queue,
        message_id=str(message_id)[:255],
        payload=_payload(item.get("payload")),
        attempt=_attempt(item),
    )


def _payload(raw: Any) -> Any:
    # Some clients see the payload as a JSON string; accept both.
    if isinstance(raw, str):
        try:
            return json.loads(raw)
        except ValueError:
            return raw
    return raw


def _attempt(item: dict[str, Any]) -> int | None:
    for name in _ATTEMPT_FIELDS:
        value = item.get(name)
        if isinstance(value, int) and not isinstance(value, bool):
            return value
    return None


def build_infrai_consumer(
    api: InfraiApi, settings: InfraiSettings, *, owns_api: bool = False
) -> InfraiConsumer:
    """A consumer configured from ``InfraiSettings``."""
    return InfraiConsumer(
        api,
        owns_api=owns_api,
        consume_path=settings.consume_path,
        ack_path=settings.ack_path,
        nack_path=settings.nack_path,
        nack_delay_field=settings.nack_delay_field,
    )
