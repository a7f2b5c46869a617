"""The embedded queue's dead list for operators: page through it, redrive from it.

A message lands there when its redeliveries ran out (a receiver down for long). The
sweep's catch-up republishes the reminder on its own; a redrive puts the original message
back (ready now, a fresh redelivery budget, a fresh retention) and the ledger absorbs any
duplicate of the two.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy.ext.asyncio import AsyncConnection

from app.db import queue_dead_repo
from app.domain.errors import InvalidInput
from app.domain.queueing import RETENTION

MAX_PAGE = 500


@dataclass(frozen=True, slots=True)
class DeadPage:
    """One page of the dead list and the cursor of the next (None at the end)."""

    items: list[dict[str, Any]]
    next_cursor: str | None


async def list_dead_messages(conn: AsyncConnection, *, cursor: str | None, limit: int) -> DeadPage:
    """A page of dead messages, oldest last delivery first."""
    items = await queue_dead_repo.list_dead(conn, after=_parse_cursor(cursor), limit=limit)
    last = items[-1] if len(items) == limit else None
    next_cursor = f"{last['visible_at'].isoformat()}|{last['id']}" if last else None
    return DeadPage(items, next_cursor)


async def redrive_dead_messages(
    conn: AsyncConnection, message_ids: Sequence[str], *, now: datetime
) -> list[str]:
    """Put dead messages back in the queue; returns the ids that were dead and moved."""
    if len(message_ids) > MAX_PAGE:
        raise InvalidInput("message_ids", f"at most {MAX_PAGE} per call")
    return await queue_dead_repo.redrive_dead(
        conn, message_ids, now=now, expires_at=now + RETENTION
    )


def _parse_cursor(cursor: str | None) -> tuple[datetime, int] | None:
    if cursor is None:
        return None
    at, _, row_id = cursor.partition("|")
    try:
        parsed = datetime.fromisoformat(at), int(row_id[:10])
    except ValueError:
        parsed = None
    if parsed is None or parsed[0].tzinfo is None or not 0 <= parsed[1] < 2**31:
        raise InvalidInput("cursor", "not a cursor this API returned")
    return parsed
