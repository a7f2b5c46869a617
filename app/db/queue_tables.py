"""The embedded queue's tables (migration 0002): messages and the idempotency-key window."""

from __future__ import annotations

from datetime import datetime
from typing import Any, cast

from sqlalchemy import JSON, Index, Integer, String, Table, Text
from sqlalchemy.orm import Mapped, mapped_column

from .tables import Base
from .types import BigId


class QueueMessage(Base):
    """One message of the embedded queue, from publish until acknowledged or dropped."""

    __tablename__ = "queue_messages"
    # The claim's order (visible_at, id) read from the index (migration 0018).
    __table_args__ = (Index("ix_queue_messages_state_visible_at_id", "state", "visible_at", "id"),)

    id: Mapped[int] = mapped_column(BigId, primary_key=True, autoincrement=True)
    queue: Mapped[str] = mapped_column(String(200))
    message_id: Mapped[str] = mapped_column(String(64), unique=True)
    payload: Mapped[Any] = mapped_column(JSON)
    idempotency_key: Mapped[str] = mapped_column(String(400))
    # "ready" (waiting or in flight) or "dead" (the queue's dead-letter list).
    state: Mapped[str] = mapped_column(String(8))
    # Next instant a dispatcher may claim it; a claim moves it by the visibility timeout.
    visible_at: Mapped[datetime]
    # Deliveries so far (claims, including ones whose dispatcher died before answering).
    attempts: Mapped[int] = mapped_column(Integer, default=0)
    max_retries: Mapped[int] = mapped_column(Integer)
    last_status: Mapped[int | None] = mapped_column(Integer)
    last_error: Mapped[str | None] = mapped_column(Text)
    created_at: Mapped[datetime]
    # Retention: a message still here at this instant is dropped, delivered or not.
    expires_at: Mapped[datetime]
    dead_at: Mapped[datetime | None]


class QueueIdempotencyKey(Base):
    """The last message published per (queue, idempotency key), for the 5-minute dedup window."""

    __tablename__ = "queue_idempotency_keys"

    queue: Mapped[str] = mapped_column(String(200), primary_key=True)
    idempotency_key: Mapped[str] = mapped_column(String(400), primary_key=True)
    message_id: Mapped[str] = mapped_column(String(64))
    published_at: Mapped[datetime] = mapped_column(index=True)


queue_messages = cast(Table, QueueMessage.__table__)
queue_idempotency_keys = cast(Table, QueueIdempotencyKey.__table__)
