"""The ledger's rules, each written once as a SQL expression over any row and any instant.

The single-row statements (``ledger.repo``), the PostgreSQL gateway's hand-written statements
(``ledger.postgres_sql``, ``ledger.postgres_batch_sql``), the audit and the catch-up compose these
instead of restating them: a rule changed here changes everywhere. ``row`` is anything
with the ledger's columns (``send_records``, an alias, a CTE, or ``sql_row("sr")`` for
hand-written SQL); ``now`` any SQL expression (a bound parameter, ``$3``,
``excluded.updated_at``). State names are rendered as literals, so one expression
compiles to the same text whatever the driver and can be spliced into SQL text
(``sql_text``).
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import (
    ColumnElement,
    Interval,
    String,
    and_,
    case,
    column,
    exists,
    func,
    literal_column,
    or_,
    select,
    table,
)
from sqlalchemy.dialects import postgresql
from sqlalchemy.sql.expression import TableClause

from app.domain.failover import FAILED_OVER, PROVES_NOT_ACCEPTED
from app.domain.states import (
    FINAL_SEND_STATES,
    OPEN_REMINDER_STATES,
    OPEN_SEND_STATES,
    WITHHELD_OUTCOMES,
    DeliverySummary,
    ReminderState,
    SendState,
)


def _literal(value: str) -> ColumnElement[Any]:
    return literal_column(f"'{value}'")


def _states(states: list[str]) -> list[ColumnElement[Any]]:
    return [_literal(state) for state in sorted(states)]


def unindexed(column: ColumnElement[str]) -> ColumnElement[str]:
    """The column as an expression no index matches (``column || ''``), where a plan by
    another index must win: without fresh statistics the planners (SQLite always) prefer an
    equality on (state, lease_until) and read every entry of that state, dead ones included,
    instead of a key lookup."""
    return column.concat(_literal(""))


FINAL = [state.value for state in FINAL_SEND_STATES]
OPEN_REMINDER = [state.value for state in OPEN_REMINDER_STATES]
WITHHELD = [outcome.value for outcome in WITHHELD_OUTCOMES]


def is_state(row: Any, state: SendState | ReminderState) -> ColumnElement[bool]:
    """The row (a send record or a reminder) is in ``state``: a literal, so statements keep
    one text and PostgreSQL can prove a partial index covers them (``tables``: predicates)."""
    return row.c.state == _literal(state.value)


def is_open(row: Any) -> ColumnElement[bool]:
    """The send record may still be sent: pending or sending."""
    return row.c.state.in_(_states([state.value for state in OPEN_SEND_STATES]))


def is_final(row: Any) -> ColumnElement[bool]:
    """The row will never be sent again: sent, terminal failure or dead."""
    return row.c.state.in_(_states(FINAL))


def reminder_is_open(reminder: Any) -> ColumnElement[bool]:
    """The reminder may still be delivered (scheduled or enqueued): done and cancelled are not."""
    return reminder.c.state.in_(_states(OPEN_REMINDER))


def lease_expired(row: Any, now: ColumnElement[Any]) -> ColumnElement[bool]:
    """A claim's lease has run out at ``now``: another worker may take the row over."""
    return row.c.lease_until <= now


def claimable(row: Any, now: ColumnElement[Any]) -> ColumnElement[bool]:
    """The row may be claimed at ``now``: pending and its retry time reached, or sending
    with its lease expired (the worker that held it died or gave up)."""
    return or_(
        and_(
            is_state(row, SendState.PENDING),
            or_(row.c.next_attempt_at.is_(None), row.c.next_attempt_at <= now),
        ),
        and_(is_state(row, SendState.SENDING), lease_expired(row, now)),
    )


