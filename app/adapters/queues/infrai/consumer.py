"""Pull from Infrai for ``reminders worker``: consume, ack, nack (all seen, not documented).

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
from typing import Any

from app.domain.messages import Delivery
from app.settings.infrai import InfraiSettings

from .api import InfraiApi, InfraiError
from .requests import ack_body, consume_body, nack_body

log = logging.getLogger("reminders.infrai")

_ATTEMPT_FIELDS = ("attempt", "receive_count", "delivery_attempt", "attempts")


class InfraiConsumer:
    """Implements ``app.domain.ports.QueueConsumer`` over Infrai's HTTP API."""

    name = "infrai"

    def __init__(
        self,
        api: InfraiApi,
        *,
        consume_path: str = "/queue/consume",
        ack_path: str = "/queue/ack",
        nack_path: str = "/queue/nack",
        nack_delay_field: str = "delay_seconds",
    ) -> None:
        self.api = api
        self._consume_path = consume_path
        self._ack_path = ack_path
        self.nack_path = nack_path
        self._nack_delay_field = nack_delay_field

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

    async def ack(self, queue: str, message_id: str) -> None:
        """Delete a handled message."""
        await self.api.call("queue.ack", "POST", self._ack_path, ack_body(queue, message_id))

    async def nack(self, queue: str, message_id: str, *, delay: float) -> bool:
        """Ask for redelivery after ``delay`` s; False when there is no nack route."""
        if not self.nack_path:
            return False
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


def build_infrai_consumer(api: InfraiApi, settings: InfraiSettings) -> InfraiConsumer:
    """A consumer configured from ``InfraiSettings``."""
    return InfraiConsumer(
        api,
        consume_path=settings.consume_path,
        ack_path=settings.ack_path,
        nack_path=settings.nack_path,
        nack_delay_field=settings.nack_delay_field,
    )
