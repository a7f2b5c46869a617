"""A publisher that records every message it is asked to publish, duplicates included.

It wraps the real in-memory publisher (whose idempotency window would hide a double
publish) and offers hooks to stage timing: ``before_batch`` runs before each batch is
handed over (to hold it open with an Event, or to advance an injected monotonic clock).
"""

from __future__ import annotations

import asyncio
from collections import Counter
from collections.abc import Awaitable, Callable, Sequence
from datetime import datetime

from app.adapters.queues.memory.publisher import MemoryPublisher
from app.domain.messages import OutgoingMessage


class RecordingPublisher:
    """The in-memory publisher plus a log of every requested message and batch."""

    name = "recording"

    def __init__(self, clock: Callable[[], datetime]) -> None:
        self.inner = MemoryPublisher(clock=clock)
        self.max_delay_seconds = self.inner.max_delay_seconds
        self.requested: list[OutgoingMessage] = []
        self.batches: list[int] = []
        self.before_batch: Callable[[], Awaitable[None]] | None = None

    async def publish(self, message: OutgoingMessage) -> str:
        """Record and publish one message."""
        self.requested.append(message)
        return await self.inner.publish(message)

    async def publish_batch(self, messages: Sequence[OutgoingMessage]) -> list[str]:
        """Record and publish a batch; yields to the event loop so concurrent sweeps interleave."""
        if self.before_batch is not None:
            await self.before_batch()
        await asyncio.sleep(0)
        ids = await self.inner.publish_batch(messages)
        self.batches.append(len(messages))
        self.requested.extend(messages)
        return ids

    def publish_counts(self) -> Counter[tuple[str, str]]:
        """How often each (reminder, channel) was requested."""
        return Counter((m.payload["reminder_id"], m.payload["channel"]) for m in self.requested)
