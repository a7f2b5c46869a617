"""Deliverability figures for metrics and the admin page: suppressions by reason, and the
bounce and complaint rates providers judge a sender by, over the last 24 hours."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

from sqlalchemy.ext.asyncio import AsyncConnection

from app.db import email_events_repo, suppressions_repo
from app.domain.email_events import EventKind

RATE_WINDOW = timedelta(hours=24)


@dataclass(frozen=True, slots=True)
class DeliverabilityFigures:
    """What the operator watches to keep the sending accounts in good standing."""

    suppressions: dict[str, int]  # by reason
    emails_sent: int  # accepted by a provider within the window
    events: dict[str, int]  # received within the window, by kind

    @property
    def bounce_rate(self) -> float:
        """Hard bounces over emails sent in the window (SES reviews at 5 %, pauses at 10 %)."""
        return self._rate(EventKind.HARD_BOUNCE)

    @property
    def complaint_rate(self) -> float:
        """Complaints over emails sent in the window (Gmail and Yahoo: keep under 0.3 %)."""
        return self._rate(EventKind.COMPLAINT)

    def _rate(self, kind: EventKind) -> float:
        return self.events.get(kind.value, 0) / self.emails_sent if self.emails_sent else 0.0


async def deliverability_figures(conn: AsyncConnection, *, now: datetime) -> DeliverabilityFigures:
    """The figures as they are now (three bounded reads)."""
    since = now - RATE_WINDOW
    return DeliverabilityFigures(
        suppressions=await suppressions_repo.count_by_reason(conn),
        emails_sent=await email_events_repo.email_sends_since(conn, since),
        events=await email_events_repo.kinds_since(conn, since),
    )
