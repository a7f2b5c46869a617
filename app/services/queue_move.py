"""Changing queues with messages in flight: move what waits in the embedded queue onto the
queue kind now configured for its channel.

After ``REMINDERS_QUEUE`` (or a channel's ``REMINDERS_*_QUEUE_KIND``) changes from
``embedded``, the messages the sweep already stored in the embedded table would wait for a
dispatcher nobody runs any more, and the catch-up would republish them only
``REMINDERS_CATCHUP_MARGIN_SECONDS`` after they were due. Moving them keeps every due time:

- a message due within the new queue's delay horizon is published there with the delay it
  has left, then deleted here;
- a message due beyond that horizon (SQS delays at most 15 minutes, the embedded queue 7
  days) is deleted and its reminder goes back to ``scheduled``, in one transaction, so the
  sweep publishes it when it enters the new horizon.

Publishing runs outside any transaction. A crash between a publish and its delete leaves
the message in both queues, and a dispatcher of the old configuration may deliver a
message while it is being moved: either way the ledger admits one send and answers the
other delivery ``duplicate``. Messages of channels that still use the embedded queue stay.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime

from sqlalchemy.ext.asyncio import AsyncEngine

from app.db import queue_move_repo as repo
from app.domain.errors import MalformedDelivery
from app.domain.messages import OutgoingMessage, parse_delivery_payload
from app.domain.ports import QueuePublisher

BATCH = 500
EMBEDDED = "embedded"


@dataclass(slots=True)
class MoveReport:
    """What a move did: published onto the new queue, returned to the sweep, left here."""

    published: int = 0
    returned_to_sweep: int = 0
    kept: int = 0

    def as_dict(self) -> dict[str, int]:
        return {
            "published": self.published,
            "returned_to_sweep": self.returned_to_sweep,
            "kept": self.kept,
        }


@dataclass(frozen=True, slots=True)
class QueueChange:
    """Where each channel's messages go now: its queue name and queue kind."""

    queue_for: Callable[[str], str]
    kind_for: Callable[[str], str]
    channels: frozenset[str]


async def move_embedded_messages(
    engine: AsyncEngine,
    publisher: QueuePublisher,
    change: QueueChange,
    *,
    clock: Callable[[], datetime],
    batch: int = BATCH,
) -> MoveReport:
    """Move every ready message of a channel no longer on the embedded queue; returns counts."""
    report = MoveReport()
    after_id = 0
    while True:
        async with engine.connect() as conn:
            waiting = await repo.waiting_after(conn, after_id=after_id, limit=batch)
        if not waiting:
            return report
        after_id = waiting[-1].id
        await _move_batch(engine, publisher, change, waiting, clock(), report)


async def _move_batch(
    engine: AsyncEngine,
    publisher: QueuePublisher,
    change: QueueChange,
    waiting: Sequence[repo.WaitingMessage],
    now: datetime,
    report: MoveReport,
) -> None:
    outgoing: list[OutgoingMessage] = []
    moved: list[int] = []
    returned: list[tuple[str, int]] = []
    for message in waiting:
        try:
            payload = parse_delivery_payload(message.payload, channels=change.channels)
        except MalformedDelivery:
            report.kept += 1  # not ours to judge here: the dispatcher dead-letters it
            continue
        if change.kind_for(payload.channel) == EMBEDDED:
            report.kept += 1
            continue
        moved.append(message.id)
        delay = max(0.0, (message.visible_at - now).total_seconds())
        if delay > publisher.max_delay_seconds:
            returned.append((payload.reminder_id, payload.schedule_version))
            continue
        outgoing.append(
            OutgoingMessage(
                queue=change.queue_for(payload.channel),
                payload=payload.to_json(),
                delay_seconds=delay,
                idempotency_key=message.idempotency_key,
            )
        )
    if outgoing:
        await publisher.publish_batch(outgoing)
    async with engine.begin() as conn:
        await repo.remove_messages(conn, moved)
        await repo.return_to_sweep(conn, returned, now=now)
    report.published += len(outgoing)
    report.returned_to_sweep += len(returned)
