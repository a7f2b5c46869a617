"""SQL for the dead-letter set. Nothing here commits."""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime
from typing import Any

from sqlalchemy import and_, func, or_, select, update
from sqlalchemy.ext.asyncio import AsyncConnection

from app.domain.redrive import DeadLetterFilter

from .dialects import insert_for
from .operations_repo import as_utc
from .tables import dead_letters, send_records


async def add_dead_letter(
    conn: AsyncConnection,
    *,
    now: datetime,
    queue: str,
    reason: str,
    message_id: str | None = None,
    payload: Any = None,
    send_record_id: int | None = None,
    reminder_id: str | None = None,
    channel: str | None = None,
    error_class: str | None = None,
    error: str | None = None,
    attempts: int = 0,
    first_failed_at: datetime | None = None,
) -> None:
    """Record one message operators must look at (once per queue message id)."""
    await conn.execute(
        insert_for(conn, dead_letters)
        .values(
            send_record_id=send_record_id,
            queue=_fit(queue, 200),
            message_id=_fit(message_id, 255),
            reminder_id=_fit(reminder_id, 200),
            channel=_fit(channel, 32),
            payload=payload,
            reason=_fit(reason, 32),
            error_class=_fit(error_class, 64),
            error=_fit(error, None),
            attempts=attempts,
            first_failed_at=first_failed_at or now,
            last_failed_at=now,
            created_at=now,
        )
        .on_conflict_do_nothing(index_elements=[dead_letters.c.queue, dead_letters.c.message_id])
    )


def _fit(value: str | None, length: int | None) -> str | None:
    # Dead letters hold hostile input too: PostgreSQL text refuses NUL and varchar(n)
    # refuses longer values, and a failed insert would turn an ack into a 500.
    if value is None:
        return None
    cleaned = value.replace("\x00", "\ufffd")
    return cleaned if length is None else cleaned[:length]


# --- Operator reads and redrive bookkeeping (the dead-letter console). ---

# Open: neither redriven nor discarded (what the gauge counts and operators must look at).
_OPEN = and_(dead_letters.c.redriven_at.is_(None), dead_letters.c.discarded_at.is_(None))
_LIST_COLUMNS = (
    *dead_letters.c,
    send_records.c.state.label("send_state"),
    send_records.c.redrive_count.label("send_redrive_count"),
)


def _filter_clauses(filters: DeadLetterFilter, now: datetime) -> list[Any]:
    dl = dead_letters
    clauses: list[Any] = []
    for column, value in (
        (dl.c.queue, filters.queue),
        (dl.c.channel, filters.channel),
        (dl.c.error_class, filters.error_class),
        (dl.c.reason, filters.reason),
        (dl.c.reminder_id, filters.reminder_id),
    ):
        if value is not None:
            clauses.append(column == value)
    if filters.older_than is not None:
        clauses.append(dl.c.created_at <= now - filters.older_than)
    if filters.newer_than is not None:
        clauses.append(dl.c.created_at >= now - filters.newer_than)
    if filters.discarded:
        clauses.append(dl.c.discarded_at.is_not(None))
    elif filters.redriven is not None:
        clauses.append(dl.c.redriven_at.is_not(None) if filters.redriven else _OPEN)
    return clauses


async def list_dead_letters(
    conn: AsyncConnection,
    filters: DeadLetterFilter,
    *,
    now: datetime,
    after_id: int = 0,
    limit: int = 50,
) -> list[dict[str, Any]]:
    """Dead letters matching the filters, oldest first, after a cursor id (with send state)."""
    stmt = (
        select(*_LIST_COLUMNS)
        .select_from(
            dead_letters.outerjoin(send_records, send_records.c.id == dead_letters.c.send_record_id)
        )
        .where(dead_letters.c.id > after_id, *_filter_clauses(filters, now))
        .order_by(dead_letters.c.id)
        .limit(limit)
    )
    return [dict(row._mapping) for row in await conn.execute(stmt)]


