"""An in-process queue publisher: used by tests and as the reference for the contract suite."""

from __future__ import annotations

import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta

from app.domain.clock import utc_now
from app.domain.messages import OutgoingMessage
from app.domain.queueing import DEDUP_WINDOW, MAX_DELAY_SECONDS, check_publishable


@dataclass(frozen=True, slots=True)
class PublishedMessage:
    """A message as the in-memory queue holds it."""

    message_id: str
    queue: str
    payload: dict
    delay_seconds: float
    idempotency_key: str
    published_at: datetime

    @property
    def visible_at(self) -> datetime:
        """When the queue would first push it."""
        return self.published_at + timedelta(seconds=self.delay_seconds)


class MemoryPublisher:
    """Holds published messages in a list, with the managed queue's limits and dedup window."""

    name = "memory"

    def __init__(
        self,
        *,
        max_delay_seconds: float = MAX_DELAY_SECONDS,
        clock: Callable[[], datetime] = utc_now,
    ) -> None:
        self.max_delay_seconds = max_delay_seconds
        self.messages: list[PublishedMessage] = []
        self._clock = clock
        self._recent: dict[tuple[str, str], PublishedMessage] = {}

    async def publish(self, message: OutgoingMessage) -> str:
        """Store one message; a repeated idempotency key within 5 minutes returns the first id."""
        check_publishable(message, max_delay_seconds=self.max_delay_seconds)
        now = self._clock()
        earlier = self._recent.get((message.queue, message.idempotency_key))
        if earlier is not None and now - earlier.published_at < DEDUP_WINDOW:
            return earlier.message_id
        stored = PublishedMessage(
            message_id=str(uuid.uuid4()),
            queue=message.queue,
            payload=dict(message.payload),
            delay_seconds=message.delay_seconds,
            idempotency_key=message.idempotency_key,
            published_at=now,
        )
        self.messages.append(stored)
        self._recent[(message.queue, message.idempotency_key)] = stored
        return stored.message_id

    async def publish_batch(self, messages: Sequence[OutgoingMessage]) -> list[str]:
        """Publish each message in order (all limits checked before any is stored)."""
        for message in messages:
            check_publishable(message, max_delay_seconds=self.max_delay_seconds)
        return [await self.publish(message) for message in messages]

    def drain(self) -> list[PublishedMessage]:
        """Take every stored message out (tests deliver them by hand)."""
        taken, self.messages = self.messages, []
        return taken


def build_memory_publisher(parts: object) -> MemoryPublisher:
    """A fresh in-memory queue (the registry's builder; it needs nothing of ``parts``)."""
    return MemoryPublisher()
