"""The PostgreSQL gateway's statements, as asyncpg runs them.

Claim, read and release are ``repo``'s own Core statements compiled once for asyncpg
(``RawStatement``): one shape for both gateways. Folded where one statement can do the work
of two: the claim also reads the send context (or, refused, the row); the finalize also
marks the reminder done, written out by hand because the Core path runs those as two
statements in one transaction.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from types import SimpleNamespace
from typing import Any

from sqlalchemy import (
    Boolean,
    ColumnElement,
    String,
    bindparam,
    column,
    exists,
    false,
    literal_column,
    select,
    table,
    true,
    union_all,
)
from sqlalchemy.dialects import postgresql
from sqlalchemy.dialects.postgresql import asyncpg as asyncpg_dialect

from app.domain.ledger import Claimant, LedgerKey
from app.domain.states import ReminderState, SendState

from .. import ledger_rules as rules
from ..tables import customers, reminders, send_attempts, send_records
from . import repo

# The rules spliced into the hand-written statements below and in ``postgres_batch_sql``.
REMINDER_IS_OPEN = rules.sql_text(rules.reminder_is_open(table("reminders", column("state"))))


def still_held(row: str, attempt: str) -> str:
    """``rules.still_held`` for the row ``row`` and the attempt expression ``attempt``."""
    return rules.sql_text(rules.still_held(rules.sql_row(row), literal_column(attempt)))


def still_held_by_key(row: str, attempt: str) -> str:
    """``still_held`` with the row's state in a form no index matches, for a statement that
    finds its rows by primary key. Otherwise the planner may take the (state, lease_until)
    index for ``state = 'sending'`` and read every entry for it, dead ones included until a
    vacuum: 63,518 of them for a batch finalize of 20 rows (7-13 ms) in a 100,000-reminder
    run, against a key lookup per row."""
    state = rules.unindexed(literal_column(f"{row}.state"))
    attempt_count: ColumnElement[int] = literal_column(f"{row}.attempt_count")
    keyed = SimpleNamespace(c=SimpleNamespace(state=state, attempt_count=attempt_count))
    return rules.sql_text(rules.still_held(keyed, literal_column(attempt)))


def is_final(row: str) -> str:
    """``rules.is_final`` for the row ``row``."""
    return rules.sql_text(rules.is_final(rules.sql_row(row)))


def all_channels_final(channel_count: str, rows: str) -> str:
    """``rules.all_channels_final``: ``channel_count`` against the final channels among
    ``rows``, a query returning (channel, state, outcome) of one reminder's ledger rows."""
    final = rules.sql_text(rules.final_channels(rules.sql_row("rows_now")))
    counted: ColumnElement[Any] = literal_column(f"(SELECT {final} FROM ({rows}) AS rows_now)")
    return rules.sql_text(rules.all_channels_final(literal_column(channel_count), counted))


def delivery_summary(rows: str) -> str:
    """``rules.delivery_summary`` over ``rows``, a query returning (channel, state, outcome)
    of one reminder's ledger rows."""
    summary = rules.sql_text(rules.delivery_summary(rules.sql_row("rows_now")))
    return f"(SELECT {summary} FROM ({rows}) AS rows_now)"


@dataclass(frozen=True, slots=True)
class RawStatement:
    """A Core statement of ``repo`` compiled once for asyncpg: its SQL and parameter order."""

    sql: str
    names: tuple[str, ...]
    constants: Mapping[str, Any]  # the statement's own literals, bound as parameters

    @classmethod
    def compile(cls, statement: Any) -> RawStatement:
        """Compile for PostgreSQL's numbered parameters (``$1``), as SQLAlchemy would."""
        compiled = statement.compile(dialect=_DIALECT)
        return cls(compiled.string, tuple(compiled.positiontup), compiled.params)

    def args(self, **values: Any) -> list[Any]:
        """The positional arguments for named values (a name used twice is bound once)."""
        return [values[name] if name in values else self.constants[name] for name in self.names]


_DIALECT = asyncpg_dialect.dialect()
_SR = send_records