async def get_dead_letter(conn: AsyncConnection, dead_letter_id: int) -> dict[str, Any] | None:
    """One dead letter with its send record's current state, or None."""
    stmt = (
        select(*_LIST_COLUMNS)
        .select_from(
            dead_letters.outerjoin(send_records, send_records.c.id == dead_letters.c.send_record_id)
        )
        .where(dead_letters.c.id == dead_letter_id)
    )
    row = (await conn.execute(stmt)).first()
    return dict(row._mapping) if row else None


async def get_dead_letters(conn: AsyncConnection, ids: Iterable[int]) -> list[dict[str, Any]]:
    """The dead letters with these ids that exist, by id, each with its send record's state."""
    wanted = sorted(set(ids))
    if not wanted:
        return []
    stmt = (
        select(*_LIST_COLUMNS)
        .select_from(
            dead_letters.outerjoin(send_records, send_records.c.id == dead_letters.c.send_record_id)
        )
        .where(dead_letters.c.id.in_(wanted))
        .order_by(dead_letters.c.id)
    )
    return [dict(row._mapping) for row in await conn.execute(stmt)]


async def dead_letters_of_send(conn: AsyncConnection, send_record_id: int) -> list[dict[str, Any]]:
    """Every dead letter one send record produced, oldest first (its redrive history)."""
    stmt = (
        select(dead_letters)
        .where(dead_letters.c.send_record_id == send_record_id)
        .order_by(dead_letters.c.id)
    )
    return [dict(row._mapping) for row in await conn.execute(stmt)]


async def mark_redriven(
    conn: AsyncConnection,
    *,
    now: datetime,
    send_record_ids: Iterable[int],
    dead_letter_ids: Iterable[int],
) -> None:
    """Stamp ``redriven_at`` on the open dead letters of these send records, and on these."""
    target = _of(send_record_ids, dead_letter_ids)
    if target is not None:
        await conn.execute(update(dead_letters).where(target, _OPEN).values(redriven_at=now))


async def unmark_redriven(
    conn: AsyncConnection,
    *,
    redriven_at: datetime,
    send_record_ids: Iterable[int],
    dead_letter_ids: Iterable[int],
) -> None:
    """Reopen the dead letters a redrive stamped when its message could not be published."""
    target = _of(send_record_ids, dead_letter_ids)
    if target is not None:
        stamped = dead_letters.c.redriven_at == redriven_at
        await conn.execute(update(dead_letters).where(target, stamped).values(redriven_at=None))


def _of(send_record_ids: Iterable[int], dead_letter_ids: Iterable[int]) -> Any:
    """Dead letters of these send records or with these ids; None when both are empty."""
    sends, letters = sorted(set(send_record_ids)), sorted(set(dead_letter_ids))
    targets = []
    if sends:
        targets.append(dead_letters.c.send_record_id.in_(sends))
    if letters:
        targets.append(dead_letters.c.id.in_(letters))
    return or_(*targets) if targets else None


async def discard_quarantined(
    conn: AsyncConnection, dead_letter_ids: Iterable[int], *, now: datetime
) -> set[int]:
    """Stamp ``discarded_at`` on those of these letters still open and quarantined; their ids.

    The conditions are repeated in the statement so a letter redriven since it was read
    stays as it is.
    """
    wanted = sorted(set(dead_letter_ids))
    if not wanted:
        return set()
    stmt = (
        update(dead_letters)
        .where(dead_letters.c.id.in_(wanted), dead_letters.c.send_record_id.is_(None), _OPEN)
        .values(discarded_at=now)
        .returning(dead_letters.c.id)
    )
    return set((await conn.execute(stmt)).scalars())


async def summarize_open(conn: AsyncConnection) -> list[dict[str, Any]]:
    """Open dead letters grouped by reason and error class: count and oldest creation."""
    dl = dead_letters
    stmt = (
        select(
            dl.c.reason,
            dl.c.error_class,
            func.count().label("count"),
            func.min(dl.c.created_at).label("oldest_at"),
        )
        .where(_OPEN)
        .group_by(dl.c.reason, dl.c.error_class)
        .order_by(func.min(dl.c.created_at))
    )
    rows = await conn.execute(stmt)
    return [{**row._mapping, "oldest_at": as_utc(row.oldest_at)} for row in rows]
