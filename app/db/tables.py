"""SQLAlchemy 2 models. Alembic migrations are the only source of the schema; these mirror it."""

from __future__ import annotations

from datetime import datetime
from typing import Any, cast

from sqlalchemy import (
    JSON,
    Boolean,
    ForeignKey,
    Index,
    Integer,
    MetaData,
    String,
    Table,
    Text,
    UniqueConstraint,
    text,
)
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column

from app.domain.ledger import CLAIMANT_WORKER_LENGTH
from app.domain.states import (
    OPEN_REMINDER_STATES,
    OPEN_SEND_STATES,
    SETTLED_REMINDER_STATES,
    ReminderState,
    SendState,
)

from .types import BigId, UTCDateTime

NAMING = {
    "ix": "ix_%(table_name)s_%(column_0_N_name)s",
    "uq": "uq_%(table_name)s_%(column_0_N_name)s",
    "fk": "fk_%(table_name)s_%(column_0_name)s_%(referred_table_name)s",
    "pk": "pk_%(table_name)s",
    "ck": "ck_%(table_name)s_%(constraint_name)s",
}

ID_LENGTH = 200


def _state_in(states: frozenset[str]) -> str:
    return "state IN (" + ", ".join(f"'{state}'" for state in sorted(states)) + ")"


# Partial indexes' predicates (migration 0022). PostgreSQL writes a new entry into every
# index of a table on an update that is not HOT, and a change of ``state`` never is; an
# index limited to the states its queries ask for takes no entry for the other states.
# Queries that use one name their states as literals (``ledger_rules``): a bound parameter
# cannot prove a generic plan's rows lie inside the predicate. SQLite only writes the
# indexes whose columns changed, so it keeps these whole.
OPEN_REMINDERS_PREDICATE = _state_in(OPEN_REMINDER_STATES)
SETTLED_REMINDERS_PREDICATE = _state_in(SETTLED_REMINDER_STATES)
OPEN_SENDS_PREDICATE = _state_in(OPEN_SEND_STATES)


class Base(DeclarativeBase):
    metadata = MetaData(naming_convention=NAMING)
    type_annotation_map = {datetime: UTCDateTime()}


class Customer(Base):
    """A person reminders are sent to, keyed by the caller's stable id."""

    __tablename__ = "customers"

    id: Mapped[str] = mapped_column(String(ID_LENGTH), primary_key=True)
    # 0013: the admin page finds a customer's reminders by email.
    email: Mapped[str | None] = mapped_column(String(320), index=True)
    webhook_url: Mapped[str | None] = mapped_column(String(2048))
    time_zone: Mapped[str] = mapped_column(String(64), default="UTC")
    opted_out_channels: Mapped[list[str]] = mapped_column(JSON, default=list)
    unsubscribed_at: Mapped[datetime | None]
    # Set when the webhook endpoint answered 410 Gone; a new webhook_url clears it.
    webhook_disabled_at: Mapped[datetime | None]
    # A daily window (local "HH:MM", in time_zone) when schedule occurrences are held back.
    quiet_hours_start: Mapped[str | None] = mapped_column(String(5))
    quiet_hours_end: Mapped[str | None] = mapped_column(String(5))
    created_at: Mapped[datetime]
    updated_at: Mapped[datetime]


