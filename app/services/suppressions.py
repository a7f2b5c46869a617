"""The suppression list for operators: list, add by hand, lift (API, CLI and admin page)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy.ext.asyncio import AsyncConnection

from app.db import suppressions_repo
from app.domain.errors import Conflict, InvalidInput, NotFound
from app.domain.suppression import (
    Suppression,
    SuppressionReason,
    may_lift,
    normalize_email,
)

from .listing import Page, decode_cursor, encode_cursor

MAX_LIMIT = 500


@dataclass(frozen=True, slots=True)
class SuppressionFilters:
    """What a listing narrows by; None means any."""

    email: str | None = None  # one address (normalized before use)
    domain: str | None = None  # every address at this domain
    reason: SuppressionReason | None = None


async def list_suppressions(
    conn: AsyncConnection, filters: SuppressionFilters, *, cursor: str | None, limit: int
) -> Page:
    """A page of suppressions in address order, with the next page's cursor."""
    if not 1 <= limit <= MAX_LIMIT:
        raise InvalidInput("limit", f"must be between 1 and {MAX_LIMIT}")
    rows = await suppressions_repo.list_suppressions(
        conn,
        email=normalize_email(filters.email) if filters.email is not None else None,
        domain=filters.domain.strip().lower() if filters.domain is not None else None,
        reason=filters.reason.value if filters.reason is not None else None,
        after=decode_cursor("suppressions", cursor, 1)[0] if cursor is not None else None,
        limit=limit + 1,  # one more tells whether a next page exists
    )
    items, more = rows[:limit], len(rows) > limit
    if not more or not items:
        return Page(items, None)
    return Page(items, encode_cursor("suppressions", [items[-1]["email"]]))


async def show_suppression(conn: AsyncConnection, email: str) -> dict[str, Any]:
    """One suppression; ``NotFound`` when the address is not suppressed."""
    row = await suppressions_repo.get_suppression(conn, normalize_email(email))
    if row is None:
        raise NotFound(f"{email!r} is not suppressed")
    return row


async def suppress_by_hand(
    conn: AsyncConnection, email: str, *, source: str, detail: str | None, now: datetime
) -> dict[str, Any]:
    """An operator suppresses an address (kept as it is when already suppressed)."""
    normalized = normalize_email(email)
    entry = Suppression(normalized, SuppressionReason.MANUAL, source=source, detail=detail)
    await suppressions_repo.add_suppression(conn, entry, now=now)
    return await show_suppression(conn, normalized)


async def lift_suppression(conn: AsyncConnection, email: str, *, force: bool) -> dict[str, Any]:
    """Take an address off the list; a complaint only with ``force``. Returns what was lifted."""
    row = await show_suppression(conn, email)
    if not may_lift(SuppressionReason(row["reason"]), force=force):
        raise Conflict(
            f"{row['email']!r} complained (marked a message as spam): lifting it needs force=true"
        )
    if not await suppressions_repo.remove_suppression(conn, row["email"], reason=row["reason"]):
        raise Conflict(f"{row['email']!r} changed meanwhile: look again and retry")
    return row
