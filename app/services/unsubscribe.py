"""Unsubscribe through a signed link: the customer's opt-out for that channel is recorded."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy.ext.asyncio import AsyncConnection

from app.db import customers_repo
from app.domain.errors import NotFound
from app.domain.unsubscribe import UnsubscribeLinks


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
    return customer_id, channel
