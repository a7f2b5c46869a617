"""Registering customers and reminders, one or a thousand at a time, under one set of rules.

``PUT /v1/customers/{id}`` and ``PUT /v1/reminders/{id}`` are batches of one: the batch
routes, ``reminders import`` and the single PUTs all run ``customers.put_customers`` and
``reminders.put_reminders``, so an item of a batch is created, updated or left unchanged
exactly as its own PUT would be. The database work is set-based: a batch reads its current
rows in one statement (locked), inserts the new ones in one, and updates the changed ones
grouped by the columns they change.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy.ext.asyncio import AsyncConnection

from app.domain.registration import ItemResult, Items
from app.services import customers, reminders
from app.services.customers import CustomerChange


async def put_items(
    conn: AsyncConnection, kind: str, items: Items, *, now: datetime
) -> list[ItemResult]:
    """Register a batch of one kind: ``customer`` items carry the fields of a customer PUT,
    ``reminder`` items the values of a reminder PUT."""
    if kind == "customer":
        changes = [(item_id, _change(fields)) for item_id, fields in items]
        return await customers.put_customers(conn, changes, now=now)
    return await reminders.put_reminders(conn, items, now=now)


def _change(fields: dict[str, Any]) -> CustomerChange:
    return CustomerChange(**fields)
