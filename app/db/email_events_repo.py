"""SQL for provider events, delivery statuses and the rates they give. Nothing commits."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import func, select, update
from sqlalchemy.ext.asyncio import AsyncConnection

from app.domain.email_events import ProviderEvent
from app.domain.states import SendState

from .deliverability_tables import email_events as ev
from .dialects import insert_for
from .tables import send_records as sr


async def record_event(
    conn: AsyncConnection, event: ProviderEvent, *, send_record_id: int | None, now: datetime
) -> bool:
    """Keep an event once; False when this (provider, event id) was already recorded."""
    stmt = insert_for(conn, ev).values(
        provider=event.provider,
        event_id=event.event_id,
        kind=event.kind.value,
        email=event.email,
        provider_message_id=event.message_id,
        send_record_id=send_record_id,
        detail=event.detail,
        occurred_at=event.occurred_at,
        received_at=now,
    )
    stmt = stmt.on_conflict_do_nothing(index_elements=[ev.c.provider, ev.c.event_id])
    return (await conn.execute(stmt)).rowcount > 0


async def find_send(conn: AsyncConnection, message_id: str) -> tuple[int, str | None] | None:
    """The email record a provider's message id names: (id, delivery status). Provider
    message ids are unique across providers (UUIDs and provider-prefixed ids)."""
    stmt = (
        select(sr.c.id, sr.c.delivery_status)
        .where(sr.c.provider_request_id == message_id, sr.c.channel == "email")
        .limit(1)
    )
    row = (await conn.execute(stmt)).first()
    return (row.id, row.delivery_status) if row else None


async def set_delivery_status(
    conn: AsyncConnection,
    send_record_id: int,
    *,
    status: str,
    old: str | None,
    at: datetime,
    detail: str | None,
) -> bool:
    """Set a record's delivery status if it is still ``old`` (a concurrent event wins)."""
    unchanged = sr.c.delivery_status.is_(None) if old is None else sr.c.delivery_status == old
    result = await conn.execute(
        update(sr)
        .where(sr.c.id == send_record_id, unchanged)
        .values(delivery_status=status, delivery_status_at=at, delivery_detail=detail)
    )
    return result.rowcount > 0


async def count_recent(conn: AsyncConnection, *, email: str, kind: str, since: datetime) -> int:
    """Events of one kind for one address that occurred since an instant."""
    stmt = select(func.count()).where(
        ev.c.email == email, ev.c.kind == kind, ev.c.occurred_at >= since
    )
    return int(await conn.scalar(stmt) or 0)


async def kinds_since(conn: AsyncConnection, since: datetime) -> dict[str, int]:
    """Events received since an instant, by kind (bounce and complaint rates)."""
    stmt = select(ev.c.kind, func.count()).where(ev.c.received_at >= since).group_by(ev.c.kind)
    return {kind: int(count) for kind, count in await conn.execute(stmt)}


async def email_sends_since(conn: AsyncConnection, since: datetime) -> int:
    """Emails providers accepted since an instant (the rates' denominator)."""
    stmt = select(func.count()).where(
        sr.c.updated_at >= since,  # ix_send_records_updated_at narrows; sent_at decides
        sr.c.sent_at >= since,
        sr.c.state == SendState.SENT.value,
        sr.c.channel == "email",
    )
    return int(await conn.scalar(stmt) or 0)
