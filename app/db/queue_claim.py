"""The embedded queue's claim: due messages in (``visible_at``, id) order, hidden for the
visibility timeout, from the start of that order or from a position in it."""

from __future__ import annotations

import functools
from collections.abc import Awaitable, Callable, Sequence
from datetime import datetime
from typing import Any, Protocol

from sqlalchemy import CTE, Update, bindparam, select, text, tuple_, update
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from . import queue_repo
from .queue_repo import NOW, READY, ClaimedMessage, ClaimPosition, qm
from .types import UTCDateTime

_CLAIMABLE = (
    qm.c.state == READY,
    qm.c.visible_at <= NOW,
    qm.c.attempts <= qm.c.max_retries,
    qm.c.expires_at > NOW,
)


def _due(*, after: bool) -> CTE:
    query = select(qm.c.id, qm.c.visible_at.label("was_visible_at")).where(*_CLAIMABLE)
    if after:  # from a position on: the index is entered there, not at its start
        query = query.where(
            tuple_(qm.c.visible_at, qm.c.id)
            > tuple_(bindparam("after_at", type_=UTCDateTime()), bindparam("after_id"))
        )
    return (
        query.order_by(qm.c.visible_at, qm.c.id)
        .limit(bindparam("limit"))
        # PostgreSQL: concurrent dispatchers skip each other's rows instead of waiting.
        # SQLite ignores this; its single writer serializes the claim instead.
        .with_for_update(skip_locked=True)
        # A CTE, run once: as an ``IN (subquery)`` PostgreSQL may rescan the locking
        # subquery per outer row and claim more than ``limit`` rows.
        .cte("due")
        .prefix_with("MATERIALIZED", dialect="postgresql")
    )


@functools.cache
def claim_statement(*, after: bool, positioned: bool) -> Update:
    """The claim: from the order's start, or ``after`` a position (``after_at``,
    ``after_id``); ``positioned`` returns where each message stood (not on SQLite)."""
    due = _due(after=after)
    # SQLite's RETURNING may not name the FROM clause's tables: positions are PostgreSQL's.
    position = [due.c.was_visible_at] if positioned else []
    return (
        update(qm)
        .where(qm.c.id == due.c.id)
        .values(
            visible_at=bindparam("visible_until", type_=UTCDateTime()),
            attempts=qm.c.attempts + 1,
        )
        .returning(
            qm.c.id, qm.c.queue, qm.c.message_id, qm.c.payload, qm.c.attempts,
            qm.c.max_retries, *position,
        )
    )  # fmt: skip


# The planner estimates ``(visible_at, id) > (t, n)`` from ``visible_at > t`` alone: next to
# none, where a sweep's batch shares one ``visible_at``. It then read every waiting message
# through a bitmap and sorted them (38 ms per claim at 100,000); a generic plan, made while
# the queue was nearly empty, did the same for every claim (15 ms). The index holds the
# order: a claim's transaction plans without bitmaps or sorts.
INDEX_ORDER_ONLY = (
    "SELECT set_config('enable_bitmapscan', 'off', true), set_config('enable_sort', 'off', true)"
)
_INDEX_ORDER_ONLY = text(INDEX_ORDER_ONLY)

# One claim of up to ``limit`` messages, from ``after`` on when given (``claim_with_top_up``).
ClaimOnce = Callable[[int, ClaimPosition | None], Awaitable[list[ClaimedMessage]]]


async def claim_with_top_up(
    claim_once: ClaimOnce, *, limit: int, after: ClaimPosition | None
) -> list[ClaimedMessage]:
    """Up to ``limit`` messages from ``after`` on, topped up from the order's start when
    those are fewer (a message may lie before the position: ``Dispatcher.claim``)."""
    claimed = await claim_once(limit, after)
    if after is not None and len(claimed) < limit:
        claimed += await claim_once(limit - len(claimed), None)
    return claimed


async def claim_messages(
    conn: AsyncConnection,
    *,
    now: datetime,
    visible_until: datetime,
    limit: int,
    after: ClaimPosition | None = None,
) -> list[ClaimedMessage]:
    """Claim up to ``limit`` due messages, hiding them until ``visible_until``; only those
    past ``after`` when given. On PostgreSQL each claimed message carries its position."""
    positioned = conn.dialect.name == "postgresql"
    params: dict[str, Any] = {"now": now, "visible_until": visible_until, "limit": limit}
    if after is not None:
        params |= {"after_at": after.visible_at, "after_id": after.id}
    if after is not None and positioned:
        await conn.execute(_INDEX_ORDER_ONLY)
    rows = await conn.execute(
        claim_statement(after=after is not None, positioned=positioned), params
    )
    return claimed_in_order(rows.all(), positioned=positioned)


def claimed_in_order(
    rows: Sequence[Any], *, positioned: bool, payload: Callable[[Any], Any] = lambda value: value
) -> list[ClaimedMessage]:
    """The rows a claim returned as messages in id order; ``payload`` decodes the column
    where the driver hands it over as text (asyncpg)."""
    claimed = [
        ClaimedMessage(
            r[0], r[1], r[2], payload(r[3]), r[4], r[5],
            ClaimPosition(r[6], r[0]) if positioned else None,
        )
        for r in rows
    ]  # fmt: skip
    return sorted(claimed, key=lambda message: message.id)


class RoundStatements(Protocol):
    """A dispatcher round's claim (with its top-up) and the delete of a round whose every
    message was acknowledged: on the engine (``EngineRoundStatements``), or on PostgreSQL's
    raw pool where ``serve`` has one (``queue_pg``)."""

    async def claim(
        self, *, now: datetime, visible_until: datetime, limit: int, after: ClaimPosition | None
    ) -> list[ClaimedMessage]: ...

    async def delete(self, ids: Sequence[int]) -> None: ...


class EngineRoundStatements:
    """A round's two statements as transactions on the engine: any database."""

    def __init__(self, engine: AsyncEngine) -> None:
        self._engine = engine

    async def claim(
        self, *, now: datetime, visible_until: datetime, limit: int, after: ClaimPosition | None
    ) -> list[ClaimedMessage]:
        """``claim_messages`` with its top-up, in one transaction."""
        async with self._engine.begin() as conn:

            async def once(size: int, position: ClaimPosition | None) -> list[ClaimedMessage]:
                return await claim_messages(
                    conn, now=now, visible_until=visible_until, limit=size, after=position
                )

            return await claim_with_top_up(once, limit=limit, after=after)

    async def delete(self, ids: Sequence[int]) -> None:
        """``queue_repo.delete_messages`` in a transaction of its own."""
        if ids:
            async with self._engine.begin() as conn:
                await queue_repo.delete_messages(conn, ids)
