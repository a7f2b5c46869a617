"""Apply provider events: keep each once, set the send record's delivery status, suppress
addresses that hard-bounce, complain, or soft-bounce too often.

Each event is one transaction: recording it (unique per provider and event id) and its
effects commit together, so an event delivered twice changes nothing the second time, and a
crash between the two never leaves an event recorded without its effect.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from app.db import email_events_repo, suppressions_repo
from app.domain.email_events import (
    DeliveryStatus,
    EventKind,
    ProviderEvent,
    SoftBounceRule,
    advances,
    delivery_status,
    soft_bounce_suppresses,
    suppression_reason,
)
from app.domain.suppression import Suppression, SuppressionReason
from app.observability.metrics import EMAIL_EVENTS


@dataclass(frozen=True, slots=True)
class EventReport:
    """What a provider's post did: events read, new ones, sends matched, addresses suppressed."""

    received: int = 0
    new: int = 0
    matched: int = 0
    suppressed: int = 0

    def to_json(self) -> dict[str, int]:
        """The body of the route's 200 answer."""
        return {
            "received": self.received,
            "new": self.new,
            "matched": self.matched,
            "suppressed": self.suppressed,
        }


async def apply_events(
    engine: AsyncEngine, events: Sequence[ProviderEvent], *, rule: SoftBounceRule, now: datetime
) -> EventReport:
    """Apply each event in its own transaction; repeats are recognised and skipped."""
    new = matched = suppressed = 0
    for event in events:
        async with engine.begin() as conn:
            outcome = await _apply(conn, event, rule=rule, now=now)
        if outcome is None:
            continue
        EMAIL_EVENTS.labels(event.provider, event.kind.value).inc()
        new += 1
        matched += outcome[0]
        suppressed += outcome[1]
    return EventReport(len(events), new, matched, suppressed)


async def _apply(
    conn: AsyncConnection, event: ProviderEvent, *, rule: SoftBounceRule, now: datetime
) -> tuple[bool, bool] | None:
    """(matched a send, suppressed an address), or None for an event seen before."""
    found = await email_events_repo.find_send(conn, event.message_id) if event.message_id else None
    record_id = found[0] if found else None
    if not await email_events_repo.record_event(conn, event, send_record_id=record_id, now=now):
        return None
    if found is not None:
        await _set_status(conn, found, event)
    return found is not None, await _suppress(conn, event, rule=rule, now=now)


async def _set_status(
    conn: AsyncConnection, found: tuple[int, str | None], event: ProviderEvent
) -> None:
    record_id, old = found
    status = delivery_status(event.kind)
    if advances(status, DeliveryStatus(old) if old else None):
        await email_events_repo.set_delivery_status(
            conn, record_id, status=status.value, old=old, at=event.occurred_at,
            detail=event.detail,
        )  # fmt: skip


async def _suppress(
    conn: AsyncConnection, event: ProviderEvent, *, rule: SoftBounceRule, now: datetime
) -> bool:
    if event.email is None:
        return False
    reason = suppression_reason(event.kind)
    if reason is None and event.kind == EventKind.SOFT_BOUNCE:
        recent = await email_events_repo.count_recent(
            conn, email=event.email, kind=event.kind.value, since=now - rule.window
        )
        reason = SuppressionReason.SOFT_BOUNCES if soft_bounce_suppresses(recent, rule) else None
    if reason is None:
        return False
    entry = Suppression(
        event.email, reason, source=event.provider, source_event_id=event.event_id,
        detail=event.detail,
    )  # fmt: skip
    return await suppressions_repo.add_suppression(conn, entry, now=now)