def waited_in_statement() -> ColumnElement[Any]:
    """PostgreSQL: how long the running statement has waited so far, in whole seconds
    (``clock_timestamp()`` minus the statement's arrival, ``statement_timestamp()``).

    A claim adds it to the new lease (evaluated after the row lock is taken): a claim that
    waited on a lock or a stalled server gets a full lease from when it took the row, not
    one that ended while it waited (which a redelivery queued behind it would reclaim at
    once). Only the wait is the database's: the instant stays the caller's (injected
    clocks keep working) and waits under a second count 0 (inside the receiver's lease
    margin, and exact values stay exact in tests)."""
    return literal_column(
        "date_trunc('second', clock_timestamp() - statement_timestamp())", type_=Interval()
    )


def stuck(row: Any, now: ColumnElement[Any]) -> ColumnElement[bool]:
    """Sending with its lease expired at ``now``: a claim nobody finished."""
    return and_(is_state(row, SendState.SENDING), lease_expired(row, now))


def still_held(row: Any, attempt: ColumnElement[Any]) -> ColumnElement[bool]:
    """The finalize fence: the row is still sending under the claim that made ``attempt``,
    so a late worker whose row was reclaimed cannot overwrite the newer attempt."""
    return and_(is_state(row, SendState.SENDING), row.c.attempt_count == attempt)


def handed_over(row: Any) -> ColumnElement[bool]:
    """The row gave its (reminder, channel) to the next provider (failover): final, and
    proven never accepted by its provider. It does not make the channel final."""
    return and_(is_state(row, SendState.TERMINAL_FAILURE), row.c.outcome == _literal(FAILED_OVER))


def settles_channel(row: Any) -> ColumnElement[bool]:
    """The row ends its channel: final, and not handed over to another provider."""
    return and_(is_final(row), or_(row.c.outcome.is_(None), row.c.outcome != _literal(FAILED_OVER)))


def final_channels(rows: Any) -> ColumnElement[int]:
    """Aggregate over a reminder's ledger rows: how many of its channels are final (a row
    handed over to the next provider does not count: that provider's row will).

    FILTER, not WHERE, when composed: the reminder's few rows come through the key index;
    a state condition in WHERE let a stale estimate pick the state index and scan every
    row (PostgreSQL)."""
    return func.count(rows.c.channel.distinct()).filter(settles_channel(rows))


def _proving(value: Any) -> ColumnElement[bool]:
    return value.in_(_states(sorted(PROVES_NOT_ACCEPTED)))


def may_hand_over(row: Any, attempts: Any) -> ColumnElement[bool]:
    """The failover rule's first half: the row may be handed to the next provider now.

    It is pending (not held by a claim, not final) and its every attempt proves the
    provider did not accept the message: each one ended without calling it, or with an
    answer or error that came before acceptance (``failover.PROVES_NOT_ACCEPTED``). An
    attempt with an unknown outcome, or none recorded (its worker died, or its outcome is
    not written yet), blocks: that send waits in its own provider's retries. ``attempts``
    is ``send_attempts`` (or an alias)."""
    unproven = exists(
        select(literal_column("1"))
        .select_from(attempts)
        .where(
            # by name: an upsert's target row is no FROM SQLAlchemy could correlate with
            attempts.c.send_record_id == literal_column(f"{row.name}.id"),
            or_(
                attempts.c.outcome.is_(None),
                and_(attempts.c.provider_called.is_not(False), ~_proving(attempts.c.outcome)),
            ),
        )
    )
    last_error_proves = or_(row.c.last_error_class.is_(None), _proving(row.c.last_error_class))
    return and_(is_state(row, SendState.PENDING), last_error_proves, ~unproven)


