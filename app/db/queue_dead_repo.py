"""SQL for the embedded queue's dead list: list it page by page, put messages back.

Pages follow ``ix_queue_messages_state_visible_at_id`` (state, visible_at, id) with a
keyset cursor on (visible_at, id), so a long ready backlog is never scanned. Nothing here commits.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any

from sqlalchemy import and_, or_, select, update
from sqlalchemy.ext.asyncio import AsyncConnection

from .queue_repo import DEAD, READY
from .queue_tables import queue_messages

qm = queue_messages
_SHOWN = (
    qm.c.id, qm.c.queue, qm.c.message_id, qm.c.payload, qm.c.idempotency_key, qm.c.attempts,
    qm.c.max_retries, qm.c.last_status, qm.c.last_error, qm.c.created_at, qm.c.dead_at,
    qm.c.expires_at, qm.c.visible_at,
)  # fmt: skip


async def list_dead(
    conn: AsyncConnection, *, after: tuple[datetime, int] | None, limit: int
) -> list[dict[str, Any]]:
    """Up to ``limit`` dead messages after the (visible_at, id) cursor, in that order."""
    stmt = select(*_SHOWN).where(qm.c.state == DEAD).order_by(qm.c.visible_at, qm.c.id).limit(limit)
    if after is not None:
        at, row_id = after
        stmt = stmt.where(or_(qm.c.visible_at > at, and_(qm.c.visible_at == at, qm.c.id > row_id)))
    return [dict(row._mapping) for row in await conn.execute(stmt)]


async def redrive_dead(
    conn: AsyncConnection, message_ids: Sequence[str], *, now: datetime, expires_at: datetime
) -> list[str]:
    """Make these dead messages ready now with a fresh redelivery budget; the ids moved."""
    if not message_ids:
        return []
    stmt = (
        update(qm)
        .where(qm.c.message_id.in_(list(message_ids)), qm.c.state == DEAD)
        .values(state=READY, attempts=0, visible_at=now, dead_at=None, expires_at=expires_at)
        .returning(qm.c.message_id)
    )
    return [row.message_id for row in await conn.execute(stmt)]
