"""Use cases behind the customers API, and the rules a customer's record keeps.

* A webhook disabled because its endpoint answered 410 Gone stays disabled until the
  customer's ``webhook_url`` changes (a new URL is a new endpoint worth trying).
* Quiet hours come as a pair: both ends or neither, and the two ends differ.
* Unsubscribing keeps the first ``unsubscribed_at``; subscribing again clears it.
* What the recipient unsubscribed from through a link stays opted out whatever a PUT
  sends (``app.services.unsubscribe``).

A PUT replaces the record but must read what it keeps (the disable mark, the first
unsubscribe time), so it locks the row first: a 410 recorded by a delivery while the PUT
runs is not overwritten by the PUT's stale read. A single PUT is a batch of one: the batch
route and ``reminders import`` run the same ``put_customers``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from sqlalchemy.ext.asyncio import AsyncConnection

from app.db import customers_repo
from app.domain.errors import InvalidInput, NotFound
from app.domain.registration import (
    ItemResult,
    Items,
    ItemStatus,
    first_of_each,
    in_batch_order,
)

from . import unsubscribe


@dataclass(frozen=True, slots=True)
class CustomerChange:
    """What a caller sets on a customer (a PUT: every field, validated at the edge)."""

    email: str | None = None
    webhook_url: str | None = None
    time_zone: str = "UTC"
    opted_out_channels: Sequence[str] = field(default_factory=tuple)
    unsubscribed: bool = False
    quiet_hours_start: str | None = None  # local "HH:MM"
    quiet_hours_end: str | None = None


def customer_values(
    change: CustomerChange, previous: dict[str, Any] | None, *, now: datetime
) -> dict[str, Any]:
    """The stored columns after ``change``, keeping what the rules say survives a PUT."""
    check_quiet_hours(change.quiet_hours_start, change.quiet_hours_end)
    previous = previous or {}
    same_url = bool(previous) and previous.get("webhook_url") == change.webhook_url
    first_unsubscribed = previous.get("unsubscribed_at") or now
    return {
        "email": change.email,
        "webhook_url": change.webhook_url,
        "webhook_disabled_at": previous.get("webhook_disabled_at") if same_url else None,
        "time_zone": change.time_zone,
        "opted_out_channels": sorted(set(change.opted_out_channels)),
        "unsubscribed_at": first_unsubscribed if change.unsubscribed else None,
        "quiet_hours_start": change.quiet_hours_start,
        "quiet_hours_end": change.quiet_hours_end,
    }


def check_quiet_hours(start: str | None, end: str | None) -> None:
    """Refuse half a quiet-hours window, or one that starts where it ends."""
    if (start is None) != (end is None):
        raise InvalidInput("quiet_hours_end", "give both quiet_hours_start and quiet_hours_end")
    if start is not None and start == end:
        raise InvalidInput("quiet_hours_end", "must differ from quiet_hours_start")


async def put_customers(conn: AsyncConnection, items: Items, *, now: datetime) -> list[ItemResult]:
    """Create or replace customers (``(id, CustomerChange)`` items); one result per item,
    in order. Unchanged customers are not written."""
    unique = first_of_each(items)
    previous = await customers_repo.lock_customers(conn, list(unique))
    # A recipient's own unsubscribes survive: their channels stay opted out.
    recorded = await unsubscribe.recorded_channels(conn, list(unique))
    results, rows = {}, []
    for customer_id, change in unique.items():
        before = previous.get(customer_id)
        try:
            values = customer_values(change, before, now=now)
        except InvalidInput as failure:
            results[customer_id] = ItemResult.refused(customer_id, failure)
            continue
        kept = recorded.get(customer_id, set())
        values["opted_out_channels"] = sorted({*values["opted_out_channels"], *kept})
        if before is not None and all(before[name] == value for name, value in values.items()):
            results[customer_id] = ItemResult(customer_id, ItemStatus.UNCHANGED)
            continue
        status = ItemStatus.CREATED if before is None else ItemStatus.UPDATED
        results[customer_id] = ItemResult(customer_id, status)
        rows.append({"id": customer_id, **values})
    await customers_repo.upsert_customers(conn, rows, now=now)
    return in_batch_order(items, results)


async def put_customer(
    conn: AsyncConnection, customer_id: str, change: CustomerChange, *, now: datetime
) -> dict[str, Any]:
    """Create or replace a customer's contact details and preferences (a batch of one)."""
    [result] = await put_customers(conn, [(customer_id, change)], now=now)
    result.raise_refusal()
    return await get_customer(conn, customer_id)


async def get_customer(conn: AsyncConnection, customer_id: str) -> dict[str, Any]:
    """A customer with the recipient's own unsubscribes, or NotFound."""
    customer = await customers_repo.get_customer(conn, customer_id)
    if customer is None:
        raise NotFound(f"no customer {customer_id!r}")
    recorded = await unsubscribe.recipient_unsubscribes(conn, customer_id)
    return customer | {"recipient_unsubscribes": recorded}
