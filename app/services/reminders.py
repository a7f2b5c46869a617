"""Use cases behind the reminders API: reminders as the schedule of record."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy.ext.asyncio import AsyncConnection

from app.db import customers_repo, reminders_repo
from app.db.ledger import repo as ledger_repo
from app.domain.errors import Conflict, InvalidInput, NotFound
from app.domain.states import ReminderState

# A change to any of these means a new delivery plan: the version bumps so queued
# messages of the old plan are dropped as stale, and the sweep publishes again.
_PLAN_FIELDS = ("due_at", "channels")


@dataclass(frozen=True, slots=True)
class UpsertResult:
    """The reminder after a PUT, and whether the PUT created it."""

    reminder: dict[str, Any]
    created: bool


def require_templates(
    knows_kind: Callable[[str], bool], kind: str, channels: Sequence[str]
) -> None:
    """Refuse a kind with no email template when the email channel is asked for."""
    if "email" in channels and not knows_kind(kind):
        raise InvalidInput("kind", f"no email template for kind {kind!r}")


async def put_reminder(
    conn: AsyncConnection, reminder_id: str, values: dict[str, Any], *, now: datetime
) -> UpsertResult:
    """Idempotent upsert: same body, same result; a new plan bumps ``schedule_version``."""
    if await customers_repo.get_customer(conn, values["customer_id"]) is None:
        raise InvalidInput("customer_id", f"no customer {values['customer_id']!r}")
    current = await reminders_repo.lock_reminder(conn, reminder_id)
    if current is None:
        if await reminders_repo.insert_reminder(conn, reminder_id, values, now=now):
            return UpsertResult(await _reload(conn, reminder_id), created=True)
        current = await reminders_repo.lock_reminder(conn, reminder_id)  # lost a create race
        assert current is not None
    changes = {name: value for name, value in values.items() if current[name] != value}
    revive = current["state"] == ReminderState.CANCELLED
    if not changes and not revive:
        return UpsertResult(current, created=False)
    if current["state"] == ReminderState.DONE:
        raise Conflict(f"reminder {reminder_id!r} is already done; register a new id instead")
    if revive or any(name in changes for name in _PLAN_FIELDS):
        changes |= {
            "state": ReminderState.SCHEDULED.value,
            "schedule_version": current["schedule_version"] + 1,
            "sweep_claimed_until": None,
            "enqueued_at": None,
            "enqueued_message_ids": None,
            "cancelled_at": None,
        }
        await ledger_repo.reset_open_sends(conn, reminder_id, now=now)
    await reminders_repo.update_reminder(conn, reminder_id, changes, now=now)
    return UpsertResult(await _reload(conn, reminder_id), created=False)


async def cancel_reminder(
    conn: AsyncConnection, reminder_id: str, *, now: datetime
) -> dict[str, Any]:
    """Cancel a reminder: queued messages are dropped at delivery. Idempotent."""
    current = await reminders_repo.lock_reminder(conn, reminder_id)
    if current is None:
        raise NotFound(f"no reminder {reminder_id!r}")
    if current["state"] == ReminderState.DONE:
        raise Conflict(f"reminder {reminder_id!r} is already done")
    if current["state"] != ReminderState.CANCELLED:
        await reminders_repo.update_reminder(
            conn,
            reminder_id,
            {"state": ReminderState.CANCELLED.value, "cancelled_at": now},
            now=now,
        )
    return await _reload(conn, reminder_id)


async def get_reminder(conn: AsyncConnection, reminder_id: str) -> dict[str, Any]:
    """A reminder with its per-channel send records, or NotFound."""
    reminder = await reminders_repo.get_reminder(conn, reminder_id)
    if reminder is None:
        raise NotFound(f"no reminder {reminder_id!r}")
    reminder["send_records"] = await ledger_repo.list_send_records(conn, reminder_id)
    return reminder


async def _reload(conn: AsyncConnection, reminder_id: str) -> dict[str, Any]:
    reminder = await reminders_repo.get_reminder(conn, reminder_id)
    assert reminder is not None
    return reminder
