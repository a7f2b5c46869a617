"""Lists of reminders and schedules: filters, a stable order and opaque keyset cursors.

A cursor is the sort key of the last row a page showed, wrapped so clients treat it as
opaque: the next page starts strictly after it. Rows that existed when a client began
paging are each seen once, whatever is inserted meanwhile (an offset would shift).
A cursor that is not one of ours, or belongs to the other list, is ``InvalidInput``.
"""

from __future__ import annotations

import base64
import binascii
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import orjson
from sqlalchemy.ext.asyncio import AsyncConnection

from app.db import reminders_repo, schedules_repo
from app.domain.errors import InvalidInput

DEFAULT_LIMIT = 50
MAX_LIMIT = 500
MAX_CURSOR_LENGTH = 600  # two ids of 200 characters and an instant, encoded, fit easily
_MAX_ID_LENGTH = 200


@dataclass(frozen=True, slots=True)
class Page:
    """One page of a list, and the cursor of the next one (None on the last page)."""

    items: list[dict[str, Any]]
    next_cursor: str | None


@dataclass(frozen=True, slots=True)
class ReminderFilters:
    """What ``GET /v1/reminders`` narrows by; None means any."""

    customer_id: str | None = None
    state: str | None = None
    kind: str | None = None
    schedule_id: str | None = None
    due_after: datetime | None = None  # inclusive
    due_before: datetime | None = None  # exclusive
    delivery: str | None = None  # a done reminder's DeliverySummary

    def equal(self) -> dict[str, str]:
        """The filters that are plain column equalities, by column."""
        named = {
            "customer_id": self.customer_id,
            "state": self.state,
            "kind": self.kind,
            "schedule_id": self.schedule_id,
            "delivery": self.delivery,
        }
        return {name: value for name, value in named.items() if value is not None}


def encode_cursor(kind: str, key: list[str]) -> str:
    """An opaque cursor for a list (``kind``) holding a row's sort key."""
    return base64.urlsafe_b64encode(orjson.dumps([kind, *key])).decode().rstrip("=")


def decode_cursor(kind: str, cursor: str, size: int) -> list[str]:
    """The sort key of a cursor of list ``kind`` with ``size`` parts, or InvalidInput."""
    try:
        raw = base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4))
        parts = orjson.loads(raw)
    except (binascii.Error, ValueError, orjson.JSONDecodeError):
        parts = None
    if (
        not isinstance(parts, list)
        or len(parts) != size + 1
        or parts[0] != kind
        or not all(_plain_text(part) for part in parts[1:])
    ):
        raise InvalidInput("cursor", "not a cursor of this list: pass next_cursor unchanged")
    return parts[1:]


def _plain_text(part: Any) -> bool:
    return isinstance(part, str) and 0 < len(part) <= _MAX_ID_LENGTH and "\x00" not in part


def _reminder_key(cursor: str) -> tuple[datetime, str]:
    due_text, reminder_id = decode_cursor("reminders", cursor, 2)
    try:
        due_at = datetime.fromisoformat(due_text)
    except ValueError:
        due_at = None
    if due_at is None or due_at.tzinfo is None:
        raise InvalidInput("cursor", "not a cursor of this list: pass next_cursor unchanged")
    return due_at, reminder_id


async def list_reminders(
    conn: AsyncConnection, filters: ReminderFilters, *, cursor: str | None, limit: int
) -> Page:
    """A page of reminders in (due_at, id) order, without their send records."""
    rows = await reminders_repo.list_reminders(
        conn,
        equal=filters.equal(),
        due_after=filters.due_after,
        due_before=filters.due_before,
        after=_reminder_key(cursor) if cursor is not None else None,
        limit=limit + 1,  # one more tells whether a next page exists
    )
    items, more = rows[:limit], len(rows) > limit
    last = items[-1] if items else None
    if not more or last is None:
        return Page(items, None)
    return Page(items, encode_cursor("reminders", [last["due_at"].isoformat(), last["id"]]))


async def list_schedules(
    conn: AsyncConnection, *, customer_id: str | None, cursor: str | None, limit: int
) -> Page:
    """A page of schedules (not deleted) in id order."""
    after = decode_cursor("schedules", cursor, 1)[0] if cursor is not None else None
    rows = await schedules_repo.list_schedules(
        conn, customer_id=customer_id, after=after, limit=limit + 1
    )
    items, more = rows[:limit], len(rows) > limit
    if not more or not items:
        return Page(items, None)
    return Page(items, encode_cursor("schedules", [items[-1]["id"]]))
