"""Redrive rules: which failed sends may be published again, and with which message.

A redrive is a new attempt through the same idempotent receiver, never a bypass of the
ledger: the send record goes back to ``pending`` with a fresh attempt budget (old attempts
are kept for audit) and a NEW queue message with a NEW idempotency key is published after
the reset has committed. Plain functions over plain data, shared by the API, the CLI and
the admin page, so a dry run reports exactly what a real run publishes.

Quarantined dead letters (``malformed`` / ``unknown_reminder``, no send record) are
listable. They are redrivable only when their payload names a reminder and channel that
exist now (the application created the reminder after the message arrived): a fresh
message for the reminder's current schedule version is published, and the receiver
creates the ledger row. A malformed payload is never redriven: nothing valid to publish.
An operator may discard a quarantined letter a redrive would skip: it leaves the open set
(and the gauge) and is never redriven; retention deletes it later.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import datetime, timedelta
from enum import StrEnum
from typing import Any

from .messages import DeliveryPayload, idempotency_key
from .states import ReminderState, SendState

REDRIVABLE_STATES = frozenset({SendState.DEAD, SendState.TERMINAL_FAILURE})


class RedriveAction(StrEnum):
    """What a redrive does with one candidate."""

    PUBLISH = "publish"  # reset the ledger row (if any) and publish a new message
    SKIP = "skip"  # left alone; the reason says why


@dataclass(frozen=True, slots=True)
class SendSnapshot:
    """The ledger fields a redrive decision reads (and compares-and-sets on)."""

    id: int
    reminder_id: str
    channel: str
    state: SendState
    attempt_count: int
    attempt_budget_start: int
    redrive_count: int
    lease_until: datetime | None
    next_attempt_at: datetime | None


@dataclass(frozen=True, slots=True)
class ReminderSnapshot:
    """The reminder fields a redrive decision reads."""

    id: str
    state: str
    schedule_version: int
    channels: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class RedriveCandidate:
    """One thing an operator asked to redrive: a dead letter, a send record, or both."""

    dead_letter_id: int | None
    reminder_id: str | None
    channel: str | None
    send: SendSnapshot | None
    reminder: ReminderSnapshot | None
    redriven_at: datetime | None = None  # of the dead letter, when it is one
    discarded_at: datetime | None = None  # ... likewise
    quarantined: bool = False  # a dead letter with no send record of its own


@dataclass(frozen=True, slots=True)
class RedrivePlan:
    """The decision for one candidate; for PUBLISH, the exact message to publish."""

    candidate: RedriveCandidate
    action: RedriveAction
    reason: str
    payload: dict[str, Any] | None = None
    idempotency_key: str | None = None
    new_redrive_count: int | None = None

    @property
    def publishes(self) -> bool:
        """True when this plan publishes a message."""
        return self.action == RedriveAction.PUBLISH


def redrive_idempotency_key(
    reminder_id: str, channel: str, schedule_version: int, suffix: str
) -> str:
    """The queue key of a redrive message: the sweep's key plus a per-redrive suffix."""
    return f"{idempotency_key(reminder_id, channel, schedule_version)}:{suffix}"


def _skip(candidate: RedriveCandidate, reason: str) -> RedrivePlan:
    return RedrivePlan(candidate, RedriveAction.SKIP, reason)


def _reminder_blocker(candidate: RedriveCandidate) -> str | None:
    reminder = candidate.reminder
    if candidate.reminder_id is None or candidate.channel is None:
        return "malformed message: nothing valid to publish"
    if reminder is None:
        return f"reminder {candidate.reminder_id!r} does not exist"
    if reminder.state == ReminderState.CANCELLED:
        return "reminder is cancelled"
    if candidate.channel not in reminder.channels:
        return f"reminder no longer uses channel {candidate.channel!r}"
    return None


def _send_blocker(send: SendSnapshot, candidate: RedriveCandidate, now: datetime) -> str | None:
    if send.state == SendState.SENT:
        return "already sent: never redriven"
    if send.state in REDRIVABLE_STATES:
        return None
    if send.state == SendState.SENDING:
        if send.lease_until is not None and send.lease_until > now:
            return f"in progress: lease held until {send.lease_until.isoformat()}"
        return None  # stuck: the lease expired and nothing redelivered it
    # pending
    if candidate.redriven_at is not None:
        return f"already redriven at {candidate.redriven_at.isoformat()}; the send is pending"
    if send.attempt_count == send.attempt_budget_start and send.next_attempt_at is None:
        return None  # nothing attempted since the last reset (e.g. a redrive whose publish failed)
    return "pending: a retry is scheduled and the queue will redeliver it"


