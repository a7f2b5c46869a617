"""The PostgreSQL gateway's group-commit statements: many claims, or many finalizes, as one.

Each statement takes one array per field (``unnest``) and does for every item exactly what
``postgres_sql``'s single statements do for one: the same claimable condition, the same
fence, the same "mark the reminder done once every channel is final". Rows are written in
key order so two concurrent statements lock shared rows in the same order.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import literal_column

from app.domain.states import ReminderState, SendState

from .. import ledger_rules as rules
from . import repo
from .postgres_sql import (
    REMINDER_IS_OPEN,
    all_channels_final,
    attempt_ended,
    delivery_summary,
    is_final,
    still_held_by_key,
)
from .rows import VIEW_COLUMNS

_SENDING = SendState.SENDING.value
# The claimable condition for the existing row ``sr`` at the item's instant.
_CLAIMABLE = rules.sql_text(
    rules.claimable(rules.sql_row("sr"), literal_column("excluded.updated_at"))
)
# The time the statement waited for its rows, added to the new lease
# (``repo.claim_statement``: ``waited``).
_WAITED = rules.sql_text(rules.waited_in_statement())


def _columns(alias: str) -> str:
    return ", ".join(f"{alias}.{name}" for name in VIEW_COLUMNS)


def _context_columns() -> str:
    # The reminder and its customer exactly as ``rows.send_context`` reads them.
    names = []
    for column in repo.CONTEXT_COLUMNS:
        base: Any = getattr(column, "element", column)  # a label (reminder_state) wraps one
        names.append(f"{base.table.name}.{base.name} AS {column.name}")
    return ", ".join(names)


# Parameters: $1 reminder ids, $2 channels, $3 providers, $4 lease ends, $5 idempotency
# keys, $6 each item's now, $7 claimants' workers, $8 whether each provider deduplicates.
# One row back per item that found its reminder: ``n`` (the item's 1-based position),
# ``claimed``, the row's view columns and the send context. The same two cases as
# ``postgres_sql.CLAIM_OR_READ``: claimed (with the reminder and customer read in this
# statement's snapshot), or refused (with the row as that snapshot saw it; a row already
# sent is not even offered to the insert). A claim's attempt is appended in the statement.
CLAIM_BATCH = f"""
WITH input AS (
    SELECT * FROM unnest($1::text[], $2::text[], $3::text[], $4::timestamptz[], $5::text[],
                         $6::timestamptz[], $7::text[], $8::bool[])
        WITH ORDINALITY AS i(reminder_id, channel, provider, lease_until, idempotency_key,
                             now, claimed_by, provider_deduplicates, n)
), existing AS (
    SELECT i.n, i.reminder_id, {_columns("sr")}
    FROM input i JOIN send_records sr
      ON sr.reminder_id = i.reminder_id AND sr.channel = i.channel AND sr.provider = i.provider
), claimed AS (
    INSERT INTO send_records AS sr (
        reminder_id, channel, provider, state, attempt_count, attempt_budget_start,
        lease_until, idempotency_key, first_attempt_at, redrive_count, created_at, updated_at)
    SELECT i.reminder_id, i.channel, i.provider, '{_SENDING}', 1, 0, i.lease_until,
           i.idempotency_key, i.now, 0, i.now, i.now
    FROM input i JOIN reminders r ON r.id = i.reminder_id
    WHERE NOT EXISTS (
        SELECT 1 FROM existing e WHERE e.n = i.n AND e.state = '{SendState.SENT.value}')
    ORDER BY i.reminder_id, i.channel, i.provider
    ON CONFLICT (reminder_id, channel, provider) DO UPDATE SET
        state = '{_SENDING}',
        attempt_count = sr.attempt_count + 1,
        lease_until = excluded.lease_until + {_WAITED},
        first_attempt_at = coalesce(sr.first_attempt_at, excluded.updated_at),
        updated_at = excluded.updated_at
    WHERE {_CLAIMABLE}
    RETURNING sr.reminder_id, sr.channel, sr.provider, {_columns("sr")}
), attempted AS (
    -- Each claim's attempt, appended in the same statement (attempts_repo.record_attempt).
    INSERT INTO send_attempts (send_record_id, reminder_id, channel, provider, attempt,
                               claimed_by, claimed_at, lease_until, provider_deduplicates)
    SELECT c.id, c.reminder_id, c.channel, c.provider, c.attempt_count, i.claimed_by, i.now,
           c.lease_until, i.provider_deduplicates
    FROM claimed c JOIN input i
      ON i.reminder_id = c.reminder_id AND i.channel = c.channel AND i.provider = c.provider
    ON CONFLICT (send_record_id, attempt) DO NOTHING
), found AS (
    SELECT true AS claimed, i.n, i.reminder_id, {_columns("c")}
    FROM claimed c JOIN input i
      ON i.reminder_id = c.reminder_id AND i.channel = c.channel AND i.provider = c.provider
    UNION ALL
    SELECT false, e.n, e.reminder_id, {_columns("e")}
    FROM existing e WHERE NOT EXISTS (SELECT 1 FROM claimed c WHERE c.id = e.id)
)
SELECT found.*, {_context_columns()}
FROM found
JOIN reminders ON reminders.id = found.reminder_id
JOIN customers ON customers.id = reminders.customer_id
"""

# The SQL type of each column a finalize may set (``postgres_sql.FINALIZE_COLUMNS``).
FINALIZE_TYPES = {
    "state": "text",
    "outcome": "text",
    "sent_at": "timestamptz",
    "provider_request_id": "text",
    "next_attempt_at": "timestamptz",
    "last_error_class": "text",
    "last_error": "text",
}

# The input's columns holding each attempt's outcome (``attempt_ended``).
ENDED_COLUMNS = ("i.ended_outcome", "i.ended_called", "i.ended_error")


def finalize_batch_statement(columns: tuple[str, ...]) -> str:
    """Fenced finalizes of many rows plus, for each reminder whose channels all became final,
    "mark the reminder done": ``postgres_sql.finalize_statement`` for many items.

    One snapshot for the whole statement: a reminder's other channels are counted from the
    table without the rows finalized here, and those rows from the UPDATE's RETURNING (two
    channels of one reminder may be finalized by the same statement). A concurrent finalize
    of another channel that this snapshot misses is settled by the gateway afterwards
    (``SETTLE``), as for the single statement.
    Each attempt's outcome is written in the same statement (``attempt_ended``).
    Parameters: $1 record ids, $2 attempts, $3 each item's now, $4 reminder ids, $5 channel
    counts, $6-$8 the attempts' outcomes, provider called and error classes, then one array
    per column of ``columns``, in order.
    Returns one row per item it did not refuse: its id, whether it was finalized (false: its
    row was locked by another session, so this statement left it alone) and whether its
    reminder was settled.

    The rows are locked first, skipping any another session holds: a group statement that
    waited on one row would leave the others unlocked while it waited, their leases would
    run out, and a redelivery could reclaim one and send it again. A skipped item is
    finalized by a statement of its own, which waits for its row only.
    """
    arrays = ", ".join(f"${i}::{FINALIZE_TYPES[name]}[]" for i, name in enumerate(columns, 9))
    sets = ", ".join(f"{name} = i.{name}" for name in columns)
    rows_now = """
            SELECT channel, state, outcome FROM send_records
            WHERE reminder_id = d.reminder_id
              AND id NOT IN (SELECT id FROM finalized WHERE finalized.reminder_id = d.reminder_id)
            UNION ALL
            SELECT channel, state, outcome FROM finalized
            WHERE finalized.reminder_id = d.reminder_id"""
    return f"""
