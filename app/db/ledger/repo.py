"""SQLAlchemy Core statements for the send ledger (``send_records``) and the receiver's reads.

Any database. Nothing here commits: the caller (``core.CoreLedger``, a service) owns the
transaction.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from datetime import datetime
from typing import Any

from sqlalchemy import (
    ColumnElement,
    Integer,
    Select,
    String,
    and_,
    bindparam,
    func,
    literal,
    select,
    update,
)
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.ext.asyncio import AsyncConnection
from sqlalchemy.sql.dml import Update

from app.domain.failover import CIRCUIT_OPEN, FAILED_OVER
from app.domain.ledger import LedgerKey, ProviderRow, SendRecordView
from app.domain.messages import CustomerView, ReminderView
from app.domain.states import ReminderState, SendState

from .. import ledger_rules as rules
from ..tables import customers, reminders, send_attempts, send_records
from ..types import UTCDateTime
from .rows import VIEW_COLUMNS, provider_row, send_context, send_record_view

sr = send_records
NOW = bindparam("now", type_=UTCDateTime())  # the instant the caller asked at
_VIEW_COLUMNS = tuple(sr.c[name] for name in VIEW_COLUMNS)


# The failover rule of a claim when its channel has several providers (bound ``earlier``:
# the names of the providers before this one, joined by commas; ``earlier_count``: how many).
FAILOVER_GUARD = rules.others_handed_over(
    send_records.alias("other"),
    bindparam("reminder_id"),
    bindparam("channel"),
    bindparam("provider"),
    bindparam("earlier", type_=String()),
    bindparam("earlier_count", type_=Integer()),
)


def claim_source(
    reminder_id: Any, channel: Any, provider: Any, lease_until: Any, key: Any, now: Any
) -> Select[*tuple[Any, ...]]:
    """The row a claim inserts, from each field's expression, when its reminder exists."""
    return select(
        reminder_id, channel, provider, literal(SendState.SENDING.value), literal(1),
        literal(0), lease_until, key, now, literal(0), now, now,
    ).where(reminders.c.id == reminder_id)  # fmt: skip


_ONE_CLAIM = claim_source(
    bindparam("reminder_id"), bindparam("channel"), bindparam("provider"),
    bindparam("lease_until", type_=UTCDateTime()), bindparam("idempotency_key"), NOW,
)  # fmt: skip


def claim_statement(
    dialect_insert: Any,
    *,
    unless: ColumnElement[bool] | None = None,
    waited: ColumnElement[Any] | None = None,
    guard: ColumnElement[bool] | None = None,
    source: Select[*tuple[Any, ...]] = _ONE_CLAIM,
    now: ColumnElement[Any] = NOW,
) -> Any:
    """The claim in one round trip: insert the row if the reminder exists and the row does
    not, else take it over only if it is claimable at ``now``. No row back: not claimed.
    ``source``: the rows to insert (``claim_source``; by default one claim's parameters).
    ``unless``: a condition that skips the insert (PostgreSQL's "already sent").
    ``waited``: the time the statement waited for the row (``rules.waited_in_statement``,
    PostgreSQL), added to the new lease; SQLite's one writer locks the database before the
    statement reads anything, and the receiver checks the lease by the process clock.
    ``guard``: one more condition on both the insert and the take-over (``FAILOVER_GUARD``)."""
    if unless is not None:
        source = source.where(~unless)
    if guard is not None:
        source = source.where(guard)
    columns = [
        "reminder_id", "channel", "provider", "state", "attempt_count", "attempt_budget_start",
        "lease_until", "idempotency_key", "first_attempt_at", "redrive_count", "created_at",
        "updated_at",
    ]  # fmt: skip
    stmt = dialect_insert(sr).from_select(columns, source)
    # Evaluated once the row is locked, after any wait for it: the new lease runs from
    # then. The claimable check keeps the instant the claim was asked for: a lease still
    # live then is not taken over because the claim waited (its holder's finalize may be
    # waiting for the same lock, behind this claim).
    lease_until: ColumnElement[Any] = stmt.excluded.lease_until
    if waited is not None:
        lease_until = stmt.excluded.lease_until + waited
    claimable = rules.claimable(sr, now)
    return stmt.on_conflict_do_update(
        index_elements=[sr.c.reminder_id, sr.c.channel, sr.c.provider],
        set_={
            "state": SendState.SENDING.value,
            "attempt_count": sr.c.attempt_count + 1,
            "lease_until": lease_until,
            "first_attempt_at": func.coalesce(sr.c.first_attempt_at, stmt.excluded.updated_at),
            "updated_at": stmt.excluded.updated_at,
        },
        where=claimable if guard is None else and_(claimable, guard),
    ).returning(*_VIEW_COLUMNS)


