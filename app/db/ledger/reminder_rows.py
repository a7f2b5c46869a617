"""A reminder's ledger rows as the reminder services see them: listed for the API, each
channel's delivery, and reopened after a reschedule. Nothing here commits."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any

from sqlalchemy import func, select, update
from sqlalchemy.ext.asyncio import AsyncConnection

from app.domain.states import SendState

from .. import ledger_rules as rules
from ..tables import send_records

sr = send_records


async def reset_open_sends(
    conn: AsyncConnection, reminder_ids: Sequence[str], *, now: datetime
) -> None:
    """After a reschedule or revival: unsent rows become claimable with a fresh budget."""
    if not reminder_ids:
        return
    await conn.execute(
        update(sr)
        .where(
            sr.c.reminder_id.in_(list(reminder_ids)),
            sr.c.state.in_(
                [SendState.PENDING.value, SendState.TERMINAL_FAILURE.value, SendState.DEAD.value]
            ),
        )
        .values(
            state=SendState.PENDING.value,
            attempt_budget_start=sr.c.attempt_count,
            next_attempt_at=None,
            outcome=None,
            updated_at=now,
        )
    )


async def list_send_records(conn: AsyncConnection, reminder_id: str) -> list[dict[str, Any]]:
    """Every ledger row of a reminder, for the API."""
    rows = await conn.execute(
        select(sr).where(sr.c.reminder_id == reminder_id).order_by(sr.c.channel, sr.c.provider)
    )
    return [dict(row._mapping) for row in rows]


async def delivery_by_channel(conn: AsyncConnection, reminder_id: str) -> dict[str, str]:
    """Each channel of a reminder that has ended (every row final, one not handed over to
    another provider): delivered, undelivered or withheld."""
    rows = await conn.execute(
        select(sr.c.channel, rules.channel_delivery(sr))
        .where(sr.c.reminder_id == reminder_id)
        .group_by(sr.c.channel)
        .having(
            func.count().filter(~rules.is_final(sr)) == 0,
            func.count().filter(rules.settles_channel(sr)) > 0,
        )
        .order_by(sr.c.channel)
    )
    return {channel: delivery for channel, delivery in rows}
