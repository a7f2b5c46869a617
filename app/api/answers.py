"""Typed answers of the application API: what each route returns, with examples.

The models mirror the rows the services return (extra keys are dropped, none is renamed),
so the OpenAPI document is what a client receives and a generator can type it.
"""

from __future__ import annotations

from datetime import datetime
from enum import StrEnum
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, PlainSerializer

from app.db.schedule_tables import ScheduleState
from app.domain.states import DeliverySummary, ReminderState

from .inputs import StoredData

DELIVERY_DESCRIPTION = (
    "set once the reminder is done (null before, and when cancelled): delivered (every channel "
    "meant to go out was accepted by a provider), partially_delivered (some channels accepted, "
    "some failed), undelivered (none accepted, at least one failed: dead letter, permanent "
    "failure, or expired), withheld (nothing sent on purpose: every channel suppressed, opted "
    "out or withdrawn)"
)


# A named type, not a Literal: the OpenAPI document then has one Channel schema, and a
# generated client one enum, instead of a copy per field.
class Channel(StrEnum):
    """A way to reach a customer."""

    EMAIL = "email"  # an email to the customer's address
    WEBHOOK = "webhook"  # a signed POST to the customer's webhook_url


class ChannelDelivery(StrEnum):
    """What one channel of a reminder came to once its sending ended."""

    DELIVERED = DeliverySummary.DELIVERED.value  # a provider accepted it
    UNDELIVERED = DeliverySummary.UNDELIVERED.value  # it failed
    WITHHELD = DeliverySummary.WITHHELD.value  # not sent on purpose


_AT = "2026-12-01T09:00:00+00:00"
# Answers give instants as ISO 8601 with "+00:00", as before the models existed (pydantic
# alone would write "Z").
At = Annotated[datetime, PlainSerializer(datetime.isoformat, return_type=str)]


def _example(**fields: Any) -> ConfigDict:
    return ConfigDict(json_schema_extra={"examples": [fields]})


class ReminderWarning(BaseModel):
    """Something accepted that will probably not do what the caller wants."""

    code: Literal["past_usefulness_window", "recipient_unsupported"]
    field: str
    message: str


class RecipientUnsubscribe(BaseModel):
    """A recipient's own unsubscribe (through a link); only a re-subscribe clears it."""

    channel: Channel
    unsubscribed_at: At
    method: str


class CustomerOut(BaseModel):
    """A customer as stored."""

    model_config = _example(
        id="c1",
        email="c1@example.com",
        webhook_url=None,
        time_zone="Europe/Paris",
        opted_out_channels=[],
        unsubscribed=False,
        unsubscribed_at=None,
        webhook_disabled_at=None,
        quiet_hours_start=None,
        quiet_hours_end=None,
        recipient_unsubscribes=[],
        created_at=_AT,
        updated_at=_AT,
    )

    id: str
    email: str | None
    webhook_url: str | None
    time_zone: str
    opted_out_channels: list[Channel]
    unsubscribed: bool
    unsubscribed_at: At | None
    webhook_disabled_at: At | None = None
    quiet_hours_start: str | None = None
    quiet_hours_end: str | None = None
    recipient_unsubscribes: list[RecipientUnsubscribe] = Field(default_factory=list)
    created_at: At
    updated_at: At


class SendRecordOut(BaseModel):
    """One row of the send ledger: a reminder through one channel via one provider."""

    id: int
    reminder_id: str
    channel: str
    provider: str
    state: str = Field(description="pending, sending, sent, terminal_failure or dead")
    attempt_count: int
    attempt_budget_start: int
    lease_until: At | None
    next_attempt_at: At | None
    outcome: str | None
    last_error_class: str | None = Field(description="e.g. no_recipient, template_error")
    last_error: str | None
    provider_request_id: str | None
    idempotency_key: str
    first_attempt_at: At | None
    sent_at: At | None
    redrive_count: int
    delivery_status: str | None = Field(
        default=None,
        description="what the provider reported after accepting it: delivered, bounced, "
        "complained or deferred (null until an event arrives)",
    )
    delivery_status_at: At | None = None
    delivery_detail: str | None = Field(default=None, description="the provider's reason")
    created_at: At
    updated_at: At


_REMINDER_EXAMPLE: dict[str, Any] = {
    "id": "r1",
    "customer_id": "c1",
    "kind": "renewal",
    "due_at": _AT,
    "expires_at": None,
    "channels": ["email"],
    "data": {"plan": "Pro"},
    "state": "scheduled",
    "schedule_version": 1,
    "schedule_id": None,
    "sweep_claimed_until": None,
    "enqueued_at": None,
    "enqueued_message_ids": None,
    "cancelled_at": None,
    "done_at": None,
    "delivery": None,
    "created_at": _AT,
    "updated_at": _AT,
}


class ReminderRow(BaseModel):
    """A reminder as stored (lists show this, without send records)."""

    model_config = ConfigDict(json_schema_extra={"examples": [_REMINDER_EXAMPLE]})

    id: str
    customer_id: str
    kind: str
    due_at: At
    expires_at: At | None
    channels: list[Channel]
    data: StoredData
    state: ReminderState
    schedule_version: int
    schedule_id: str | None
    sweep_claimed_until: At | None
    enqueued_at: At | None
    enqueued_message_ids: list[str] | None
    cancelled_at: At | None
    done_at: At | None
    delivery: DeliverySummary | None = Field(default=None, description=DELIVERY_DESCRIPTION)
    created_at: At
    updated_at: At


