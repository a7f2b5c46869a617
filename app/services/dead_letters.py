"""The dead-letter console: list, show and redrive failed sends (API, CLI and admin page).

Listing and inspection live here; redrives in ``app.services.redrive``, whose public
names are importable from this module too.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy.ext.asyncio import AsyncConnection

from app.db import dead_letters_repo, operations_repo, reminders_repo
from app.domain.errors import InvalidInput, NotFound
from app.domain.redrive import DeadLetterFilter, SendFilter, plan_redrive

from .redrive import (
    MAX_REDRIVE_BATCH,
    RedriveContext,
    RedriveItem,
    RedriveReport,
    candidates_for_dead_letters,
    queue_of,
    redrive_dead_letter,
    redrive_dead_letters,
    redrive_send,
)

__all__ = [
    "MAX_PAGE",
    "MAX_REDRIVE_BATCH",
    "MAX_ROW_ID",
    "Page",
    "RedriveContext",
    "RedriveItem",
    "RedriveReport",
    "list_dead_letters",
    "list_sends",
    "parse_cursor",
    "parse_row_id",
    "redrive_dead_letter",
    "redrive_dead_letters",
    "redrive_send",
    "show_dead_letter",
    "summarize",
]

MAX_PAGE = 500
# send_records.id and dead_letters.id are 64-bit integers (migration 0007_ids64).
MAX_ROW_ID = 2**63 - 1


@dataclass(frozen=True, slots=True)
class Page:
    """One page of a keyset-paginated listing."""

    items: list[dict[str, Any]]
    next_cursor: str | None


def parse_row_id(text: str) -> int | None:
    """A row id written in ASCII digits and within the id column's range, else None."""
    if not (text.isascii() and text.isdigit() and len(text) <= len(str(MAX_ROW_ID))):
        return None
    return int(text) if int(text) <= MAX_ROW_ID else None


def parse_cursor(cursor: str | None) -> int:
    """The id a cursor stands for (0 for the first page); InvalidInput when garbled."""
    if not cursor:
        return 0
    row_id = parse_row_id(cursor)
    if row_id is None:
        raise InvalidInput("cursor", "is not a cursor returned by this API")
    return row_id


def _page(rows: list[dict[str, Any]], limit: int) -> Page:
    more = len(rows) > limit
    items = rows[:limit]
    return Page(items, str(items[-1]["id"]) if more and items else None)


def _with_age(row: dict[str, Any], now: datetime) -> dict[str, Any]:
    created = row.get("created_at")
    return {**row, "age_seconds": (now - created).total_seconds() if created else None}


async def list_dead_letters(
    conn: AsyncConnection,
    filters: DeadLetterFilter,
    *,
    now: datetime,
    cursor: str | None = None,
    limit: int = 50,
) -> Page:
    """Dead letters matching the filters, oldest first, with their send record's state."""
    limit = max(1, min(limit, MAX_PAGE))
    rows = await dead_letters_repo.list_dead_letters(
        conn, filters, now=now, after_id=parse_cursor(cursor), limit=limit + 1
    )
    return _page([_with_age(row, now) for row in rows], limit)


async def list_sends(
    conn: AsyncConnection,
    filters: SendFilter,
    *,
    now: datetime,
    cursor: str | None = None,
    limit: int = 50,
) -> Page:
    """Send records matching the filters (e.g. stuck past their lease, terminal failures)."""
    limit = max(1, min(limit, MAX_PAGE))
    rows = await operations_repo.list_sends(
        conn, filters, now=now, after_id=parse_cursor(cursor), limit=limit + 1
    )
    return _page(rows, limit)


async def summarize(conn: AsyncConnection, *, now: datetime) -> list[dict[str, Any]]:
    """Open dead letters grouped by reason and error class, with the oldest one's age."""
    groups = await dead_letters_repo.summarize_open(conn)
    for group in groups:
        oldest = group["oldest_at"]
        group["oldest_age_seconds"] = (now - oldest).total_seconds() if oldest else None
    return groups


async def show_dead_letter(
    conn: AsyncConnection,
    dead_letter_id: int,
    *,
    now: datetime,
    queue_for: Callable[[str], str],
) -> dict[str, Any]:
    """A dead letter, its send record with the ledger history, and what a redrive would do."""
    row = await dead_letters_repo.get_dead_letter(conn, dead_letter_id)
    if row is None:
        raise NotFound(f"no dead letter {dead_letter_id}")
    send_id = row["send_record_id"]
    send = await operations_repo.get_send(conn, send_id) if send_id is not None else None
    history = await dead_letters_repo.dead_letters_of_send(conn, send_id) if send_id else [row]
    reminder = (
        await reminders_repo.get_reminder(conn, row["reminder_id"]) if row["reminder_id"] else None
    )
    [candidate] = await candidates_for_dead_letters(conn, [row])
    plan = plan_redrive(candidate, now=now)
    return {
        "dead_letter": _with_age(row, now),
        "send_record": send,
        "reminder": reminder,
        "history": history,
        "redrive": RedriveItem(plan, queue_of(plan, queue_for)).to_json(),
    }
