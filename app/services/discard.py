"""Discard: close quarantined dead letters that can never be redriven.

A quarantined letter (a malformed message, or one for a reminder that does not exist)
has no send record; unless the reminder appears later, no redrive can ever publish it,
and it would count in the dead-letter gauge forever. Discarding stamps ``discarded_at``:
the letter leaves the open set, the gauge and redrive, and stays readable until
retention deletes it. The caller owns the transaction.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy.ext.asyncio import AsyncConnection

from app.db import dead_letters_repo
from app.domain.redrive import discard_blocker

from .redrive import candidates_for_dead_letters

MAX_DISCARD_BATCH = 500


@dataclass(frozen=True, slots=True)
class DiscardItem:
    """What happened to one requested dead letter."""

    dead_letter_id: int
    discarded: bool
    reason: str

    def to_json(self) -> dict[str, Any]:
        """The item as the CLI and the admin page show it."""
        return {
            "dead_letter_id": self.dead_letter_id,
            "discarded": self.discarded,
            "reason": self.reason,
        }


async def discard_dead_letters(
    conn: AsyncConnection, dead_letter_ids: Sequence[int], *, now: datetime
) -> list[DiscardItem]:
    """Discard each of these dead letters that may be; say why for the others."""
    wanted = list(dict.fromkeys(dead_letter_ids))[:MAX_DISCARD_BATCH]
    found = await dead_letters_repo.get_dead_letters(conn, wanted)
    blockers = {
        candidate.dead_letter_id: discard_blocker(candidate, now=now)
        for candidate in await candidates_for_dead_letters(conn, found)
    }
    allowed = [ident for ident, blocker in blockers.items() if blocker is None and ident]
    done = await dead_letters_repo.discard_quarantined(conn, allowed, now=now)
    return [
        _item(ident, ident in done, blockers.get(ident, "no such dead letter")) for ident in wanted
    ]


def _item(ident: int, discarded: bool, blocker: str | None) -> DiscardItem:
    if discarded:
        return DiscardItem(ident, True, "discarded")
    # Allowed when read but not stamped: someone redrove or discarded it meanwhile.
    return DiscardItem(ident, False, blocker or "changed meanwhile; look again")


async def discardable_ids(
    conn: AsyncConnection, rows: Sequence[dict[str, Any]], *, now: datetime
) -> set[int]:
    """Which of these listed dead letters a discard would close (the page offers it there)."""
    candidates = await candidates_for_dead_letters(conn, rows)
    return {
        c.dead_letter_id
        for c in candidates
        if c.dead_letter_id is not None and discard_blocker(c, now=now) is None
    }