class ReminderOut(ReminderRow):
    """A reminder with its per-channel send records."""

    model_config = ConfigDict(
        json_schema_extra={
            "examples": [_REMINDER_EXAMPLE | {"send_records": [], "delivery_by_channel": {}}]
        }
    )

    send_records: list[SendRecordOut] = Field(default_factory=list)
    delivery_by_channel: dict[str, ChannelDelivery] = Field(
        default_factory=dict,
        description="each channel whose sending has ended: delivered (a provider accepted "
        "it), undelivered (it failed) or withheld (not sent on purpose); a channel still "
        "being sent is absent",
    )


class ReminderPut(ReminderOut):
    """A reminder after a PUT, with warnings about what was accepted."""

    model_config = ConfigDict(
        json_schema_extra={
            "examples": [
                _REMINDER_EXAMPLE | {"send_records": [], "delivery_by_channel": {}, "warnings": []}
            ]
        }
    )

    warnings: list[ReminderWarning] = Field(
        default_factory=list,
        description="e.g. past_usefulness_window: due_at (or expires_at) is already so far "
        "in the past that the send will be dropped as expired",
    )


class ReminderPage(BaseModel):
    """A page of reminders in (due_at, id) order."""

    model_config = _example(items=[_REMINDER_EXAMPLE], next_cursor=None)

    items: list[ReminderRow]
    next_cursor: str | None = Field(description="pass as cursor for the next page; null: last")


class OccurrenceOut(BaseModel):
    """One unsent occurrence of a schedule."""

    id: str
    due_at: At
    state: ReminderState
    schedule_version: int


_SCHEDULE_EXAMPLE: dict[str, Any] = {
    "id": "s1",
    "customer_id": "c1",
    "kind": "weekly_digest",
    "channels": ["email"],
    "rrule": "FREQ=WEEKLY;BYDAY=MO",
    "cron": None,
    "local_time": "09:00",
    "time_zone": None,
    "offset_days": 0,
    "starts_at": None,
    "ends_at": None,
    "data": {},
    "state": "active",
    "version": 1,
    "materialized_through": _AT,
    "materialized_local": "2026-12-08T09:00",
    "withdrawn_at": None,
    "broken_at": None,
    "broken_error": None,
    "created_at": _AT,
    "updated_at": _AT,
}


class ScheduleRow(BaseModel):
    """A recurring schedule as stored."""

    model_config = ConfigDict(json_schema_extra={"examples": [_SCHEDULE_EXAMPLE]})

    id: str
    customer_id: str
    kind: str
    channels: list[Channel]
    rrule: str | None
    cron: str | None
    local_time: str | None
    time_zone: str | None
    offset_days: int
    starts_at: At | None
    ends_at: At | None
    data: StoredData
    state: ScheduleState
    version: int
    materialized_through: At | None
    materialized_local: str | None
    withdrawn_at: At | None
    broken_at: At | None
    broken_error: str | None
    created_at: At
    updated_at: At


class ScheduleOut(ScheduleRow):
    """A schedule with its next unsent occurrences."""

    model_config = ConfigDict(
        json_schema_extra={"examples": [_SCHEDULE_EXAMPLE | {"upcoming": []}]}
    )

    upcoming: list[OccurrenceOut] = Field(default_factory=list)


class SchedulePage(BaseModel):
    """A page of schedules in id order."""

    model_config = _example(items=[_SCHEDULE_EXAMPLE], next_cursor=None)

    items: list[ScheduleRow]
    next_cursor: str | None = Field(description="pass as cursor for the next page; null: last")


class SweepAnswer(BaseModel):
    """One sweep's report (502 with ``error`` when the queue refused a batch)."""

    model_config = _example(
        enqueued=12,
        messages=14,
        remaining=0,
        horizon_end=_AT,
        duration_ms=41.5,
        republished=0,
    )

    enqueued: int = Field(description="reminders published")
    messages: int = Field(description="queue messages published (one per channel)")
    remaining: int = Field(description="reminders inside the horizon still waiting")
    horizon_end: At
    duration_ms: float
    republished: int = Field(description="lost sends published again (catch-up)")
    purged: dict[str, Any] | None = Field(default=None, description="retention, when it ran")
    error: str | None = None


class HealthAnswer(BaseModel):
    """The process is up."""

    model_config = _example(status="ok")

    status: Literal["ok"]


class ReadinessAnswer(BaseModel):
    """Whether the database answers with its schema at head (503 when not, with why)."""

    model_config = _example(status="ready", schema=["0014_listing"], head=["0014_listing"])

    status: str
    reason: str | None = None
    schema_: list[str] | None = Field(default=None, alias="schema")
    head: list[str] | None = None


class AuditInvariant(BaseModel):
    """One ledger invariant and up to five offending ids."""

    name: str
    holds: bool
    description: str
    violations: int
    examples: list[Any]


class AuditAnswer(BaseModel):
    """The ledger's invariants checked now."""

    model_config = _example(
        ok=True,
        checked_at=_AT,
        invariants=[
            {
                "name": "one_send_per_channel",
                "holds": True,
                "description": "no channel of a reminder was sent twice",
                "violations": 0,
                "examples": [],
            }
        ],
    )

    ok: bool
    checked_at: At
    invariants: list[AuditInvariant]
