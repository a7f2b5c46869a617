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
from app.domain.registration import ItemResult, ItemStatus
from app.domain.states import ReminderState
from app.services import registration


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


def _raise_refusal(result: ItemResult) -> None:
    """A single PUT answers an item's refusal as the error it is."""
    if result.failure is not None:
        raise result.failure


async def put_customer(
    conn: AsyncConnection, customer_id: str, fields: dict[str, Any], *, now: datetime
) -> dict[str, Any]:
    """Create or replace a customer's contact details and preferences (a batch of one)."""
    [result] = await registration.put_customers(conn, [(customer_id, fields)], now=now)
    _raise_refusal(result)
    return await get_customer(conn, customer_id)


async def get_customer(conn: AsyncConnection, customer_id: str) -> dict[str, Any]:
    """A customer, or NotFound."""
    customer = await customers_repo.get_customer(conn, customer_id)
    if customer is None:
        raise NotFound(f"no customer {customer_id!r}")
    return customer


async def put_reminder(
    conn: AsyncConnection, reminder_id: str, values: dict[str, Any], *, now: datetime
) -> UpsertResult:
    """Idempotent upsert (a batch of one): same body, same result; a new plan bumps
    ``schedule_version``."""
    [result] = await registration.put_reminders(conn, [(reminder_id, values)], now=now)
    _raise_refusal(result)
    return UpsertResult(await _reload(conn, reminder_id), result.status is ItemStatus.CREATED)


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
