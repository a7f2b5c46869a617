"""The audit's reads: each invariant of the ledger as one bounded, index-backed query.

Every query returns at most ``limit`` offending ids (examples, and a count capped at the
limit), and each walks an index on a bounded range: states that are rare in a healthy
database (``sending`` past its lease, open reminders past due, dead rows) or a recent
time window. Nothing here commits or writes, except ``settle_final_reminders``, the repair
of the reminders the two-channel race left ``enqueued``.
"""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import ColumnElement, and_, exists, func, literal, or_, select, update
from sqlalchemy.ext.asyncio import AsyncConnection

from app.domain.states import ReminderState, SendState

from . import ledger_rules as rules
from .queue_tables import queue_messages
from .tables import dead_letters, reminders, send_records
from .types import UTCDateTime

r, sr, dl = reminders, send_records, dead_letters


async def _ids(conn: AsyncConnection, statement: object, limit: int) -> list[str]:
    rows = await conn.execute(statement.limit(limit))  # type: ignore[attr-defined]
    return [":".join(str(part) for part in row) for row in rows]


async def sent_twice(conn: AsyncConnection, *, since: datetime, limit: int) -> list[str]:
    """(reminder, channel) pairs with two ``sent`` rows (two providers of one channel),
    among rows changed since ``since`` (``updated_at`` index, then the key index: the state
    is ``unindexed``, or SQLite read every sent row once per sent row, 1.2 s per audit at
    5,000 reminders on its one connection)."""
    other = sr.alias("other")
    twin = exists().where(
        other.c.reminder_id == sr.c.reminder_id,
        other.c.channel == sr.c.channel,
        other.c.id != sr.c.id,
        rules.unindexed(other.c.state) == SendState.SENT.value,
    )
    statement = select(sr.c.reminder_id, sr.c.channel).where(
        sr.c.updated_at >= since, rules.unindexed(sr.c.state) == SendState.SENT.value, twin
    )
    return await _ids(conn, statement.distinct(), limit)


async def leases_long_expired(conn: AsyncConnection, *, before: datetime, limit: int) -> list[str]:
    """Send records still ``sending`` whose lease ended before ``before`` ((state, lease) index)."""
    statement = select(sr.c.reminder_id, sr.c.channel, sr.c.provider).where(
        rules.stuck(sr, literal(before, UTCDateTime()))
    )
    return await _ids(conn, statement, limit)


def _channels_where(condition: ColumnElement[bool]) -> ColumnElement[int]:
    # How many of the reminder's channels have a row matching ``condition`` (key index).
    return (
        select(func.count(sr.c.channel.distinct()))
        .where(sr.c.reminder_id == r.c.id, condition)
        .scalar_subquery()
    )


_ALL_FINAL = rules.all_channels_final(
    func.json_array_length(r.c.channels),
    select(rules.final_channels(sr)).where(sr.c.reminder_id == r.c.id).scalar_subquery(),
)


_DELIVERY = select(rules.delivery_summary(sr)).where(sr.c.reminder_id == r.c.id).scalar_subquery()


def _final_but_open(now: datetime) -> ColumnElement[bool]:
    # Open reminders already due ((state, due_at) index) whose every channel is final.
    return and_(rules.reminder_is_open(r), r.c.due_at <= now, _ALL_FINAL)


async def final_but_open(conn: AsyncConnection, *, now: datetime, limit: int) -> list[str]:
    """Reminders whose every channel is final but which are not ``done``/``cancelled``."""
    return await _ids(conn, select(r.c.id).where(_final_but_open(now)), limit)


async def settle_final_reminders(
    conn: AsyncConnection, *, now: datetime, limit: int, at: datetime | None = None
) -> int:
    """Mark ``done`` (at ``at``, default ``now``) up to ``limit`` reminders due by ``now``
    whose every channel is final: rows the two-channel race or a process dying between a
    finalize and its settle left open; how many were."""
    ids = await final_but_open(conn, now=now, limit=limit)
    if not ids:
        return 0
    done_at = at or now
    result = await conn.execute(
        update(r)
        .where(r.c.id.in_(ids), rules.reminder_is_open(r), _ALL_FINAL)
        .values(
            state=ReminderState.DONE.value, delivery=_DELIVERY, done_at=done_at, updated_at=done_at
        )
    )
    return int(result.rowcount)


async def overdue_without_message(
    conn: AsyncConnection, *, before: datetime, limit: int
) -> list[str]:
    """Open reminders due before ``before`` (due + grace) with a channel that is neither final
    nor still carried by a live message: never published (``scheduled``), no ledger row (the
    message never arrived), or ``pending`` with its retry long overdue."""
    live = or_(
        rules.is_final(sr),
        rules.is_state(sr, SendState.SENDING),
        and_(
            sr.c.state == SendState.PENDING.value,
            or_(sr.c.next_attempt_at.is_(None), sr.c.next_attempt_at >= before),
        ),
    )
    unsent = or_(
        rules.is_state(r, ReminderState.SCHEDULED),
        _channels_where(live) < func.json_array_length(r.c.channels),
    )
    statement = select(r.c.id).where(rules.reminder_is_open(r), r.c.due_at < before, unsent)
    return await _ids(conn, statement, limit)


async def dead_messages_unrecorded(conn: AsyncConnection, *, limit: int) -> list[str]:
    """Messages in the embedded queue's dead list whose send has no final ledger row and no
    dead letter: a reminder the queue gave up on without our ledger knowing."""
    reminder_id = queue_messages.c.payload["reminder_id"].as_string()
    channel = queue_messages.c.payload["channel"].as_string()
    recorded = or_(
        exists().where(
            sr.c.reminder_id == reminder_id, sr.c.channel == channel, rules.is_final(sr)
        ),
        exists().where(
            dl.c.queue == queue_messages.c.queue, dl.c.message_id == queue_messages.c.message_id
        ),
    )
    statement = select(queue_messages.c.queue, queue_messages.c.message_id).where(
        queue_messages.c.state == "dead", ~recorded
    )
    return await _ids(conn, statement, limit)


async def dead_letters_inconsistent(conn: AsyncConnection, *, limit: int) -> list[str]:
    """Open dead letters of a send record that is not ``dead``, and ``dead`` send records
    with no open dead letter (send_record_id index both ways)."""
    open_letter = dl.c.redriven_at.is_(None)
    letter_of_live_row = select(dl.c.id).where(
        open_letter,
        dl.c.send_record_id.is_not(None),
        exists().where(sr.c.id == dl.c.send_record_id, sr.c.state != SendState.DEAD.value),
    )
    row_without_letter = select(sr.c.reminder_id, sr.c.channel, sr.c.provider).where(
        sr.c.state == SendState.DEAD.value,
        ~exists().where(dl.c.send_record_id == sr.c.id, open_letter),
    )
    letters = [f"dead_letter:{i}" for i in await _ids(conn, letter_of_live_row, limit)]
    return letters + await _ids(conn, row_without_letter, limit - len(letters))