def others_handed_over(
    rows: Any, reminder_id: Any, channel: Any, provider: Any, earlier: Any, earlier_count: Any
) -> ColumnElement[bool]:
    """The failover rule's second half, part of every claim when a channel has several
    providers: ``provider`` may be claimed for (``reminder_id``, ``channel``) only when
    every other provider's row of that pair is handed over, and each provider before it
    (``earlier``: their names joined by commas, ``earlier_count`` of them) has one. So no
    claim can overlap a send of another provider, whatever replica makes it."""
    comma = literal_column("','", String)
    listed = (comma + earlier + comma).contains(comma + rows.c.provider + comma)
    # provider names hold no comma ("_" in LIKE matches any one character, itself included)
    other = select(
        func.coalesce(func.sum(case((~handed_over(rows), 1), else_=0)), 0).label("held"),
        func.coalesce(func.sum(case((listed, 1), else_=0)), 0).label("listed"),
    ).where(
        rows.c.reminder_id == reminder_id, rows.c.channel == channel, rows.c.provider != provider
    )
    counts = other.subquery("others")
    return exists(
        select(1).select_from(counts).where(counts.c.held == 0, counts.c.listed == earlier_count)
    )


def all_channels_final(channel_count: Any, final_count: Any) -> ColumnElement[bool]:
    """ "The reminder is done once every channel is final": as many final channels as it has."""
    return channel_count <= final_count


def is_withheld(row: Any) -> ColumnElement[bool]:
    """The row ended without a send on purpose (opted out, suppressed, channel withdrawn):
    not a failure to deliver. Never NULL, so its negation is safe in a FILTER."""
    return and_(
        is_state(row, SendState.TERMINAL_FAILURE),
        func.coalesce(row.c.outcome, _literal("")).in_(_states(WITHHELD)),
    )


def delivered_channels(rows: Any) -> ColumnElement[int]:
    """Aggregate over a reminder's ledger rows: how many of its channels a provider accepted."""
    return func.count(rows.c.channel.distinct()).filter(is_state(rows, SendState.SENT))


def tried_channels(rows: Any) -> ColumnElement[int]:
    """Aggregate: how many of its channels have a final row that is not withheld (sent or
    failed). Every delivered channel is counted here too, so ``tried - delivered`` is the
    number of channels that were meant to go out and did not (a failed provider followed by
    an accepting one counts as delivered)."""
    return func.count(rows.c.channel.distinct()).filter(and_(is_final(rows), ~is_withheld(rows)))


_ZERO: ColumnElement[int] = literal_column(
    "0"
)  # a literal, not a bound parameter: spliced as text too


def _summary(delivered: ColumnElement[int], tried: ColumnElement[int]) -> ColumnElement[str]:
    return case(
        (
            tried == delivered,
            case(
                (delivered > _ZERO, _literal(DeliverySummary.DELIVERED.value)),
                else_=_literal(DeliverySummary.WITHHELD.value),
            ),
        ),
        (delivered > _ZERO, _literal(DeliverySummary.PARTIALLY_DELIVERED.value)),
        else_=_literal(DeliverySummary.UNDELIVERED.value),
    )


def delivery_summary(rows: Any) -> ColumnElement[str]:
    """Aggregate over a settled reminder's ledger rows: its ``DeliverySummary`` (delivered,
    partially_delivered, undelivered or withheld), written where the reminder settles."""
    return _summary(delivered_channels(rows), tried_channels(rows))


def channel_delivery(rows: Any) -> ColumnElement[str]:
    """Aggregate over one channel's final rows: delivered, undelivered or withheld."""
    sent = func.count().filter(is_state(rows, SendState.SENT))
    tried = func.count().filter(~is_withheld(rows))
    return case(
        (sent > _ZERO, _literal(DeliverySummary.DELIVERED.value)),
        (tried > _ZERO, _literal(DeliverySummary.UNDELIVERED.value)),
        else_=_literal(DeliverySummary.WITHHELD.value),
    )


def sql_row(alias: str) -> TableClause:
    """A ledger row under ``alias`` in hand-written SQL (``sql_text`` renders ``alias.state``)."""
    return table(
        alias,
        *(column(name) for name in ("id", "state", "attempt_count", "lease_until")),
        *(column(name) for name in ("next_attempt_at", "channel", "outcome")),
    )


_DIALECT = postgresql.dialect()


def sql_text(expression: ColumnElement[Any]) -> str:
    """An expression as PostgreSQL text, for the gateway's hand-written statements."""
    return str(expression.compile(dialect=_DIALECT))
