"""SQL for moving the embedded queue's waiting messages onto another queue kind.

Nothing here commits: the service runs each batch's delete and its reminders' reset in one
transaction, after the batch was published elsewhere.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import delete, select, tuple_, update
from sqlalchemy.ext.asyncio import AsyncConnection

from app.domain.states import ReminderState

from .queue_repo import READY, qm
from .tables import reminders


@dataclass(frozen=True, slots=True)
class WaitingMessage:
    """A ready message of the embedded queue, as it was stored."""

    id: int
    queue: str
    payload: Any
    idempotency_key: str
    visible_at: datetime


async def waiting_after(
    conn: AsyncConnection, *, after_id: int, limit: int
) -> list[WaitingMessage]:
    """Up to ``limit`` ready messages with an id above ``after_id``, in id order (dead ones
    stay: ``reminders embedded-dead`` and the catch-up own them)."""
    stmt = (
        select(qm.c.id, qm.c.queue, qm.c.payload, qm.c.idempotency_key, qm.c.visible_at)
        .where(qm.c.state == READY, qm.c.id > after_id)
        .order_by(qm.c.id)
        .limit(limit)
    )
    return [WaitingMessage(*row) for row in await conn.execute(stmt)]


async def remove_messages(conn: AsyncConnection, ids: Sequence[int]) -> int:
    """Delete moved messages that are still ready (one a dispatcher killed meanwhile stays
    on the dead list)."""
    if not ids:
        return 0
    stmt = delete(qm).where(qm.c.id.in_(list(ids)), qm.c.state == READY)
    return (await conn.execute(stmt)).rowcount


async def return_to_sweep(
    conn: AsyncConnection, versions: Sequence[tuple[str, int]], *, now: datetime
) -> int:
    """Put ``enqueued`` reminders (at the given schedule versions) back to ``scheduled``, so
    the sweep publishes them again once they enter the new queue's delay horizon."""
    if not versions:
        return 0
    stmt = (
        update(reminders)
        .where(
            reminders.c.state == ReminderState.ENQUEUED.value,
            tuple_(reminders.c.id, reminders.c.schedule_version).in_(sorted(set(versions))),
        )
        .values(
            state=ReminderState.SCHEDULED.value,
            enqueued_at=None,
            enqueued_message_ids=None,
            updated_at=now,
        )
    )
    return (await conn.execute(stmt)).rowcount