_WAITED = rules.waited_in_statement()
_CLAIM = {
    "postgresql": claim_statement(postgresql.insert, waited=_WAITED),
    "sqlite": claim_statement(sqlite.insert),
}
_CLAIM_GUARDED = {
    "postgresql": claim_statement(postgresql.insert, waited=_WAITED, guard=FAILOVER_GUARD),
    "sqlite": claim_statement(sqlite.insert, guard=FAILOVER_GUARD),
}


def guard_values(earlier: tuple[str, ...]) -> dict[str, Any]:
    """``FAILOVER_GUARD``'s parameters for the providers before the claimed one."""
    return {"earlier": ",".join(earlier), "earlier_count": len(earlier)}


async def claim_send(
    conn: AsyncConnection,
    key: LedgerKey,
    *,
    now: datetime,
    lease_until: datetime,
    earlier: tuple[str, ...] | None = None,
) -> SendRecordView | None:
    """Take the lease on a ledger row (creating it); None when it is not claimable now.
    ``earlier``: the channel has several providers, these before this one (the claim then
    also keeps the failover rule, ``FAILOVER_GUARD``)."""
    values = {
        "reminder_id": key.reminder_id,
        "channel": key.channel,
        "provider": key.provider,
        "lease_until": lease_until,
        "idempotency_key": key.idempotency_key,
        "now": now,
    }
    if earlier is None:
        result = await conn.execute(_CLAIM[conn.dialect.name], values)
    else:
        result = await conn.execute(
            _CLAIM_GUARDED[conn.dialect.name], values | guard_values(earlier)
        )
    row = result.first()
    return send_record_view(row._mapping) if row else None


def hand_over_statement(dialect_insert: Any) -> Any:
    """Hand a (reminder, channel) from one provider to the next (``rules.may_hand_over``):
    its row becomes final with outcome ``failed_over``, or, when that provider never had
    one (its circuit was open before any attempt), is written so. Returns the row's id
    when handed over, nothing when the rule refused."""
    source: Select[*tuple[Any, ...]] = select(
        bindparam("reminder_id"),
        bindparam("channel"),
        bindparam("provider"),
        literal(SendState.TERMINAL_FAILURE.value),
        literal(FAILED_OVER),
        literal(CIRCUIT_OPEN),
        literal(0),
        literal(0),
        bindparam("idempotency_key"),
        literal(0),
        NOW,
        NOW,
    ).where(reminders.c.id == bindparam("reminder_id"))
    columns = [
        "reminder_id", "channel", "provider", "state", "outcome", "last_error_class",
        "attempt_count", "attempt_budget_start", "idempotency_key", "redrive_count",
        "created_at", "updated_at",
    ]  # fmt: skip
    stmt = dialect_insert(sr).from_select(columns, source)
    return stmt.on_conflict_do_update(
        index_elements=[sr.c.reminder_id, sr.c.channel, sr.c.provider],
        set_={
            "state": SendState.TERMINAL_FAILURE.value,
            "outcome": FAILED_OVER,
            "next_attempt_at": None,
            "updated_at": stmt.excluded.updated_at,
        },
        where=rules.may_hand_over(sr, send_attempts),
    ).returning(sr.c.id)