def plan_redrive(candidate: RedriveCandidate, *, now: datetime) -> RedrivePlan:
    """Decide whether and how one candidate is redriven."""
    if candidate.discarded_at is not None:
        return _skip(candidate, f"discarded at {candidate.discarded_at.isoformat()}")
    blocker = _reminder_blocker(candidate)
    if blocker is not None:
        return _skip(candidate, blocker)
    assert candidate.reminder is not None and candidate.reminder_id and candidate.channel
    version = candidate.reminder.schedule_version
    payload = DeliveryPayload(candidate.reminder_id, candidate.channel, version).to_json()
    send = candidate.send
    if send is None:
        key = redrive_idempotency_key(
            candidate.reminder_id, candidate.channel, version, f"q{candidate.dead_letter_id}"
        )
        return RedrivePlan(
            candidate, RedriveAction.PUBLISH, "no send record yet: publish", payload, key
        )
    blocker = _send_blocker(send, candidate, now)
    if blocker is not None:
        return _skip(candidate, blocker)
    count = send.redrive_count + 1
    key = redrive_idempotency_key(candidate.reminder_id, candidate.channel, version, f"r{count}")
    reason = f"{send.state.value}: reset to pending with a fresh attempt budget"
    return RedrivePlan(candidate, RedriveAction.PUBLISH, reason, payload, key, count)


def discard_blocker(candidate: RedriveCandidate, *, now: datetime) -> str | None:
    """Why a dead letter may not be discarded, or None: only open quarantined letters that a
    redrive would skip (an exhausted send's letter stays until redriven: the audit pairs it
    with its ``dead`` send record)."""
    if candidate.discarded_at is not None:
        return f"already discarded at {candidate.discarded_at.isoformat()}"
    if candidate.redriven_at is not None:
        return f"already redriven at {candidate.redriven_at.isoformat()}"
    if not candidate.quarantined:
        return "an exhausted send's dead letter: redrive it instead"
    if plan_redrive(candidate, now=now).publishes:
        return "redrivable now: redrive it instead"
    return None


# Far more than any retention; keeps ``now - duration`` inside the datetime range.
MAX_DURATION = timedelta(days=36500)
_DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([smhdw]?)\s*$")
_UNIT_SECONDS = {"": 1, "s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800}


def parse_duration(text: str) -> timedelta:
    """``90``, ``90s``, ``15m``, ``2h``, ``3d``, ``1w`` → a timedelta; ValueError otherwise."""
    match = _DURATION.match(text.lower())
    if match is None:
        raise ValueError(f"{text!r} is not a duration like 90s, 15m, 2h, 3d or 1w")
    seconds = float(match.group(1)) * _UNIT_SECONDS[match.group(2)]
    if seconds > MAX_DURATION.total_seconds():
        raise ValueError(f"{text!r} is longer than {MAX_DURATION.days} days")
    return timedelta(seconds=seconds)


def format_age(seconds: float | None) -> str:
    """A short human age: ``45s``, ``12m``, ``3h 5m``, ``2d 4h``."""
    if seconds is None:
        return "-"
    whole = max(0, int(seconds))
    if whole < 60:
        return f"{whole}s"
    minutes, hours, days = whole // 60, whole // 3600, whole // 86400
    if whole < 3600:
        return f"{minutes}m"
    if whole < 86400:
        return f"{hours}h {minutes % 60}m"
    return f"{days}d {hours % 24}h"


@dataclass(frozen=True, slots=True)
class DeadLetterFilter:
    """Which dead letters a list or a redrive-by-filter selects."""

    queue: str | None = None
    channel: str | None = None
    error_class: str | None = None
    reason: str | None = None
    reminder_id: str | None = None
    older_than: timedelta | None = None  # became a dead letter at least this long ago
    newer_than: timedelta | None = None  # ... at most this long ago
    # False: open ones only, neither redriven nor discarded (default); None: all
    redriven: bool | None = False
    discarded: bool = False  # True: discarded ones only (``redriven`` is then ignored)


@dataclass(frozen=True, slots=True)
class SendFilter:
    """Which send records ``GET /v1/sends`` selects."""

    state: SendState | None = None
    stuck: bool = False  # only ``sending`` rows whose lease has expired
    channel: str | None = None
    error_class: str | None = None
    outcome: str | None = None
    reminder_id: str | None = None