class Reminder(Base):
    """One intended reminder: the schedule of record."""

    __tablename__ = "reminders"
    __table_args__ = (
        # The sweep and the catch-up: open reminders by due time (0022: only open ones on
        # PostgreSQL, where a non-HOT update writes an entry in every index it qualifies for).
        Index(
            "ix_reminders_state_due_at",
            "state",
            "due_at",
            postgresql_where=text(OPEN_REMINDERS_PREDICATE),
        ),
        # 0008: retention, by the time a reminder settled (0022: only settled ones there).
        Index(
            "ix_reminders_state_updated_at",
            "state",
            "updated_at",
            postgresql_where=text(SETTLED_REMINDERS_PREDICATE),
        ),
        # 0014: the list's keyset order, whole and per customer or schedule
        Index("ix_reminders_due_at_id", "due_at", "id"),
        Index("ix_reminders_customer_id_due_at_id", "customer_id", "due_at", "id"),
        # 0022: occurrences of a schedule only; a one-off reminder has no entry.
        Index(
            "ix_reminders_schedule_id_due_at_id",
            "schedule_id",
            "due_at",
            "id",
            sqlite_where=text("schedule_id IS NOT NULL"),
            postgresql_where=text("schedule_id IS NOT NULL"),
        ),
        # 0017: the list filtered by delivery summary; only settled rows have one.
        Index(
            "ix_reminders_delivery_due_at_id",
            "delivery",
            "due_at",
            "id",
            sqlite_where=text("delivery IS NOT NULL"),
            postgresql_where=text("delivery IS NOT NULL"),
        ),
    )

    id: Mapped[str] = mapped_column(String(ID_LENGTH), primary_key=True)
    # Indexed by ix_reminders_customer_id_due_at_id (0019: a customer_id index of its own
    # only cost writes).
    customer_id: Mapped[str] = mapped_column(ForeignKey("customers.id"))
    kind: Mapped[str] = mapped_column(String(100))
    due_at: Mapped[datetime]
    expires_at: Mapped[datetime | None]
    channels: Mapped[list[str]] = mapped_column(JSON)
    data: Mapped[dict[str, Any]] = mapped_column(JSON, default=dict)
    state: Mapped[str] = mapped_column(String(16), default=ReminderState.SCHEDULED)
    schedule_version: Mapped[int] = mapped_column(Integer, default=1)
    # Set on occurrences materialized from a recurring schedule (app/db/schedule_tables.py).
    # Indexed by ix_reminders_schedule_id_due_at_id (0019, as customer_id).
    schedule_id: Mapped[str | None] = mapped_column(String(ID_LENGTH))
    # The sweep's claim: a row is being published until this instant (crash-safe, no lock held).
    sweep_claimed_until: Mapped[datetime | None]
    enqueued_at: Mapped[datetime | None]
    enqueued_message_ids: Mapped[list[str] | None] = mapped_column(JSON)
    cancelled_at: Mapped[datetime | None]
    done_at: Mapped[datetime | None]
    # 0017: set when it settles ``done``: what its channels came to (DeliverySummary).
    delivery: Mapped[str | None] = mapped_column(String(24))
    created_at: Mapped[datetime]
    updated_at: Mapped[datetime]


class SendRecord(Base):
    """The ledger: one row per (reminder, channel, provider), claimed under a lease."""

    __tablename__ = "send_records"
    __table_args__ = (
        UniqueConstraint("reminder_id", "channel", "provider"),
        # Open rows by lease (stuck sends, the catch-up; 0022: only open ones on PostgreSQL).
        Index(
            "ix_send_records_state_lease_until",
            "state",
            "lease_until",
            postgresql_where=text(OPEN_SENDS_PREDICATE),
        ),
        Index("ix_send_records_updated_at", "updated_at"),  # 0004: outcome windows
        # 0016: provider events name the message by the id the provider gave it (0022: rows
        # with one only; a claim's row has none yet).
        Index(
            "ix_send_records_provider_request_id",
            "provider_request_id",
            sqlite_where=text("provider_request_id IS NOT NULL"),
            postgresql_where=text("provider_request_id IS NOT NULL"),
        ),
    )

    id: Mapped[int] = mapped_column(BigId, primary_key=True, autoincrement=True)
    reminder_id: Mapped[str] = mapped_column(ForeignKey("reminders.id"))
    channel: Mapped[str] = mapped_column(String(32))
    provider: Mapped[str] = mapped_column(String(64))
    state: Mapped[str] = mapped_column(String(24), default=SendState.PENDING)
    # Monotonic: +1 on every successful claim. It is the fencing token for finalize.
    attempt_count: Mapped[int] = mapped_column(Integer, default=0)
    # attempt_count when the budget was last reset (redrive, reschedule); old attempts stay.
    attempt_budget_start: Mapped[int] = mapped_column(Integer, default=0)
    lease_until: Mapped[datetime | None]
    next_attempt_at: Mapped[datetime | None]
    outcome: Mapped[str | None] = mapped_column(String(24))
    last_error_class: Mapped[str | None] = mapped_column(String(64))
    last_error: Mapped[str | None] = mapped_column(Text)
    provider_request_id: Mapped[str | None] = mapped_column(String(255))
    idempotency_key: Mapped[str] = mapped_column(String(400))
    first_attempt_at: Mapped[datetime | None]
    sent_at: Mapped[datetime | None]
    redrive_count: Mapped[int] = mapped_column(Integer, default=0)
    # 0016: what the provider reported after accepting it (delivered, bounced, complained,
    # deferred), when, and its reason; None until an event arrives.
    delivery_status: Mapped[str | None] = mapped_column(String(16))
    delivery_status_at: Mapped[datetime | None]
    delivery_detail: Mapped[str | None] = mapped_column(Text)
    created_at: Mapped[datetime]
    updated_at: Mapped[datetime]


