"""What happened after a provider accepted a message (migration 0016): the suppression list
and the provider events that feed it.

``send_records`` gains its delivery status in the same migration (``tables.SendRecord``).
"""

from __future__ import annotations

from datetime import datetime
from typing import cast

from sqlalchemy import Index, String, Table, Text, UniqueConstraint
from sqlalchemy.orm import Mapped, mapped_column

from .tables import Base
from .types import BigId


class SuppressionRow(Base):
    """An address that receives no email, with why and since when."""

    __tablename__ = "suppressions"
    __table_args__ = (Index("ix_suppressions_reason_email", "reason", "email"),)

    # Normalized (app.domain.suppression.normalize_email): the domain part lower-cased.
    email: Mapped[str] = mapped_column(String(320), primary_key=True)
    reason: Mapped[str] = mapped_column(String(32))
    source: Mapped[str] = mapped_column(String(32))
    # The provider event that suppressed it (None for operators and SMTP refusals).
    source_event_id: Mapped[str | None] = mapped_column(String(255))
    detail: Mapped[str | None] = mapped_column(Text)
    created_at: Mapped[datetime]
    updated_at: Mapped[datetime]


class EmailEvent(Base):
    """One provider event (delivered, bounced, complained, deferred), kept once per id."""

    __tablename__ = "email_events"
    __table_args__ = (
        # The same event delivered twice is stored once: the intake is idempotent on this.
        UniqueConstraint("provider", "event_id"),
        # Soft bounces of an address within the window (the soft-bounce rule).
        Index("ix_email_events_email_kind_occurred_at", "email", "kind", "occurred_at"),
        # Bounce and complaint rates over the last 24 hours (metrics).
        Index("ix_email_events_received_at", "received_at"),
    )

    id: Mapped[int] = mapped_column(BigId, primary_key=True, autoincrement=True)
    provider: Mapped[str] = mapped_column(String(32))
    event_id: Mapped[str] = mapped_column(String(255))
    # delivered | hard_bounce | soft_bounce | complaint | deferred
    kind: Mapped[str] = mapped_column(String(16))
    email: Mapped[str | None] = mapped_column(String(320))
    provider_message_id: Mapped[str | None] = mapped_column(String(255))
    # The send record the event matched (None: an address-level event we never sent).
    send_record_id: Mapped[int | None] = mapped_column(BigId)
    detail: Mapped[str | None] = mapped_column(Text)
    occurred_at: Mapped[datetime]
    received_at: Mapped[datetime]


suppressions = cast(Table, SuppressionRow.__table__)
email_events = cast(Table, EmailEvent.__table__)