HAND_OVER = {
    "postgresql": hand_over_statement(postgresql.insert),
    "sqlite": hand_over_statement(sqlite.insert),
}


async def hand_over(conn: AsyncConnection, key: LedgerKey, *, now: datetime) -> bool:
    """Give the key's (reminder, channel) to the next provider; False when the rule refused
    (the row is held, final, or may have been accepted)."""
    result = await conn.execute(
        HAND_OVER[conn.dialect.name],
        {"reminder_id": key.reminder_id, "channel": key.channel, "provider": key.provider,
         "idempotency_key": key.idempotency_key, "now": now},
    )  # fmt: skip
    return result.first() is not None


CHANNEL_ROWS = select(sr.c.provider, *_VIEW_COLUMNS, sr.c.outcome).where(
    sr.c.reminder_id == bindparam("reminder_id"), sr.c.channel == bindparam("channel")
)


async def channel_rows(
    conn: AsyncConnection, reminder_id: str, channel: str
) -> dict[str, ProviderRow]:
    """Every provider's row of one (reminder, channel), by provider."""
    result = await conn.execute(CHANNEL_ROWS, {"reminder_id": reminder_id, "channel": channel})
    return {row.provider: provider_row(row._mapping) for row in result}


GET_RECORD = select(*_VIEW_COLUMNS).where(
    sr.c.reminder_id == bindparam("reminder_id"),
    sr.c.channel == bindparam("channel"),
    sr.c.provider == bindparam("provider"),
)


async def get_send_record(conn: AsyncConnection, key: LedgerKey) -> SendRecordView | None:
    """The ledger row for a key, if any."""
    values = {"reminder_id": key.reminder_id, "channel": key.channel, "provider": key.provider}
    row = (await conn.execute(GET_RECORD, values)).first()
    return send_record_view(row._mapping) if row else None


# The reminder and its customer as ``rows.send_context`` reads them.
CONTEXT_COLUMNS = (
    reminders.c.customer_id,
    reminders.c.kind,
    reminders.c.state.label("reminder_state"),
    reminders.c.due_at,
    reminders.c.expires_at,
    reminders.c.channels,
    reminders.c.data,
    reminders.c.schedule_version,
    customers.c.email,
    customers.c.webhook_url,
    customers.c.time_zone,
    customers.c.opted_out_channels,
    customers.c.unsubscribed_at,
    customers.c.webhook_disabled_at,
)
_CONTEXT = (
    select(*CONTEXT_COLUMNS)
    .join_from(reminders, customers, reminders.c.customer_id == customers.c.id)
    .where(reminders.c.id == bindparam("reminder_id"))
)


async def load_send_context(
    conn: AsyncConnection, reminder_id: str
) -> tuple[ReminderView, CustomerView] | None:
    """The reminder and its customer as they are now (one statement)."""
    row = (await conn.execute(_CONTEXT, {"reminder_id": reminder_id})).first()
    return None if row is None else send_context(reminder_id, row._mapping)


_FENCE = and_(sr.c.id == bindparam("record_id"), rules.still_held(sr, bindparam("attempt")))


async def update_claimed_send(
    conn: AsyncConnection,
    record: SendRecordView,
    *,
    now: datetime,
    values: Mapping[str, Any],
) -> bool:
    """Compare-and-set the claimed row; False when the lease was lost to another worker."""
    result = await conn.execute(
        finalize_statement(tuple(sorted(values))), finalize_parameters(record, now, values)
    )
    return result.rowcount == 1


def finalize_parameters(
    record: SendRecordView, now: datetime, values: Mapping[str, Any]
) -> dict[str, Any]:
    """The parameters of ``finalize_statement`` for one claimed row and its new values."""
    params = {f"set_{name}": value for name, value in values.items()}
    return {"record_id": record.id, "attempt": record.attempt_count, "now": now, **params}


