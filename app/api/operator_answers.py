"""Typed answers of the operator API, for the OpenAPI document only.

The routes return the rows the services build; these models name the fields operators and
generated clients rely on, and allow more (a row gains a column without breaking a client).
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field

_AT = "2026-12-01T09:00:00+00:00"
_OPEN = ConfigDict(extra="allow")

_DEAD_LETTER: dict[str, Any] = {
    "id": 7,
    "send_record_id": 12,
    "queue": "reminders",
    "message_id": "m-42",
    "reminder_id": "r1",
    "channel": "email",
    "payload": {"v": 1, "reminder_id": "r1", "channel": "email", "schedule_version": 1},
    "reason": "attempts_exhausted",
    "error_class": "smtp_4xx",
    "error": "451 try again later",
    "attempts": 8,
    "redriven_at": None,
    "created_at": _AT,
    "age_seconds": 3600.0,
}


class DeadLetterRow(BaseModel):
    """A dead letter: an exhausted send or an authentic but unusable delivery."""

    model_config = ConfigDict(extra="allow", json_schema_extra={"examples": [_DEAD_LETTER]})

    id: int
    send_record_id: int | None = None
    queue: str
    message_id: str | None = None
    reminder_id: str | None = None
    channel: str | None = None
    payload: Any = None
    reason: str = Field(description="attempts_exhausted, malformed, unknown_reminder, …")
    error_class: str | None = None
    error: str | None = None
    attempts: int
    redriven_at: str | None = None
    created_at: str
    age_seconds: float | None = None


class DeadLetterPage(BaseModel):
    """A page of dead letters, oldest first."""

    model_config = ConfigDict(
        json_schema_extra={"examples": [{"items": [_DEAD_LETTER], "next_cursor": None}]}
    )

    items: list[DeadLetterRow]
    next_cursor: str | None


class DeadLetterGroup(BaseModel):
    """Open dead letters of one reason and error class."""

    model_config = _OPEN

    reason: str
    error_class: str | None = None
    count: int
    oldest_at: str | None = None
    oldest_age_seconds: float | None = None


class DeadLetterSummary(BaseModel):
    """Open dead letters grouped by reason and error class."""

    model_config = ConfigDict(
        json_schema_extra={
            "examples": [
                {
                    "groups": [
                        {
                            "reason": "attempts_exhausted",
                            "error_class": "smtp_4xx",
                            "count": 3,
                            "oldest_at": _AT,
                            "oldest_age_seconds": 3600.0,
                        }
                    ]
                }
            ]
        }
    )

    groups: list[DeadLetterGroup]


_REDRIVE_ITEM: dict[str, Any] = {
    "dead_letter_id": 7,
    "send_record_id": 12,
    "reminder_id": "r1",
    "channel": "email",
    "send_state": "dead",
    "action": "publish",
    "reason": None,
    "redrive_count": 1,
    "message": None,
    "message_id": "m-43",
}


class RedriveItem(BaseModel):
    """What a redrive did (or would do) with one dead letter or send."""

    model_config = ConfigDict(extra="allow", json_schema_extra={"examples": [_REDRIVE_ITEM]})

    dead_letter_id: int | None = None
    send_record_id: int | None = None
    reminder_id: str | None = None
    channel: str | None = None
    send_state: str | None = None
    action: str
    reason: str | None = None
    redrive_count: int | None = None
    message: dict[str, Any] | None = Field(default=None, description="what is published")
    message_id: str | None = None


class RedriveReport(BaseModel):
    """A redrive's report (``dry_run``: nothing was changed)."""

    model_config = ConfigDict(
        extra="allow",
        json_schema_extra={
            "examples": [{"dry_run": False, "published": 1, "skipped": 0, "items": [_REDRIVE_ITEM]}]
        },
    )

    dry_run: bool
    published: int
    skipped: int
    items: list[RedriveItem]
    error: str | None = None


class DeadLetterShown(BaseModel):
    """One dead letter with its send record, reminder, history and redrive preview."""

    model_config = ConfigDict(
        extra="allow",
        json_schema_extra={
            "examples": [
                {
                    "dead_letter": _DEAD_LETTER,
                    "send_record": None,
                    "reminder": None,
                    "history": [_DEAD_LETTER],
                    "redrive": _REDRIVE_ITEM,
                }
            ]
        },
    )

    dead_letter: DeadLetterRow
    send_record: dict[str, Any] | None = None
    reminder: dict[str, Any] | None = None
    history: list[dict[str, Any]]
    redrive: RedriveItem


class SendPage(BaseModel):
    """A page of send records (the ledger), by id."""

    model_config = ConfigDict(
        json_schema_extra={
            "examples": [
                {
                    "items": [
                        {
                            "id": 12,
                            "reminder_id": "r1",
                            "channel": "email",
                            "state": "sending",
                            "attempt_count": 2,
                            "lease_until": _AT,
                        }
                    ],
                    "next_cursor": None,
                }
            ]
        }
    )

    items: list[dict[str, Any]] = Field(description="send_records rows")
    next_cursor: str | None


class DeadMessagePage(BaseModel):
    """A page of messages the embedded queue gave up on."""

    model_config = ConfigDict(
        json_schema_extra={
            "examples": [
                {
                    "items": [
                        {
                            "id": 3,
                            "queue": "reminders",
                            "message_id": "m-9",
                            "attempts": 5,
                            "last_status": 503,
                            "dead_at": _AT,
                        }
                    ],
                    "next_cursor": None,
                }
            ]
        }
    )

    items: list[dict[str, Any]] = Field(description="queue_messages rows")
    next_cursor: str | None


class DeadMessagesRedriven(BaseModel):
    """The dead messages put back in the queue."""

    model_config = ConfigDict(json_schema_extra={"examples": [{"redriven": ["m-9"], "count": 1}]})

    redriven: list[str]
    count: int


def documented(model: type[BaseModel]) -> dict[str, Any]:
    """Route keywords that document ``model`` as the 200 answer without filtering the
    route's own answer through it."""
    return {"response_model": None, "responses": {200: {"model": model}}}
