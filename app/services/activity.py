"""The admin page's live views: outcomes per hour, recent sends, reminders found by search."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from sqlalchemy.ext.asyncio import AsyncConnection

from app.db import activity_repo

from .dead_letters import MAX_PAGE, Page, parse_cursor

MAX_FOUND = 50
# Longer than any id or email column: such a term cannot match, and PostgreSQL refuses NUL.
MAX_TERM = 400


@dataclass(frozen=True, slots=True)
class HourlyOutcomes:
    """Attempts per hour (of their claim) and result; ``starts`` oldest first."""

    starts: list[datetime]
    series: dict[str, list[int]]  # outcome -> one count per hour, aligned with ``starts``

    @property
    def total(self) -> int:
        """Every attempt counted."""
        return sum(sum(counts) for counts in self.series.values())


async def outcomes_per_hour(
    conn: AsyncConnection, *, now: datetime, hours: int = 24
) -> HourlyOutcomes:
    """The last ``hours`` whole hours up to and including the current one."""
    first = int(now.timestamp()) // 3600 - (hours - 1)
    starts = [datetime.fromtimestamp((first + i) * 3600, UTC) for i in range(hours)]
    series: dict[str, list[int]] = {}
    for hour, outcome, count in await activity_repo.outcomes_per_hour(conn, since=starts[0]):
        if 0 <= hour - first < hours:  # claimed "in the future" (clock skew): left out
            series.setdefault(outcome, [0] * hours)[hour - first] += count
    return HourlyOutcomes(starts, dict(sorted(series.items())))


async def recent_sends(conn: AsyncConnection, *, cursor: str | None, limit: int) -> Page:
    """Send records newest first; the cursor is the last id of the previous page."""
    limit = max(1, min(limit, MAX_PAGE))
    before = parse_cursor(cursor) or None
    rows = await activity_repo.sends_newest_first(conn, before_id=before, limit=limit + 1)
    items = rows[:limit]
    return Page(items, str(items[-1]["id"]) if len(rows) > limit else None)


def search_term(text: str | None) -> str | None:
    """The lookup text stripped, or None when it is empty or could match nothing."""
    term = (text or "").strip()
    return term if term and len(term) <= MAX_TERM and "\x00" not in term else None


async def find_reminders(conn: AsyncConnection, term: str) -> list[dict[str, Any]]:
    """Reminders by id, customer id or customer email (at most ``MAX_FOUND``)."""
    usable = search_term(term)
    if usable is None:
        return []
    return await activity_repo.find_reminders(conn, usable, limit=MAX_FOUND)


async def send_states(conn: AsyncConnection, ids: list[int]) -> dict[int, str]:
    """The current state of each of these send records."""
    return await activity_repo.send_states(conn, ids)
