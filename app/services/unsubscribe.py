"""Unsubscribe through a signed link, recorded as the recipient's own decision.

The link's POST opts the customer out of its channel (``customers.opted_out_channels``,
what delivery obeys) and records the recipient's unsubscribe apart (when, how). An
application's later customer PUT cannot undo it: the recorded channels are added back to
whatever opt-outs the PUT sends. Only ``resubscribe`` (``DELETE
/v1/customers/{id}/unsubscribes/{channel}``, for a recipient who asked to come back)
clears it.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any

from sqlalchemy.ext.asyncio import AsyncConnection

from app.db import customers_repo, unsubscribes_repo
from app.domain.errors import NotFound
from app.domain.unsubscribe import UnsubscribeLinks

LINK_METHOD = "unsubscribe_link"


def check_link(links: UnsubscribeLinks, token: str) -> tuple[str, str]:
    """(customer_id, channel) of a valid link, else ``NotFound``."""
    return links.read(token)


async def unsubscribe(
    conn: AsyncConnection, links: UnsubscribeLinks, token: str, *, now: datetime
) -> tuple[str, str]:
    """Opt the link's customer out of its channel (idempotent); returns (customer, channel)."""
    customer_id, channel = links.read(token)
    if not await customers_repo.opt_out_channel(conn, customer_id, channel, now=now):
        raise NotFound("unknown unsubscribe link")
    await unsubscribes_repo.record(conn, customer_id, channel, method=LINK_METHOD, now=now)
    return customer_id, channel


async def recipient_unsubscribes(conn: AsyncConnection, customer_id: str) -> list[dict[str, Any]]:
    """What the customer's recipient unsubscribed from themselves: channel, when, how."""
    return await unsubscribes_repo.list_for(conn, customer_id)


async def recorded_channels(
    conn: AsyncConnection, customer_ids: Sequence[str]
) -> dict[str, set[str]]:
    """The channels each customer's recipient unsubscribed from themselves (one query)."""
    return await unsubscribes_repo.channels_by_customer(conn, customer_ids)


async def resubscribe(
    conn: AsyncConnection, customer_id: str, channel: str, *, now: datetime
) -> None:
    """Clear a recipient's unsubscribe and the channel's opt-out (NotFound: no customer)."""
    if not await customers_repo.opt_in_channel(conn, customer_id, channel, now=now):
        raise NotFound(f"no customer {customer_id!r}")
    await unsubscribes_repo.remove(conn, customer_id, channel)