@functools.cache
def finalize_statement(columns: tuple[str, ...]) -> Update:
    """The fenced finalize setting ``columns`` (sorted names; ``finalize_parameters``)."""
    # Built once per set of columns, its values bound: a statement built with the values in
    # it costs SQLAlchemy a cache key of every value on each call (a tenth of a delivery's
    # CPU on SQLite, where this runs for every send).
    bound: dict[str, Any] = {name: bindparam(f"set_{name}") for name in columns}
    return update(sr).where(_FENCE).values(lease_until=None, updated_at=NOW, **bound)


def renew_statement(waited: ColumnElement[Any] | None = None) -> Update:
    """Extend a live claim's lease (the send is still running). ``waited`` as for the claim
    (``claim_statement``): PostgreSQL adds the time the renewal waited for its row, so one
    held behind another session's lock does not commit a lease that already ended, which a
    redelivery queued behind it would reclaim at once. The row is locked by a subquery
    before the new lease is computed: a plain UPDATE that waits on a session that only
    locked the row keeps values computed before the wait."""
    lease_until: ColumnElement[Any] = bindparam("lease_until", type_=UTCDateTime())
    live = and_(_FENCE, sr.c.lease_until > NOW)
    if waited is not None:
        lease_until = lease_until + waited
        locked = select(sr.c.id).where(sr.c.id == bindparam("record_id")).with_for_update()
        live = and_(live, sr.c.id == locked.scalar_subquery())
    return update(sr).where(live).values(lease_until=lease_until, updated_at=NOW)


_RENEW = {
    "postgresql": renew_statement(waited=_WAITED),
    "sqlite": renew_statement(),
}


async def renew_lease(
    conn: AsyncConnection, record: SendRecordView, *, now: datetime, lease_until: datetime
) -> bool:
    """Move a claim's lease to ``lease_until``; False when it is no longer this attempt's or
    its lease already ended (another worker may claim it now: the send must not count on it)."""
    result = await conn.execute(
        _RENEW[conn.dialect.name],
        {"record_id": record.id, "attempt": record.attempt_count, "now": now,
         "lease_until": lease_until},
    )  # fmt: skip
    return result.rowcount == 1


# Give a claim back: pending again, and the attempt it spent no longer counts.
RELEASE_CLAIM = (
    update(sr)
    .where(_FENCE)
    .values(
        state=SendState.PENDING.value,
        attempt_budget_start=sr.c.attempt_budget_start + 1,
        lease_until=None,
        updated_at=NOW,
    )
)


async def release_claim(conn: AsyncConnection, record: SendRecordView, *, now: datetime) -> bool:
    """Give a claim back without spending the attempt (the message was stale)."""
    result = await conn.execute(
        RELEASE_CLAIM, {"record_id": record.id, "attempt": record.attempt_count, "now": now}
    )
    return result.rowcount == 1


_OWN_ROWS = sr.c.reminder_id == bindparam("reminder_id")
_FINAL_CHANNELS = select(rules.final_channels(sr)).where(_OWN_ROWS).scalar_subquery()
_DELIVERY = select(rules.delivery_summary(sr)).where(_OWN_ROWS).scalar_subquery()
SETTLE = (
    update(reminders)
    .where(
        reminders.c.id == bindparam("reminder_id"),
        rules.reminder_is_open(reminders),
        rules.all_channels_final(bindparam("channel_count"), _FINAL_CHANNELS),
    )
    .values(state=ReminderState.DONE.value, delivery=_DELIVERY, done_at=NOW, updated_at=NOW)
)


async def settle_reminder(
    conn: AsyncConnection, reminder_id: str, *, channel_count: int, now: datetime
) -> bool:
    """Mark the reminder done once every one of its channels has a final ledger row, with
    its delivery summary (``rules.delivery_summary``).

    Run it as its own statement after the finalize that made a row final has committed
    (READ COMMITTED): of two channels finalizing at once, the later settle's snapshot
    starts after both commits and sees both rows. Counted inside the finalize's own
    transaction, each saw only itself and neither settled (the two-channel race).
    True when this statement marked it done.
    """
    result = await conn.execute(
        SETTLE, {"reminder_id": reminder_id, "channel_count": channel_count, "now": now}
    )
    return result.rowcount == 1