WITH input AS (
    SELECT * FROM unnest($1::bigint[], $2::int[], $3::timestamptz[], $4::text[], $5::int[],
                         $6::text[], $7::bool[], $8::text[], {arrays})
        AS i(id, attempt, now, reminder_id, channel_count, ended_outcome, ended_called,
             ended_error, {", ".join(columns)})
), locked AS (
    SELECT sr.id FROM send_records sr WHERE sr.id = ANY($1::bigint[])
    ORDER BY sr.id FOR UPDATE SKIP LOCKED
), finalized AS (
    UPDATE send_records sr SET lease_until = NULL, updated_at = i.now, {sets}
    FROM (SELECT * FROM input ORDER BY id) AS i
    WHERE sr.id = i.id AND sr.id IN (SELECT id FROM locked)
      AND {still_held_by_key("sr", "i.attempt")}
    RETURNING sr.id, sr.reminder_id, sr.channel, sr.state, sr.outcome
), final_reminders AS (
    SELECT DISTINCT ON (f.reminder_id) f.reminder_id, i.channel_count, i.now
    FROM finalized f JOIN input i ON i.id = f.id
    WHERE {is_final("f")}
    ORDER BY f.reminder_id
), done AS (
    UPDATE reminders SET state = '{ReminderState.DONE.value}', done_at = d.now, updated_at = d.now,
           delivery = {delivery_summary(rows_now)}
    FROM final_reminders d
    WHERE reminders.id = d.reminder_id AND {REMINDER_IS_OPEN}
      AND {all_channels_final("d.channel_count", rows_now)}
    RETURNING reminders.id
), ended AS (
    {attempt_ended("i.id", "i.attempt", "i.now", ENDED_COLUMNS, source="input AS i")}
)
SELECT f.id, true AS finalized,
       EXISTS (SELECT 1 FROM done WHERE done.id = f.reminder_id) AS settled
FROM finalized f
UNION ALL
SELECT i.id, false, false FROM input i WHERE i.id NOT IN (SELECT id FROM locked)
"""
