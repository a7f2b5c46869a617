"""Use cases behind the reminders API: reminders as the schedule of record."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy.ext.asyncio import AsyncConnection

from app.db import customers_repo, reminders_repo
from app.db.ledger import reminder_rows
from app.db.ledger import repo as ledger_repo
from app.domain.errors import Conflict, InvalidInput, NotFound
from app.domain.ledger import usefulness_deadline
from app.domain.messages import ReminderView
from app.domain.registration import ItemResult, Items, ItemStatus, first_of_each, in_batch_order
from app.domain.states import ReminderState

# The customer field each channel sends to.
RECIPIENT_FIELDS = {"email": "email", "webhook": "webhook_url"}

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


def missing_recipient(customer: Mapping[str, Any], channel: str) -> str | None:
    """The customer field ``channel`` sends to when the customer has none, else None."""
    field = RECIPIENT_FIELDS[channel]
    return None if customer.get(field) else field


def registration_problem(
    values: Mapping[str, Any], customer: Mapping[str, Any] | None
) -> InvalidInput | None:
    """Why a reminder cannot be registered for this customer (None: it can): the customer
    does not exist, or a channel has no recipient (it would fail at send as no_recipient)."""
    customer_id = values["customer_id"]
    if customer is None:
        return InvalidInput("customer_id", f"no customer {customer_id!r}")
    for channel in values["channels"]:
        field = missing_recipient(customer, channel)
        if field is not None:
            return InvalidInput(
                "channels", f"customer {customer_id!r} has no {field} for the {channel} channel"
            )
    return None


def usefulness_warnings(
    values: Mapping[str, Any], *, now: datetime, grace: timedelta
) -> list[dict[str, str]]:
    """Warnings for a reminder accepted as registered: already past its usefulness window,
    every send of it will be dropped as ``expired``."""
    view = ReminderView(
        id="",
        customer_id=values["customer_id"],
        kind=values["kind"],
        state="scheduled",
        due_at=values["due_at"],
        expires_at=values.get("expires_at"),
        channels=tuple(values["channels"]),
        data=values.get("data", {}),
        schedule_version=1,
    )
    deadline = usefulness_deadline(view, grace)
    if now <= deadline:
        return []
    field = "expires_at" if values.get("expires_at") is not None else "due_at"
    message = (
        f"the usefulness window ended at {deadline.isoformat()}: sends will be dropped as "
        "expired (set a later due_at or expires_at)"
    )
    return [{"code": "past_usefulness_window", "field": field, "message": message}]


def plan_reminder_change(
    reminder_id: str, current: dict[str, Any], values: dict[str, Any]
) -> dict[str, Any] | None:
    """The columns a PUT of ``values`` changes on ``current`` (None: nothing to do).

    Same body, same result. A changed due time or channel list, or a PUT of a cancelled
    reminder (which revives it), is a new plan: ``schedule_version`` bumps and the reminder is
    scheduled again. A ``done`` reminder cannot change (Conflict): register a new id instead.
    """
    changes = {name: value for name, value in values.items() if current[name] != value}
    revive = current["state"] == ReminderState.CANCELLED
    if not changes and not revive:
        return None
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
    return changes


async def put_reminders(conn: AsyncConnection, items: Items, *, now: datetime) -> list[ItemResult]:
    """Idempotent upserts of reminders; one result per item, in order."""
    unique = first_of_each(items)
    known = await customers_repo.contacts(conn, {v["customer_id"] for v in unique.values()})
    refused: dict[str, ItemResult] = {}
    for reminder_id, values in unique.items():
        failure = registration_problem(values, known.get(values["customer_id"]))
        if failure is not None:
            refused[reminder_id] = ItemResult.refused(reminder_id, failure)
    wanted = [(rid, values) for rid, values in unique.items() if rid not in refused]
    current = await reminders_repo.lock_reminders(conn, [rid for rid, _ in wanted])
    await _settle_final(conn, current, now=now)
    fresh = [(rid, values) for rid, values in wanted if rid not in current]
    created = await reminders_repo.insert_reminders(conn, fresh, now=now)
    lost_race = [rid for rid, _ in fresh if rid not in created]  # created by someone else
    current |= await reminders_repo.lock_reminders(conn, lost_race)
    outcomes = await _apply_changes(
        conn, [(rid, v) for rid, v in wanted if rid not in created], current, now
    )
    outcomes |= refused | {rid: ItemResult(rid, ItemStatus.CREATED) for rid in created}
    return in_batch_order(items, outcomes)


async def _apply_changes(
    conn: AsyncConnection,
    items: Items,
    current: dict[str, dict[str, Any]],
    now: datetime,
) -> dict[str, ItemResult]:
    outcomes: dict[str, ItemResult] = {}
    changes: dict[str, dict[str, Any]] = {}
    for reminder_id, values in items:
        try:
            change = plan_reminder_change(reminder_id, current[reminder_id], values)
        except Conflict as failure:
            outcomes[reminder_id] = ItemResult.refused(reminder_id, failure)
            continue
        status = ItemStatus.UNCHANGED if change is None else ItemStatus.UPDATED
        outcomes[reminder_id] = ItemResult(reminder_id, status)
        if change is not None:
            changes[reminder_id] = change
    replanned = [rid for rid, change in changes.items() if "state" in change]
    await reminder_rows.reset_open_sends(conn, replanned, now=now)
    await reminders_repo.update_reminders(conn, changes, now=now)
    return outcomes


async def _settle_final(
    conn: AsyncConnection, locked: dict[str, dict[str, Any]], *, now: datetime
) -> None:
    """Locked reminders whose every channel is already final are settled ``done`` first, so
    a reschedule or cancel of one is refused as for any done reminder instead of bumping a
    version no delivery will use (rows the two-channel race left ``enqueued``)."""
    for reminder_id, row in locked.items():
        if row["state"] != ReminderState.ENQUEUED:
            continue
        count = len(row["channels"])
        if await ledger_repo.settle_reminder(conn, reminder_id, channel_count=count, now=now):
            row["state"] = ReminderState.DONE.value


async def put_reminder(
    conn: AsyncConnection, reminder_id: str, values: dict[str, Any], *, now: datetime
) -> UpsertResult:
    """Idempotent upsert (a batch of one): same body, same result; a new plan bumps
    ``schedule_version``."""
    [result] = await put_reminders(conn, [(reminder_id, values)], now=now)
    result.raise_refusal()
    return UpsertResult(await _reload(conn, reminder_id), result.status is ItemStatus.CREATED)


async def cancel_reminder(
    conn: AsyncConnection, reminder_id: str, *, now: datetime
) -> dict[str, Any]:
    """Cancel a reminder: queued messages are dropped at delivery. Idempotent."""
    current = await reminders_repo.lock_reminder(conn, reminder_id)
    if current is not None:
        await _settle_final(conn, {reminder_id: current}, now=now)
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
    reminder["send_records"] = await reminder_rows.list_send_records(conn, reminder_id)
    reminder["delivery_by_channel"] = await reminder_rows.delivery_by_channel(conn, reminder_id)
    return reminder


async def _reload(conn: AsyncConnection, reminder_id: str) -> dict[str, Any]:
    reminder = await reminders_repo.get_reminder(conn, reminder_id)
    assert reminder is not None
    return reminder
