"""The embedded queue: messages in the service's own database, pushed by a dispatcher.

It stands in for the managed queue on one machine and in end-to-end tests, with the same
limits (``app.domain.queueing``): 256 KB payloads, 7-day maximum delay, 30-day retention,
and idempotency keys deduplicated for 5 minutes only (a key reused later is a new
message, as on the managed queue). Publishing takes its own short transaction; the
dispatcher (``dispatcher``) delivers over real HTTP to ``/push/{queue}``.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from datetime import datetime, timedelta

from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from app.db import queue_repo
from app.db.queue_repo import NewMessage
from app.domain.clock import utc_now
from app.domain.errors import ConfigError
from app.domain.messages import OutgoingMessage
from app.domain.queueing import (
    DEDUP_WINDOW,
    MAX_DELAY_SECONDS,
    RETENTION,
    check_publishable,
    new_message_id,
)

from ..parts import QueueParts

# Messages per transaction of publish_batch. SQLite's statements are sent in pages within its
# bound-parameter limit either way; the bound keeps each write transaction short.
_CHUNK = 500


class EmbeddedQueuePublisher:
    """Publishes into the ``queue_messages`` table of the service's database."""

    name = "embedded"

    def __init__(
        self,
        engine: AsyncEngine,
        *,
        max_retries: int = 16,
        max_delay_seconds: float = MAX_DELAY_SECONDS,
        clock: Callable[[], datetime] = utc_now,
    ) -> None:
        self.engine = engine
        self.max_retries = max_retries
        self.max_delay_seconds = max_delay_seconds
        self._clock = clock
        self._listeners: list[Callable[[], None]] = []

    def on_publish(self, listener: Callable[[], None]) -> None:
        """Call ``listener`` after each committed publish (an in-process dispatcher wakes up)."""
        self._listeners.append(listener)

    async def publish(self, message: OutgoingMessage) -> str:
        """Store one message; a key reused within 5 minutes returns the first message's id."""
        [message_id] = await self.publish_batch([message])
        return message_id

    async def publish_batch(self, messages: Sequence[OutgoingMessage]) -> list[str]:
        """Store several messages, a transaction per 500; every limit is checked before any."""
        self._check(messages)
        ids: list[str] = []
        for start in range(0, len(messages), _CHUNK):
            async with self.engine.begin() as conn:
                ids.extend(await self._store(conn, messages[start : start + _CHUNK]))
        self.notify_published()
        return ids

    def shares_database(self, engine: AsyncEngine) -> bool:
        """Whether ``engine`` writes to this queue's database (``publish_within`` applies)."""
        return engine is self.engine

    async def publish_within(
        self, conn: AsyncConnection, messages: Sequence[OutgoingMessage]
    ) -> list[str]:
        """Store messages in the caller's transaction on this queue's database, so the
        caller's own writes commit or roll back with them. Call ``notify_published`` after
        the commit."""
        self._check(messages)
        return await self._store(conn, messages)

    def notify_published(self) -> None:
        """Tell the listeners that messages were committed."""
        for listener in self._listeners:
            listener()

    def _check(self, messages: Sequence[OutgoingMessage]) -> None:
        for message in messages:
            check_publishable(message, max_delay_seconds=self.max_delay_seconds)

    async def _store(self, conn: AsyncConnection, messages: Sequence[OutgoingMessage]) -> list[str]:
        now = self._clock()
        # One fresh id per distinct key; a key repeated inside the batch shares it.
        proposed: dict[tuple[str, str], str] = {}
        for message in messages:
            proposed.setdefault((message.queue, message.idempotency_key), new_message_id(now))
        recorded = await queue_repo.remember_keys(
            conn,
            [(queue, key, mid) for (queue, key), mid in proposed.items()],
            now=now,
            window_start=now - DEDUP_WINDOW,
        )
        existing = await queue_repo.message_ids_for_keys(
            conn, [pair for pair in proposed if pair not in recorded]
        )
        await queue_repo.insert_messages(
            conn,
            self._new_messages(messages, proposed, recorded, now),
            now=now,
            max_retries=self.max_retries,
        )
        chosen = {**existing, **{pair: proposed[pair] for pair in recorded}}
        return [chosen[(m.queue, m.idempotency_key)] for m in messages]

    def _new_messages(
        self,
        messages: Sequence[OutgoingMessage],
        proposed: dict[tuple[str, str], str],
        recorded: set[tuple[str, str]],
        now: datetime,
    ) -> list[NewMessage]:
        stored: list[NewMessage] = []
        seen: set[tuple[str, str]] = set()
        for message in messages:
            pair = (message.queue, message.idempotency_key)
            if pair not in recorded or pair in seen:
                continue
            seen.add(pair)
            stored.append(
                NewMessage(
                    queue=message.queue,
                    message_id=proposed[pair],
                    payload=dict(message.payload),
                    idempotency_key=message.idempotency_key,
                    visible_at=now + timedelta(seconds=message.delay_seconds),
                    expires_at=now + RETENTION,
                )
            )
        return stored


def build_embedded_publisher(parts: QueueParts) -> EmbeddedQueuePublisher:
    """The publisher over the service's database engine."""
    if parts.engine is None:
        raise ConfigError("the embedded queue needs the service's database engine")
    max_retries = parts.settings.embedded.max_retries
    if parts.clock is None:
        return EmbeddedQueuePublisher(parts.engine, max_retries=max_retries)
    return EmbeddedQueuePublisher(parts.engine, max_retries=max_retries, clock=parts.clock)
