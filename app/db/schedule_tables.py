"""The recurring schedules table (migrations 0005, 0009); occurrences are ordinary reminders."""

from __future__ import annotations

from datetime import datetime
from enum import StrEnum
from typing import Any, cast

from sqlalchemy import JSON, ForeignKey, Index, Integer, String, Table, Text
from sqlalchemy.orm import Mapped, mapped_column

from .tables import ID_LENGTH, Base


class ScheduleState(StrEnum):
    """Whether a schedule produces occurrences."""

    ACTIVE = "active"  # materialized by every sweep
    PAUSED = "paused"  # no new occurrences; open ones were withdrawn
    DELETED = "deleted"  # like paused, and hidden from GET; a PUT brings it back


class Schedule(Base):
    """A recurring reminder: what to send, to whom, and when in local wall-clock time."""

    __tablename__ = "schedules"
    __table_args__ = (
        Index("ix_schedules_state_materialized_through", "state", "materialized_through"),
        Index("ix_schedules_broken_at", "broken_at"),  # 0009
        Index("ix_schedules_customer_id_id", "customer_id", "id"),  # 0014: a customer's list
    )

    id: Mapped[str] = mapped_column(String(ID_LENGTH), primary_key=True)
    customer_id: Mapped[str] = mapped_column(ForeignKey("customers.id"))  # _customer_id_id
    kind: Mapped[str] = mapped_column(String(100))
    channels: Mapped[list[str]] = mapped_column(JSON)
    rrule: Mapped[str | None] = mapped_column(Text)
    cron: Mapped[str | None] = mapped_column(String(200))
    local_time: Mapped[str | None] = mapped_column(String(5))
    # None: the customer's zone, read at each materialization.
    time_zone: Mapped[str | None] = mapped_column(String(64))
    offset_days: Mapped[int] = mapped_column(Integer, default=0)
    starts_at: Mapped[datetime | None]
    ends_at: Mapped[datetime | None]
    data: Mapped[dict[str, Any]] = mapped_column(JSON, default=dict)
    state: Mapped[str] = mapped_column(String(16), default=ScheduleState.ACTIVE)
    # +1 on every change of the schedule row.
    version: Mapped[int] = mapped_column(Integer, default=1)
    # Bookkeeping only (correctness comes from deterministic reminder ids and insert-if-
    # absent): when a sweep should visit again (once the horizon passes it), and the local
    # wall-clock time ("YYYY-MM-DDTHH:MM") occurrences were handled up to, where the next
    # pass resumes (local, so a customer changing zone neither skips nor repeats one).
    materialized_through: Mapped[datetime | None]
    materialized_local: Mapped[str | None] = mapped_column(String(16))
    # When the schedule last withdrew (cancelled) its open occurrences: a pause, a delete or
    # a re-plan. Occurrences cancelled at or before it may be revived by a later plan.
    withdrawn_at: Mapped[datetime | None]
    # Set when materialization failed (migration 0009): sweeps skip the schedule until a PUT
    # changes its plan or it is resumed; broken_error says why (truncated, for operators).
    broken_at: Mapped[datetime | None]
    broken_error: Mapped[str | None] = mapped_column(Text)
    created_at: Mapped[datetime]
    updated_at: Mapped[datetime]


schedules = cast(Table, Schedule.__table__)
