"""The attempts of sends (``send_attempts``): append-only, one row per claim.

How to use it (the receiver does, through the ledger gateway; the audit and the admin page
read it):

- ``record_attempt`` right after a claim succeeded: who claimed, when, the lease, and
  whether the provider deduplicates repeats (takes an idempotency key). One row per
  (send record, attempt number); a second call for the same attempt changes nothing.
- ``record_outcome`` once the attempt ended: in the finalize's own transaction (the
  PostgreSQL gateway writes it in the finalize's statement), or on its own when no finalize
  ran (the claim given back before the provider call, a lease lost): whether the provider
  was called, the outcome (``sent``, a failure's error class such as ``unknown_outcome``,
  ``stale``, ``lease_expired``, ...). Written once: a row that has an outcome keeps it.
- ``list_attempts`` / ``list_attempts_of_reminder``: a send's history, oldest first.
- ``calls_maybe_accepted_twice``, ``accepted_by_two_providers`` and
  ``reclaims_without_outcome``: the audit's checks of the attempts.
- ``attempt_result``: what an attempt came to, as the admin page's outcome history counts it
  (``activity_repo``, ``operations_repo``): these rows are never rewritten, so a redrive
  that later delivers a send leaves the failures it fixed where they happened.

Nothing here commits: the caller owns the transaction. Rows go with their send record
(``ON DELETE CASCADE``: retention deletes both).
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any

from sqlalchemy import ColumnElement, and_, bindparam, case, exists, func, literal, select, update
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.ext.asyncio import AsyncConnection

from app.domain.ledger import AttemptEnd, Claimant, LedgerKey, SendRecordView

from .tables import send_attempts

sa_ = send_attempts

# Outcomes after which the provider may hold the message: it accepted, or the answer was
# lost after the request left (``unknown_outcome``).
MAYBE_ACCEPTED = ("sent", "unknown_outcome")
FAILED, IN_FLIGHT = "failed", "in_flight"


def attempt_result(attempts: Any = sa_) -> ColumnElement[str]:
    """What an attempt came to: ``failed`` when the provider refused or failed (its error
    class is the detail), ``in_flight`` while it runs or when it never ended, else its
    outcome (``sent``, ``suppressed``, ``cancelled``, ``expired``, ``stale``, ...)."""
    return case(
        (attempts.c.error_class.is_not(None), literal(FAILED)),
        (attempts.c.outcome.is_(None), literal(IN_FLIGHT)),
        else_=attempts.c.outcome,
    )


async def record_attempt(
    conn: AsyncConnection,
    record: SendRecordView,
    key: LedgerKey,
    *,
    claimed_by: str,
    claimed_at: datetime,
    provider_deduplicates: bool,
) -> None:
    """Append the row of the attempt a claim just took (``record.attempt_count``)."""
    await conn.execute(
        _RECORD_ATTEMPT[conn.dialect.name],
        _attempt_values(record, key, claimed_by, claimed_at, provider_deduplicates),
    )


async def record_attempts(
    conn: AsyncConnection, claims: Sequence[tuple[SendRecordView, LedgerKey, Claimant, datetime]]
) -> None:
    """``record_attempt`` for each (claimed row, key, claimant, instant), as one executemany."""
    if claims:
        await conn.execute(
            _RECORD_ATTEMPT[conn.dialect.name],
            [
                _attempt_values(record, key, claimant.worker, now, claimant.provider_deduplicates)
                for record, key, claimant, now in claims
            ],
        )


def _attempt_values(
    record: SendRecordView,
    key: LedgerKey,
    claimed_by: str,
    claimed_at: datetime,
    provider_deduplicates: bool,
) -> dict[str, Any]:
    return {
        "b_record_id": record.id, "b_reminder_id": key.reminder_id, "b_channel": key.channel,
        "b_provider": key.provider, "b_attempt": record.attempt_count,
        "b_claimed_by": claimed_by, "b_claimed_at": claimed_at,
        "b_lease_until": record.lease_until, "b_deduplicates": provider_deduplicates,
    }  # fmt: skip


async def record_outcome(
    conn: AsyncConnection, record: SendRecordView, ended: AttemptEnd, *, finished_at: datetime
) -> bool:
    """Write how the attempt ended, once; False when it had no row or already an outcome."""
    result = await conn.execute(_RECORD_OUTCOME, _outcome_values(record, ended, finished_at))
    return result.rowcount == 1


async def record_outcomes(
    conn: AsyncConnection, ends: Sequence[tuple[SendRecordView, AttemptEnd, datetime]]
) -> None:
    """``record_outcome`` for each (row, how its attempt ended, instant), as one executemany."""
    if ends:
        await conn.execute(
            _RECORD_OUTCOME, [_outcome_values(record, ended, now) for record, ended, now in ends]
        )


def _outcome_values(
    record: SendRecordView, ended: AttemptEnd, finished_at: datetime
) -> dict[str, Any]:
    outcome, provider_called, error_class = ended.columns()
    return {
        "b_record_id": record.id, "b_attempt": record.attempt_count, "b_ended": outcome,
        "b_called": provider_called, "b_error": error_class, "b_finished": finished_at,
    }  # fmt: skip


# Both built once, their values bound (a statement built with its values costs SQLAlchemy a
# cache key of each value on every call: these run for every send).
_ATTEMPT_ROW: dict[str, Any] = {
    "send_record_id": bindparam("b_record_id"), "reminder_id": bindparam("b_reminder_id"),
    "channel": bindparam("b_channel"), "provider": bindparam("b_provider"),
    "attempt": bindparam("b_attempt"), "claimed_by": bindparam("b_claimed_by"),
    "claimed_at": bindparam("b_claimed_at"), "lease_until": bindparam("b_lease_until"),
    "provider_deduplicates": bindparam("b_deduplicates"),
}  # fmt: skip
_RECORD_ATTEMPT = {
    name: dialect.insert(sa_)
    .values(_ATTEMPT_ROW)
    .on_conflict_do_nothing(index_elements=[sa_.c.send_record_id, sa_.c.attempt])
    for name, dialect in (("postgresql", postgresql), ("sqlite", sqlite))
}
_RECORD_OUTCOME = (
    update(sa_)
    .where(
        sa_.c.send_record_id == bindparam("b_record_id"),
        sa_.c.attempt == bindparam("b_attempt"),
        sa_.c.outcome.is_(None),
    )
    .values(
        outcome=bindparam("b_ended"), provider_called=bindparam("b_called"),
        error_class=bindparam("b_error"), finished_at=bindparam("b_finished"),
    )
)  # fmt: skip


async def count_outcomes(conn: AsyncConnection, send_record_id: int, outcome: str) -> int:
    """How many attempts of a send ended with ``outcome`` (e.g. ``unknown_outcome``)."""
    statement = select(func.count()).where(
        sa_.c.send_record_id == send_record_id, sa_.c.outcome == outcome
    )
    return int((await conn.execute(statement)).scalar_one())


async def list_attempts(conn: AsyncConnection, send_record_id: int) -> list[dict[str, Any]]:
    """Every attempt of one send record, oldest first."""
    statement = select(sa_).where(sa_.c.send_record_id == send_record_id).order_by(sa_.c.attempt)
    return [dict(row._mapping) for row in await conn.execute(statement)]


async def list_attempts_of_reminder(
    conn: AsyncConnection, reminder_id: str
) -> list[dict[str, Any]]:
    """Every attempt of every send of a reminder, by channel then attempt."""
    statement = (
        select(sa_)
        .where(sa_.c.reminder_id == reminder_id)
        .order_by(sa_.c.channel, sa_.c.provider, sa_.c.attempt)
    )
    return [dict(row._mapping) for row in await conn.execute(statement)]


async def calls_maybe_accepted_twice(
    conn: AsyncConnection, *, since: datetime, limit: int
) -> list[str]:
    """(reminder, channel, provider) whose provider, with no idempotency key of its own, was
    called by two or more attempts that may each have been accepted (``MAYBE_ACCEPTED``),
    among attempts claimed since ``since``: a message the customer may have got twice."""
    maybe = and_(
        sa_.c.provider_called.is_(True),
        sa_.c.outcome.in_(MAYBE_ACCEPTED),
        sa_.c.provider_deduplicates.is_(False),
        sa_.c.claimed_at >= since,
    )
    statement = (
        select(sa_.c.reminder_id, sa_.c.channel, sa_.c.provider)
        .where(maybe)
        .group_by(sa_.c.send_record_id, sa_.c.reminder_id, sa_.c.channel, sa_.c.provider)
        .having(func.count() > 1)
        .limit(limit)
    )
    return [":".join(row) for row in await conn.execute(statement)]


async def accepted_by_two_providers(
    conn: AsyncConnection, *, since: datetime, limit: int
) -> list[str]:
    """(reminder, channel) pairs where two providers each had an attempt that may have been
    accepted (``MAYBE_ACCEPTED``), among attempts claimed since ``since``: failover moved
    a send the first provider may have taken (the customer may have it twice)."""
    maybe = and_(
        sa_.c.provider_called.is_(True),
        sa_.c.outcome.in_(MAYBE_ACCEPTED),
        sa_.c.claimed_at >= since,
    )
    statement = (
        select(sa_.c.reminder_id, sa_.c.channel)
        .where(maybe)
        .group_by(sa_.c.reminder_id, sa_.c.channel)
        .having(func.count(sa_.c.provider.distinct()) > 1)
        .limit(limit)
    )
    return [":".join(row) for row in await conn.execute(statement)]


async def reclaims_without_outcome(
    conn: AsyncConnection, *, since: datetime, limit: int
) -> list[str]:
    """Attempts claimed since ``since`` that took over a send whose previous attempt never
    recorded an outcome (its worker stalled or died; it may have called the provider)."""
    earlier = sa_.alias("earlier")
    unended = exists().where(
        earlier.c.send_record_id == sa_.c.send_record_id,
        earlier.c.attempt < sa_.c.attempt,
        earlier.c.outcome.is_(None),
    )
    statement = (
        select(sa_.c.reminder_id, sa_.c.channel, sa_.c.provider, sa_.c.attempt)
        .where(sa_.c.claimed_at >= since, unended)
        .limit(limit)
    )
    return [":".join(str(part) for part in row) for row in await conn.execute(statement)]