# The columns of an attempt's row a claim writes (``attempts_repo.record_attempt``).
ATTEMPT_COLUMNS = [
    "send_record_id", "reminder_id", "channel", "provider", "attempt", "claimed_by",
    "claimed_at", "lease_until", "provider_deduplicates",
]  # fmt: skip


def _claim_or_read(guard: ColumnElement[bool] | None = None) -> RawStatement:
    # One round trip for the two common cases: a claim comes back with the reminder and its
    # customer as they are now (read in the claim's own snapshot), and a refused claim comes
    # back with the row as that snapshot saw it. A row already sent is not even offered to
    # the claim (``unless``): the duplicate (the hot "already sent" answer) is then a
    # read-only statement, with no row lock, no transaction id and no WAL flush. Only a
    # snapshot row in state sent is trusted (sent is never left again); any other refused
    # claim is read again with a fresh snapshot, as the two-statement path does. No row:
    # no such reminder.
    existing = repo.GET_RECORD.cte("existing")
    already_sent = exists().where(existing.c.state == SendState.SENT.value)
    claimed = repo.claim_statement(
        postgresql.insert, unless=already_sent, waited=rules.waited_in_statement(), guard=guard
    ).cte("claimed")
    # The claim's attempt, appended in the same statement (``attempts_repo.record_attempt``).
    attempt = select(
        claimed.c.id, bindparam("reminder_id"), bindparam("channel"), bindparam("provider"),
        claimed.c.attempt_count, bindparam("claimed_by", type_=String()), repo.NOW,
        claimed.c.lease_until, bindparam("provider_deduplicates", type_=Boolean()),
    )  # fmt: skip
    attempted = (
        postgresql.insert(send_attempts)
        .from_select(ATTEMPT_COLUMNS, attempt)
        .on_conflict_do_nothing()
        .cte("attempted")
    )
    found = union_all(
        select(true().label("claimed"), *claimed.c),
        select(false(), *existing.c).where(~exists(select(1).select_from(claimed))),
    ).subquery("found")
    statement = (
        select(found, *repo.CONTEXT_COLUMNS)
        .select_from(
            found.join(reminders, reminders.c.id == bindparam("reminder_id")).join(
                customers, customers.c.id == reminders.c.customer_id
            )
        )
        .add_cte(attempted)
    )
    return RawStatement.compile(statement)


CLAIM_OR_READ = _claim_or_read()
# The same with the failover rule, for a channel with several providers (``repo.FAILOVER_GUARD``).
CLAIM_OR_READ_GUARDED = _claim_or_read(repo.FAILOVER_GUARD)


def claim_args(
    statement: RawStatement,
    key: LedgerKey,
    now: datetime,
    lease_until: datetime,
    claimant: Claimant,
    **more: Any,
) -> list[Any]:
    """``CLAIM_OR_READ``'s (or the guarded one's) arguments for one claim."""
    return statement.args(
        reminder_id=key.reminder_id, channel=key.channel, provider=key.provider,
        lease_until=lease_until, idempotency_key=key.idempotency_key, now=now,
        claimed_by=claimant.worker, provider_deduplicates=claimant.provider_deduplicates,
        **more,
    )  # fmt: skip


def guarded_claim(
    key: LedgerKey,
    now: datetime,
    lease_until: datetime,
    earlier: tuple[str, ...],
    claimant: Claimant,
) -> tuple[Any, ...]:
    """``CLAIM_OR_READ_GUARDED``'s SQL and arguments for one claim."""
    args = claim_args(
        CLAIM_OR_READ_GUARDED, key, now, lease_until, claimant, **repo.guard_values(earlier)
    )
    return (CLAIM_OR_READ_GUARDED.sql, *args)


GET_RECORD = RawStatement.compile(repo.GET_RECORD)
RELEASE = RawStatement.compile(repo.RELEASE_CLAIM.returning(_SR.c.id))
# Parameters by name: reminder_id, channel_count, now.
SETTLE = RawStatement.compile(repo.SETTLE.returning(reminders.c.id))

