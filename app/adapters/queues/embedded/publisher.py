"""The embedded queue: messages in the service's own database, pushed by a dispatcher.

It stands in for the managed queue on one machine and in end-to-end tests, with the same
limits (``app.domain.queueing``): 256 KB payloads, 7-day maximum delay, 30-day retention,
and idempotency keys deduplicated for 5 minutes only (a key reused later is a new
message, as on the managed queue). Publishing takes its own short transaction; the
dispatcher (``dispatcher``) delivers over real HTTP to ``/push/{queue}``.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Sequence
from datetime import datetime, timedelta

from sqlalchemy.ext.asyncio import AsyncEngine

from app.db import queue_repo
from app.db.queue_repo import NewMessage
from app.domain.clock import utc_now
from app.domain.messages import OutgoingMessage
from app.domain.queueing import DEDUP_WINDOW, MAX_DELAY_SECONDS, RETENTION, check_publishable

# Insert at most this many messages per statement (SQLite caps bound parameters).
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
        """Store several messages in one transaction; every limit is checked before any."""
        for message in messages:
            check_publishable(message, max_delay_seconds=self.max_delay_seconds)
        ids: list[str] = []
        for start in range(0, len(messages), _CHUNK):
            ids.extend(await self._publish_chunk(messages[start : start + _CHUNK]))
        for listener in self._listeners:
            listener()
        return ids

    async def _publish_chunk(self, messages: Sequence[OutgoingMessage]) -> list[str]:
        now = self._clock()
        # One fresh id per distinct key; a key repeated inside the batch shares it.
        proposed: dict[tuple[str, str], str] = {}
        for message in messages:
            proposed.setdefault((message.queue, message.idempotency_key), str(uuid.uuid4()))
        async with self.engine.begin() as conn:
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
