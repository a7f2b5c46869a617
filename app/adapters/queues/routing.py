"""One publisher per queue name when channels use different queue kinds.

``REMINDERS_EMAIL_QUEUE_KIND`` / ``REMINDERS_WEBHOOK_QUEUE_KIND`` may send email through Cloud
Tasks and webhooks through another queue at the same time; the sweep still sees one
publisher. Its horizon is the shortest of the kinds in use: a message may only be delayed as
far as every queue it could go to accepts.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from app.domain.errors import PublishError
from app.domain.messages import OutgoingMessage
from app.domain.ports import QueuePublisher


class RoutingPublisher:
    """Hands each message to the publisher of the queue it names."""

    name = "routing"

    def __init__(self, by_queue: Mapping[str, QueuePublisher]) -> None:
        if not by_queue:
            raise ValueError("at least one queue is required")
        self.by_queue = dict(by_queue)
        self.max_delay_seconds = min(p.max_delay_seconds for p in self.by_queue.values())

    async def publish(self, message: OutgoingMessage) -> str:
        """Publish through the queue's own publisher."""
        return await self._publisher(message.queue).publish(message)

    async def publish_batch(self, messages: Sequence[OutgoingMessage]) -> list[str]:
        """One batch per publisher; ids in the given order."""
        groups: dict[int, list[int]] = {}
        for index, message in enumerate(messages):
            groups.setdefault(id(self._publisher(message.queue)), []).append(index)
        ids: dict[int, str] = {}
        for positions in groups.values():
            publisher = self._publisher(messages[positions[0]].queue)
            published = await publisher.publish_batch([messages[i] for i in positions])
            ids.update(zip(positions, published, strict=True))
        return [ids[i] for i in range(len(messages))]

    async def aclose(self) -> None:
        """Close each distinct publisher once."""
        closed: set[int] = set()
        for publisher in self.by_queue.values():
            close = getattr(publisher, "aclose", None)
            if close is not None and id(publisher) not in closed:
                closed.add(id(publisher))
                await close()

    def _publisher(self, queue: str) -> QueuePublisher:
        publisher = self.by_queue.get(queue)
        if publisher is None:
            raise PublishError(f"queue {queue!r} is not configured")
        return publisher