# The columns a finalize may set (its values are plain data, never SQL).
FINALIZE_COLUMNS = frozenset(
    {
        "state",
        "outcome",
        "sent_at",
        "provider_request_id",
        "next_attempt_at",
        "last_error_class",
        "last_error",
    }
)


@functools.cache  # built once per set of columns (each finalize alone asks for it)
def finalize_statement(columns: tuple[str, ...], *, skip_locked: bool = False) -> str:
    """Fenced finalize of one row plus, when it became final, "mark the reminder done"
    with its delivery summary.

    One statement sees one snapshot, so the channels already final are counted without
    this row (``id <> $1``) and this row is added from the CTE's RETURNING: the same
    count ``repo.settle_reminder`` makes. That snapshot may miss another channel's
    concurrent finalize: the gateway then settles again in a statement of its own after
    this one committed (``SETTLE``), as ``repo.settle_reminder`` explains.
    The attempt's outcome (``AttemptEnd``, when given) is written in the same statement,
    only if the fence let the finalize through (``attempt_ended``).
    Returns (rows finalized, reminders settled, row locked). ``skip_locked``: a row another
    session holds is left alone at once (locked 0) instead of waited for, so a finalize in
    a group's turn never holds the turn for as long as someone else's lock lasts.
    Parameters: $1 record id, $2 attempt, $3 now, $4 reminder id, $5 channel count,
    $6-$8 the attempt's outcome, provider called and error class (NULL outcome: none),
    then the values of ``columns`` in order.
    """
    sets = ", ".join(f"{name} = ${index}" for index, name in enumerate(columns, start=9))
    rows_now = """
        SELECT channel, state, outcome FROM send_records WHERE reminder_id = $4 AND id <> $1
        UNION ALL
        SELECT channel, state, outcome FROM finalized"""
    locked, only_locked, locked_count = "", "", "1"
    if skip_locked:
        locked = "locked AS (SELECT id FROM send_records WHERE id = $1 FOR UPDATE SKIP LOCKED), "
        only_locked = "AND id IN (SELECT id FROM locked)"
        locked_count = "(SELECT count(*) FROM locked)"
    return f"""
WITH {locked}finalized AS (
    UPDATE send_records SET lease_until = NULL, updated_at = $3, {sets}
    WHERE id = $1 AND {still_held("send_records", "$2")} {only_locked}
    RETURNING id, channel, state, outcome
), done AS (
    UPDATE reminders SET state = '{ReminderState.DONE.value}', done_at = $3, updated_at = $3,
           delivery = {delivery_summary(rows_now)}
    WHERE id = $4 AND {REMINDER_IS_OPEN}
      AND EXISTS (SELECT 1 FROM finalized WHERE {is_final("finalized")})
      AND {all_channels_final("$5", rows_now)}
    RETURNING 1
), ended AS (
    {attempt_ended("$1", "$2", "$3", ("$6::text", "$7::bool", "$8::text"))}
)
SELECT (SELECT count(*) FROM finalized), (SELECT count(*) FROM done), {locked_count}
"""


def attempt_ended(
    record_id: str,
    attempt: str,
    now: str,
    ended: tuple[str, str, str],
    *,
    source: str = "",
) -> str:
    """The attempt's outcome (``ended``: outcome, provider called, error class) written to
    ``send_attempts`` once (an outcome already there stays: ``attempts_repo.record_outcome``)
    and only for a send the fence let through (its id among the ``finalized`` CTE's); a NULL
    outcome writes nothing. ``source``: a FROM list the expressions read (the batch's input)."""
    outcome, called, error = ended
    return f"""UPDATE send_attempts SET outcome = {outcome}, provider_called = {called},
           error_class = {error}, finished_at = {now}
    {f"FROM {source}" if source else ""}
    WHERE send_attempts.send_record_id = {record_id} AND send_attempts.attempt = {attempt}
      AND send_attempts.outcome IS NULL AND {outcome} IS NOT NULL
      AND EXISTS (SELECT 1 FROM finalized WHERE finalized.id = {record_id})"""


# ``suppressions_repo.reasons_for`` for an array of normalized addresses.
SUPPRESSION_REASONS = "SELECT email, reason FROM suppressions WHERE email = ANY($1::text[])"
