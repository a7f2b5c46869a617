"""Infrai queue publisher over plain HTTP (no SDK): ``REMINDERS_QUEUE=infrai``.

* ``POST /v1/queue/publish`` (documented) with ``queue``, ``payload``, ``delay_seconds``
  (whole seconds, rounded up; outside 0..7 days refused) and ``idempotency_key`` in the
  body *and* the ``Idempotency-Key`` header: identical retries return the same message id.
* Batch publish (``/v1/queue/publish_batch``, seen in client code; path and body shape are
  settings) in chunks; when the route answers 404/405/501 the messages go out one by one
  and, once that works, the batch route is not tried again by this publisher.
* Retries, 429/``Retry-After`` and error reading live in ``api.InfraiApi``.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any, Literal

import httpx

from app.adapters.queues.infrai.settings import InfraiSettings
from app.domain.messages import OutgoingMessage
from app.domain.queueing import MAX_DELAY_SECONDS, check_publishable
from app.domain.retry import BackoffPolicy

from .api import InfraiApi, InfraiConfig, InfraiError
from .requests import batch_bodies, batch_idempotency_key, publish_body

log = logging.getLogger("reminders.infrai")

PUBLISH_PATH = "/queue/publish"  # documented
_BATCH_ID_LISTS = ("messages", "results", "items")


class InfraiPublisher:
    """Publishes to Infrai; one instance per process, sharing one pooled HTTP client."""

    name = "infrai"

    def __init__(
        self,
        api: InfraiApi,
        *,
        max_delay_seconds: float = MAX_DELAY_SECONDS,
        batch_path: str = "/queue/publish_batch",
        batch_shape: Literal["messages", "per_queue"] = "messages",
        batch_max_messages: int = 100,
        owns_client: bool = False,
    ) -> None:
        self.api = api
        self.max_delay_seconds = max_delay_seconds
        self._batch_path = batch_path
        self._batch_shape = batch_shape
        self._batch_max = batch_max_messages
        self._owns_client = owns_client
        # None: not tried yet; False: the route is missing, publish one by one.
        self.batch_available: bool | None = None if batch_path else False

    async def publish(self, message: OutgoingMessage) -> str:
        """Publish one message; the same idempotency key returns the same message id."""
        check_publishable(message, max_delay_seconds=self.max_delay_seconds)
        data = await self.api.call(
            "queue.publish",
            "POST",
            PUBLISH_PATH,
            publish_body(message, self.max_delay_seconds),
            idempotency_key=message.idempotency_key,
        )
        return _message_id(data, "queue.publish")

    async def publish_batch(self, messages: Sequence[OutgoingMessage]) -> list[str]:
        """Publish several messages (ids in order); falls back to single publishes."""
        for message in messages:
            check_publishable(message, max_delay_seconds=self.max_delay_seconds)
        if not messages:
            return []
        if self.batch_available is not False:
            try:
                ids = await self._publish_batched(messages)
            except InfraiError as error:
                if not error.route_missing:
                    raise
                log.warning("Infrai batch publish unavailable (%s); publishing one by one", error)
            else:
                self.batch_available = True
                return ids
        ids = [await self.publish(message) for message in messages]
        self.batch_available = False
        return ids

    async def _publish_batched(self, messages: Sequence[OutgoingMessage]) -> list[str]:
        ids: list[str] = [""] * len(messages)
        for start in range(0, len(messages), self._batch_max):
            chunk = messages[start : start + self._batch_max]
            for body, positions in batch_bodies(
                chunk, shape=self._batch_shape, max_delay=self.max_delay_seconds
            ):
                data = await self.api.call(
                    "queue.publish_batch",
                    "POST",
                    self._batch_path,
                    body,
                    idempotency_key=batch_idempotency_key(body),
                )
                for position, message_id in zip(
                    positions, _batch_ids(data, len(positions)), strict=True
                ):
                    ids[start + position] = message_id
        return ids

    async def aclose(self) -> None:
        """Close the HTTP client if this publisher built it."""
        if self._owns_client:
            await self.api.client.aclose()


def _message_id(data: dict[str, Any], capability: str) -> str:
    value = data.get("message_id")
    if isinstance(value, bool) or not isinstance(value, str | int) or value == "":
        raise InfraiError(
            f"Infrai {capability}: malformed response: data.message_id is missing",
            code="MALFORMED_RESPONSE",
        )
    return str(value)


def _batch_ids(data: dict[str, Any], expected: int) -> list[str]:
    """Ids from ``message_ids: [...]`` or ``messages|results|items: [{message_id}]``."""
    raw = data.get("message_ids")
    if raw is None:
        raw = next((data[name] for name in _BATCH_ID_LISTS if name in data), None)
    if not isinstance(raw, list) or len(raw) != expected:
        raise InfraiError(
            f"Infrai queue.publish_batch: malformed response: expected {expected} message ids",
            code="MALFORMED_RESPONSE",
        )
    return [
        _message_id(item, "queue.publish_batch")
        if isinstance(item, dict)
        else _message_id({"message_id": item}, "queue.publish_batch")
        for item in raw
    ]


def infrai_config(settings: InfraiSettings) -> InfraiConfig:
    """The client configuration the settings describe."""
    return InfraiConfig(
        base_url=settings.base_url,
        api_key=settings.api_key,
        max_attempts=settings.max_attempts,
        backoff=BackoffPolicy(
            settings.backoff_base_seconds, settings.backoff_cap_seconds, floor_seconds=0.05
        ),
        max_retry_after_seconds=settings.max_retry_after_seconds,
    )


def build_http_client(settings: InfraiSettings) -> httpx.AsyncClient:
    """One pooled client for every Infrai call of a process."""
    return httpx.AsyncClient(
        timeout=httpx.Timeout(settings.timeout_seconds),
        limits=httpx.Limits(max_connections=32, max_keepalive_connections=16),
        follow_redirects=False,
    )


def build_infrai_publisher(
    settings: InfraiSettings, *, client: httpx.AsyncClient | None = None
) -> InfraiPublisher:
    """An Infrai publisher from settings; builds (and then owns) a client when none is given."""
    return InfraiPublisher(
        InfraiApi(client or build_http_client(settings), infrai_config(settings)),
        batch_path=settings.batch_path,
        batch_shape=settings.batch_shape,
        batch_max_messages=settings.batch_max_messages,
        owns_client=client is None,
    )
