"""Typed answers of the application API: what each route returns, with examples.

The models mirror the rows the services return (extra keys are dropped, none is renamed),
so the OpenAPI document is what a client receives and a generator can type it.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

Channel = Literal["email", "webhook"]
ReminderStateName = Literal["scheduled", "enqueued", "done", "cancelled"]

_AT = "2026-12-01T09:00:00+00:00"


def _example(**fields: Any) -> ConfigDict:
    return ConfigDict(json_schema_extra={"examples": [fields]})


class Warning_(BaseModel):
    """Something accepted that will probably not do what the caller wants."""

    model_config = ConfigDict(title="Warning")

    code: Literal["past_usefulness_window"]
    field: str
    message: str


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
        created_at=_AT,
        updated_at=_AT,
    )

    id: str
    email: str | None
    webhook_url: str | None
    time_zone: str
    opted_out_channels: list[Channel]
    unsubscribed: bool
    unsubscribed_at: datetime | None
    webhook_disabled_at: datetime | None = None
    quiet_hours_start: str | None = None
    quiet_hours_end: str | None = None
    created_at: datetime
    updated_at: datetime


class SendRecordOut(BaseModel):
    """One row of the send ledger: a reminder through one channel via one provider."""

    id: int
    reminder_id: str
    channel: str
    provider: str
    state: str = Field(description="pending, sending, sent, terminal_failure or dead")
    attempt_count: int
    attempt_budget_start: int
    lease_until: datetime | None
    next_attempt_at: datetime | None
    outcome: str | None
    last_error_class: str | None = Field(description="e.g. no_recipient, template_error")
    last_error: str | None
    provider_request_id: str | None
    idempotency_key: str
    first_attempt_at: datetime | None
    sent_at: datetime | None
    redrive_count: int
    created_at: datetime
    updated_at: datetime


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
    "created_at": _AT,
    "updated_at": _AT,
}


class ReminderRow(BaseModel):
    """A reminder as stored (lists show this, without send records)."""

    model_config = ConfigDict(json_schema_extra={"examples": [_REMINDER_EXAMPLE]})

    id: str
    customer_id: str
    kind: str
    due_at: datetime
    expires_at: datetime | None
    channels: list[Channel]
    data: dict[str, Any]
    state: ReminderStateName
    schedule_version: int
    schedule_id: str | None
    sweep_claimed_until: datetime | None
    enqueued_at: datetime | None
    enqueued_message_ids: list[str] | None
    cancelled_at: datetime | None
    done_at: datetime | None
    created_at: datetime
    updated_at: datetime


class ReminderOut(ReminderRow):
    """A reminder with its per-channel send records."""

    model_config = ConfigDict(
        json_schema_extra={"examples": [_REMINDER_EXAMPLE | {"send_records": []}]}
    )

    send_records: list[SendRecordOut] = Field(default_factory=list)


class ReminderPut(ReminderOut):
    """A reminder after a PUT, with warnings about what was accepted."""

    model_config = ConfigDict(
        json_schema_extra={"examples": [_REMINDER_EXAMPLE | {"send_records": [], "warnings": []}]}
    )

    warnings: list[Warning_] = Field(
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
    due_at: datetime
    state: ReminderStateName
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
    starts_at: datetime | None
    ends_at: datetime | None
    data: dict[str, Any]
    state: Literal["active", "paused", "deleted"]
    version: int
    materialized_through: datetime | None
    materialized_local: str | None
    withdrawn_at: datetime | None
    broken_at: datetime | None
    broken_error: str | None
    created_at: datetime
    updated_at: datetime


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