class SendAttempt(Base):
    """Append-only: one row per claim of a send record, its outcome written once at the end
    (``attempts_repo``). The ledger row keeps only the latest state; these rows keep who
    tried, when, under which lease, and whether the provider was called."""

    __tablename__ = "send_attempts"
    __table_args__ = (
        UniqueConstraint("send_record_id", "attempt"),
        Index("ix_send_attempts_claimed_at", "claimed_at"),  # the audit's recent window
        # Room on each page for its rows' one update, the outcome: it stays on the page
        # (HOT, no index entries). Migration 0021 says what it saved.
        {"postgresql_with": {"fillfactor": 40}},
    )

    id: Mapped[int] = mapped_column(BigId, primary_key=True, autoincrement=True)
    send_record_id: Mapped[int] = mapped_column(
        BigId, ForeignKey("send_records.id", ondelete="CASCADE")
    )
    reminder_id: Mapped[str] = mapped_column(String(ID_LENGTH))
    channel: Mapped[str] = mapped_column(String(32))
    provider: Mapped[str] = mapped_column(String(64))
    # The send record's attempt_count this claim set: the attempt's fencing token.
    attempt: Mapped[int] = mapped_column(Integer)
    claimed_by: Mapped[str] = mapped_column(String(CLAIMANT_WORKER_LENGTH))  # host:pid
    claimed_at: Mapped[datetime]
    lease_until: Mapped[datetime | None]
    # The provider takes an idempotency key and drops a repeat (a second call is harmless).
    provider_deduplicates: Mapped[bool] = mapped_column(Boolean, default=False)
    # Written once, when the attempt ends; NULL while it runs or when it never ended.
    provider_called: Mapped[bool | None] = mapped_column(Boolean)
    outcome: Mapped[str | None] = mapped_column(String(40))
    error_class: Mapped[str | None] = mapped_column(String(64))
    finished_at: Mapped[datetime | None]


class DeadLetter(Base):
    """The recovery set: exhausted sends and authentic-but-unusable messages."""

    __tablename__ = "dead_letters"
    __table_args__ = (
        Index("ix_dead_letters_created_at", "created_at"),
        # 0004: a reminder's dead letters; the open set (redriven_at IS NULL) oldest first.
        Index("ix_dead_letters_reminder_id", "reminder_id"),
        Index("ix_dead_letters_redriven_at_created_at", "redriven_at", "created_at"),
        # 0013: retention purges discarded letters oldest discard first.
        Index("ix_dead_letters_discarded_at", "discarded_at"),
        # A queue message is dead-lettered once, however often it is redelivered.
        UniqueConstraint("queue", "message_id"),
    )

    id: Mapped[int] = mapped_column(BigId, primary_key=True, autoincrement=True)
    send_record_id: Mapped[int | None] = mapped_column(
        BigId, ForeignKey("send_records.id"), index=True
    )
    queue: Mapped[str] = mapped_column(String(200))
    message_id: Mapped[str | None] = mapped_column(String(255))
    reminder_id: Mapped[str | None] = mapped_column(String(ID_LENGTH))
    channel: Mapped[str | None] = mapped_column(String(32))
    payload: Mapped[Any] = mapped_column(JSON, nullable=True)
    reason: Mapped[str] = mapped_column(String(32))
    error_class: Mapped[str | None] = mapped_column(String(64))
    error: Mapped[str | None] = mapped_column(Text)
    attempts: Mapped[int] = mapped_column(Integer, default=0)
    first_failed_at: Mapped[datetime | None]
    last_failed_at: Mapped[datetime | None]
    redriven_at: Mapped[datetime | None]
    # An operator closed this quarantined letter without redriving it (it never can be).
    discarded_at: Mapped[datetime | None]
    created_at: Mapped[datetime]


class ImportProgress(Base):
    """How far ``reminders import`` got in one file, committed with each batch it applied."""

    __tablename__ = "import_progress"

    # sha256 of the file's content: the same file resumes, an edited one starts over.
    source: Mapped[str] = mapped_column(String(64), primary_key=True)
    path: Mapped[str] = mapped_column(Text)
    # Lines applied (committed); a resumed import skips these.
    lines_done: Mapped[int] = mapped_column(BigId)
    # {"customer": {"created": n, ...}, "reminder": {...}}, totals over every run.
    counts: Mapped[dict[str, Any]] = mapped_column(JSON, default=dict)
    finished_at: Mapped[datetime | None]
    created_at: Mapped[datetime]
    updated_at: Mapped[datetime]


customers = cast(Table, Customer.__table__)
reminders = cast(Table, Reminder.__table__)
send_records = cast(Table, SendRecord.__table__)
dead_letters = cast(Table, DeadLetter.__table__)
send_attempts = cast(Table, SendAttempt.__table__)
import_progress = cast(Table, ImportProgress.__table__)
