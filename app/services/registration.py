"""Registering customers and reminders, one or a thousand at a time, under one set of rules.

``PUT /v1/customers/{id}`` and ``PUT /v1/reminders/{id}`` are batches of one: the batch
routes, ``reminders import`` and the single PUTs all run these functions, so an item in a
batch is created, updated or left unchanged exactly as its own PUT would be. The database
work is set-based: a batch reads its current rows in one statement (locked), inserts the new
ones in one, and updates the changed ones grouped by the columns they change.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any

from sqlalchemy.ext.asyncio import AsyncConnection

from app.db import customers_repo, reminders_repo
from app.db.ledger import repo as ledger_repo
from app.domain.errors import Conflict, InvalidInput
from app.domain.registration import ItemResult, ItemStatus
from app.domain.states import ReminderState

# A change to any of these means a new delivery plan: the version bumps so queued
# messages of the old plan are dropped as stale, and the sweep publishes again.
_PLAN_FIELDS = ("due_at", "channels")


# --- customers ---


def customer_values(
    fields: dict[str, Any], previous: dict[str, Any] | None, now: datetime
) -> dict[str, Any]:
    """The stored columns for a customer PUT, given the row it replaces (if any)."""
    webhook_url = fields.get("webhook_url")
    before = previous or {}
    same_url = previous is not None and before.get("webhook_url") == webhook_url
    return {
        "email": fields.get("email"),
        "webhook_url": webhook_url,
        # A webhook disabled after 410 Gone stays disabled until the URL changes.
        "webhook_disabled_at": before.get("webhook_disabled_at") if same_url else None,
        "time_zone": fields.get("time_zone", "UTC"),
        "opted_out_channels": sorted(set(fields.get("opted_out_channels", ()))),
        "unsubscribed_at": (before.get("unsubscribed_at") or now)
        if fields.get("unsubscribed")
        else None,
        **_quiet_hours(fields.get("quiet_hours_start"), fields.get("quiet_hours_end")),
    }


def _quiet_hours(start: str | None, end: str | None) -> dict[str, str | None]:
    if (start is None) != (end is None):
        raise InvalidInput("quiet_hours_end", "give both quiet_hours_start and quiet_hours_end")
    if start is not None and start == end:
        raise InvalidInput("quiet_hours_end", "must differ from quiet_hours_start")
    return {"quiet_hours_start": start, "quiet_hours_end": end}


Items = Sequence[tuple[str, dict[str, Any]]]


def _in_order(items: Items, by_id: dict[str, ItemResult]) -> list[ItemResult]:
    """One result per item, in the batch's order; a repeated id is refused after its first."""
    results, seen = [], set()
    for item_id, _ in items:
        if item_id in seen:
            failure = InvalidInput("id", "appears more than once in this batch")
            results.append(ItemResult.refused(item_id, failure))
        else:
            seen.add(item_id)
            results.append(by_id[item_id])
    return results


def _first_of_each(items: Items) -> dict[str, dict[str, Any]]:
    unique: dict[str, dict[str, Any]] = {}
    for item_id, values in items:
        unique.setdefault(item_id, values)
    return unique


async def put_customers(conn: AsyncConnection, items: Items, *, now: datetime) -> list[ItemResult]:
    """Create or replace customers; one result per item, in order."""
    unique = _first_of_each(items)
    previous = await customers_repo.lock_customers(conn, list(unique))
    results, rows = {}, []
    for customer_id, fields in unique.items():
        before = previous.get(customer_id)
        try:
            values = customer_values(fields, before, now)
        except InvalidInput as failure:
            results[customer_id] = ItemResult.refused(customer_id, failure)
            continue
        if before is not None and all(before[name] == value for name, value in values.items()):
            results[customer_id] = ItemResult(customer_id, ItemStatus.UNCHANGED)
            continue
        status = ItemStatus.CREATED if before is None else ItemStatus.UPDATED
        results[customer_id] = ItemResult(customer_id, status)
        rows.append({"id": customer_id, **values})
    await customers_repo.upsert_customers(conn, rows, now=now)
    return _in_order(items, results)


# --- reminders ---


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
    unique = _first_of_each(items)
    known = await customers_repo.existing_ids(conn, {v["customer_id"] for v in unique.values()})
    refused: dict[str, ItemResult] = {}
    for reminder_id, values in unique.items():
        if values["customer_id"] not in known:
            failure = InvalidInput("customer_id", f"no customer {values['customer_id']!r}")
            refused[reminder_id] = ItemResult.refused(reminder_id, failure)
    wanted = [(rid, values) for rid, values in unique.items() if rid not in refused]
    current = await reminders_repo.lock_reminders(conn, [rid for rid, _ in wanted])
    fresh = [(rid, values) for rid, values in wanted if rid not in current]
    created = await reminders_repo.insert_reminders(conn, fresh, now=now)
    lost_race = [rid for rid, _ in fresh if rid not in created]  # created by someone else
    current |= await reminders_repo.lock_reminders(conn, lost_race)
    outcomes = await _apply_changes(
        conn, [(rid, v) for rid, v in wanted if rid not in created], current, now
    )
    outcomes |= refused | {rid: ItemResult(rid, ItemStatus.CREATED) for rid in created}
    return _in_order(items, outcomes)


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
    await ledger_repo.reset_open_sends(conn, replanned, now=now)
    await reminders_repo.update_reminders(conn, changes, now=now)
    return outcomes


async def put_items(
    conn: AsyncConnection, kind: str, items: Items, *, now: datetime
) -> list[ItemResult]:
    """Register a batch of one kind: ``customer`` or ``reminder``."""
    put = put_customers if kind == "customer" else put_reminders
    return await put(conn, items, now=now)
