"""The sweep's second half: republish sends whose queue message was lost.

The rule lives in ``app/domain/catchup.py``. Here: claim a bounded batch of overdue
reminders (one short transaction), publish with no transaction open, record the new
message ids. A crash after the claim only delays the reminder by another margin.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta

from sqlalchemy.ext.asyncio import AsyncEngine

from app.db import audit_repo, catchup_repo
from app.domain.catchup import OverdueReminder, catch_up_key, overdue_channels
from app.domain.errors import PublishError
from app.domain.messages import DeliveryPayload, OutgoingMessage
from app.domain.ports import QueuePublisher

log = logging.getLogger("reminders.sweep")


@dataclass(frozen=True, slots=True)
class CatchUpLimits:
    """How late a message may be before it counts as lost, and how much one sweep does."""

    margin: timedelta = timedelta(minutes=30)
    batch_size: int = 500


async def catch_up_lost_messages(
    engine: AsyncEngine,
    publisher: QueuePublisher,
    *,
    queue_for: Callable[[str], str],
    now: datetime,
    limits: CatchUpLimits,
) -> int:
    """Republish (new key, no delay) one bounded batch of overdue sends; the message count.

    First, reminders overdue by the margin whose every channel is final are settled: a
    process that died between a finalize's commit and its settle statement left them open,
    and neither a redelivery (``duplicate``) nor a republish would ever close them."""
    cutoff = now - limits.margin
    async with engine.begin() as conn:
        settled = await audit_repo.settle_final_reminders(
            conn, now=cutoff, limit=limits.batch_size, at=now
        )
        claimed = await catchup_repo.claim_overdue_reminders(
            conn, now=now, cutoff=cutoff, limit=limits.batch_size
        )
        rows = await catchup_repo.ledger_rows(conn, [reminder.id for reminder in claimed])
    if settled:
        log.warning("settled %d reminder(s) left open after their last send was final", settled)
    plan = [
        (reminder, overdue_channels(reminder, rows[reminder.id], now=now, margin=limits.margin))
        for reminder in claimed
    ]
    plan = [(reminder, channels) for reminder, channels in plan if channels]
    messages = [_message(due, channel, queue_for, now) for due, cs in plan for channel in cs]
    if not messages:
        return 0
    try:
        ids = await publisher.publish_batch(messages)
    except PublishError:
        async with engine.begin() as conn:
            await catchup_repo.restore_enqueued_at(conn, claimed, stamped=now)
        raise
    position = 0
    async with engine.begin() as conn:
        for reminder, channels in plan:
            await catchup_repo.record_republished(
                conn, reminder.id, ids[position : position + len(channels)]
            )
            position += len(channels)
    for reminder, channels in plan:
        log.warning("republished lost message(s) of %s for %s", reminder.id, ",".join(channels))
    return len(messages)


def _message(
    reminder: OverdueReminder, channel: str, queue_for: Callable[[str], str], now: datetime
) -> OutgoingMessage:
    return OutgoingMessage(
        queue=queue_for(channel),
        payload=DeliveryPayload(reminder.id, channel, reminder.schedule_version).to_json(),
        delay_seconds=0.0,
        idempotency_key=catch_up_key(reminder, channel, now),
        group=reminder.customer_id,
    )
