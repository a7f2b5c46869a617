"""Catch-up by state: which sends of an ``enqueued`` reminder lost their queue message.

Every queue gives up on a message at some point (Cloud Tasks deletes the task after its
last attempt, SNS and Pub/Sub dead-letter into places nobody reads, the embedded queue
moves it to its dead list). The sweep therefore looks at the ledger, not at the queue: a
send that is not final and whose message should have come back more than ``margin`` ago
is republished under a new queue key. If the old message was only late, the ledger
absorbs the duplicate (the claim admits one worker, a final row answers ``duplicate``).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime, timedelta

from .messages import idempotency_key
from .states import FINAL_SEND_STATES, SendState


@dataclass(frozen=True, slots=True)
class LedgerRow:
    """The fields of one ledger row that say when its queue message is due back."""

    channel: str
    state: SendState
    lease_until: datetime | None
    next_attempt_at: datetime | None
    updated_at: datetime


@dataclass(frozen=True, slots=True)
class OverdueReminder:
    """An ``enqueued`` reminder whose last publish is older than the margin, or a cancelled
    one still holding an open ledger row nobody will settle."""

    id: str
    due_at: datetime
    channels: tuple[str, ...]
    schedule_version: int
    enqueued_at: datetime | None
    cancelled: bool = False
    customer_id: str | None = None


def expected_back_at(row: LedgerRow) -> datetime | None:
    """When the queue should bring this row's message again; None when it never needs to."""
    if row.state in FINAL_SEND_STATES:
        return None
    if row.state == SendState.SENDING:
        return row.lease_until or row.updated_at
    return row.next_attempt_at or row.updated_at


def overdue_channels(
    reminder: OverdueReminder, rows: Iterable[LedgerRow], *, now: datetime, margin: timedelta
) -> list[str]:
    """The reminder's channels whose send is not final and whose message is overdue.

    A channel with no ledger row at all had its message dropped before any delivery (the
    caller only passes reminders due and published more than ``margin`` ago), unless the
    reminder is cancelled: then only an open row needs a message (to settle it, no send).
    A channel is final when any of its rows is (one per provider; a provider switch leaves
    old rows).
    """
    by_channel: dict[str, list[LedgerRow]] = {}
    for row in rows:
        by_channel.setdefault(row.channel, []).append(row)
    overdue = []
    for channel in reminder.channels:
        backs = [expected_back_at(row) for row in by_channel.get(channel, [])]
        if None in backs or (reminder.cancelled and not backs):
            continue  # final
        if all(back + margin <= now for back in backs if back is not None):
            overdue.append(channel)
    return overdue


def catch_up_key(reminder: OverdueReminder, channel: str, now: datetime) -> str:
    """A new queue key per republish: the old key may still be remembered (dedup windows,
    Cloud Tasks task names), which would turn the republish into a silent no-op."""
    base = idempotency_key(reminder.id, channel, reminder.schedule_version)
    return f"{base}:catchup:{int(now.timestamp())}"
