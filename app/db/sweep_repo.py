"""SQL of the sweep onto the embedded queue in its own database: due reminders become queue
messages inside the database, payload and all, with no row read into Python.

One batch, in the caller's transaction:

1. pick up to ``limit`` sweepable reminders in due order (PostgreSQL: ``FOR UPDATE SKIP
   LOCKED``, so concurrent sweeps take different rows; SQLite: the transaction starts with
   ``BEGIN IMMEDIATE``, so it holds the single write lock from its first read);
2. one (reminder, channel) per message, its queue from the channel-to-queue map, its
   idempotency key ``{reminder_id}:{channel}:v{schedule_version}`` (``messages.idempotency_key``),
   its delay ``due_at - now`` within ``0..max delay`` as ``visible_at``, a fresh message id
   (a UUIDv7 of ``now``, as ``queueing.new_message_id``);
3. remember each key unless it was used inside the dedup window (as ``queue_repo.remember_keys``:
   a key published before a crash keeps its first message, which the reminder then records);
4. store a message for each key remembered now, its payload built by the database
   (``json_build_object`` / ``json_object``) with the fields and values of
   ``DeliveryPayload.to_json`` (a test compares the two for the same reminder);
5. mark the reminders ``enqueued`` with their message ids, in channel order.

PostgreSQL runs it as one statement (data-modifying CTEs), SQLite as a few statements
through two temporary tables. A crash before the commit leaves nothing behind: no message,
no mark, no claim. Nothing here commits.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import Any

import orjson
from sqlalchemy import Integer, Text, bindparam, text
from sqlalchemy.ext.asyncio import AsyncConnection
from sqlalchemy.sql.elements import TextClause
from sqlalchemy.types import TypeEngine

from app.domain.messages import PAYLOAD_VERSION
from app.domain.queueing import message_id_time
from app.domain.states import ReminderState

from .queue_repo import READY
from .types import UTCDateTime

_SCHEDULED = ReminderState.SCHEDULED.value
_ENQUEUED = ReminderState.ENQUEUED.value
_INSTANTS = ("now", "horizon_end", "latest", "window_start", "expires_at")


def _typed(statement: str) -> TextClause:
    """The statement with its parameters typed (instants as ``UTCDateTime``)."""
    typed: dict[str, TypeEngine[Any]] = {
        "limit": Integer(),
        "max_retries": Integer(),
        "queues": Text(),
        "id_time": Text(),
        **{name: UTCDateTime() for name in _INSTANTS},
    }
    return text(statement).bindparams(
        *(bindparam(name, type_=kind) for name, kind in typed.items() if f":{name}" in statement)
    )


# The rows one batch takes: the sweep's window (reminders_repo._SWEEPABLE), oldest first.
_SWEEPABLE = f"""
    state = '{_SCHEDULED}' AND due_at <= :horizon_end
    AND (sweep_claimed_until IS NULL OR sweep_claimed_until <= :now)
"""

# A fresh message id as ``queueing.new_message_id`` builds it, a UUIDv7: a random UUID with
# the batch's instant (``:id_time``, 12 hex digits from ``message_id_time``) written over its
# first 48 bits and 7 over its version digit; its variant is already the RFC's.
_MESSAGE_ID_POSTGRESQL = """
    overlay(overlay(overlay(gen_random_uuid()::text
        placing substr(:id_time, 1, 8) from 1 for 8)
        placing substr(:id_time, 9, 4) from 10 for 4)
        placing '7' from 15 for 1)
"""

_MOVE_POSTGRESQL = _typed(
    f"""
    WITH picked AS MATERIALIZED (
        SELECT id, due_at, channels, schedule_version FROM reminders
        WHERE {_SWEEPABLE}
        ORDER BY due_at LIMIT :limit
        FOR UPDATE SKIP LOCKED
    ), wanted AS MATERIALIZED (
        SELECT p.id AS reminder_id, p.schedule_version, c.position, c.channel, q.queue,
               p.id || ':' || c.channel || '\\:v' || p.schedule_version AS idempotency_key,
               greatest(:now, least(p.due_at, :latest)) AS visible_at,
               {_MESSAGE_ID_POSTGRESQL} AS message_id
        FROM picked AS p
        CROSS JOIN LATERAL json_array_elements_text(p.channels)
            WITH ORDINALITY AS c(channel, position)
        LEFT JOIN json_each_text(CAST(:queues AS json)) AS q(channel, queue)
            ON q.channel = c.channel
    ), recorded AS (
        INSERT INTO queue_idempotency_keys AS k (queue, idempotency_key, message_id, published_at)
        SELECT queue, idempotency_key, message_id, :now FROM wanted
        ON CONFLICT (queue, idempotency_key) DO UPDATE
            SET message_id = excluded.message_id, published_at = excluded.published_at
            WHERE k.published_at <= :window_start
        RETURNING k.message_id
    ), stored AS (
        INSERT INTO queue_messages (queue, message_id, payload, idempotency_key, state,
                                    visible_at, attempts, max_retries, created_at, expires_at)
        SELECT w.queue, w.message_id,
               json_build_object('v', {PAYLOAD_VERSION}, 'reminder_id', w.reminder_id,
                                 'channel', w.channel, 'schedule_version', w.schedule_version),
               w.idempotency_key, '{READY}', w.visible_at, 0, :max_retries, :now, :expires_at
        FROM wanted AS w JOIN recorded AS k ON k.message_id = w.message_id
        RETURNING 1
    ), ids AS (
        -- A key not remembered now was published inside the dedup window: its message id
        -- is the one remembered before this statement (looked up by primary key).
        SELECT w.reminder_id, json_agg(coalesce(k.message_id, (
                   SELECT old.message_id FROM queue_idempotency_keys AS old
                   WHERE old.queue = w.queue AND old.idempotency_key = w.idempotency_key
               )) ORDER BY w.position) AS message_ids
        FROM wanted AS w LEFT JOIN recorded AS k ON k.message_id = w.message_id
        GROUP BY w.reminder_id
    ), marked AS (
        UPDATE reminders AS r
        SET state = '{_ENQUEUED}', enqueued_at = :now,
            enqueued_message_ids = coalesce(ids.message_ids, '[]'::json),
            sweep_claimed_until = NULL, updated_at = :now
        -- The ids as an array the planner takes for a handful of rows (as the unnest of
        -- reminders_repo's batch statements): each row is found by primary key, where a
        -- join to the CTE was at times planned as a scan of the whole table.
        FROM unnest(ARRAY(SELECT id FROM picked)) AS p(id)
        LEFT JOIN ids ON ids.reminder_id = p.id
        WHERE r.id = p.id
        RETURNING 1
    )
    SELECT (SELECT count(*) FROM marked), (SELECT count(*) FROM wanted),
           (SELECT count(*) FROM stored)
    """
)

# SQLite: the batch in temporary tables (this connection's own), then one statement a step.
# The same UUIDv7 from random bytes (SQLite has no uuid function).
_MESSAGE_ID_SQLITE = """
    substr(:id_time, 1, 8) || '-' || substr(:id_time, 9, 4) || '-7'
    || substr(lower(hex(randomblob(2))), 2) || '-'
    || substr('89ab', 1 + abs(random()) % 4, 1) || substr(lower(hex(randomblob(2))), 2) || '-'
    || lower(hex(randomblob(6)))
"""
_SQLITE_PREPARE = (
    "CREATE TEMP TABLE IF NOT EXISTS sweep_picked"
    " (id TEXT PRIMARY KEY, due_at, channels, schedule_version INTEGER)",
    "CREATE TEMP TABLE IF NOT EXISTS sweep_wanted (reminder_id TEXT, schedule_version INTEGER,"
    " position INTEGER, channel TEXT, queue TEXT, idempotency_key TEXT, visible_at,"
    " message_id TEXT UNIQUE, PRIMARY KEY (reminder_id, position))",
    "DELETE FROM temp.sweep_picked",
    "DELETE FROM temp.sweep_wanted",
)
_PICK_SQLITE = _typed(
    f"""
    INSERT INTO temp.sweep_picked (id, due_at, channels, schedule_version)
    SELECT id, due_at, channels, schedule_version FROM main.reminders
    WHERE {_SWEEPABLE}
    ORDER BY due_at LIMIT :limit
    """
)
_WANT_SQLITE = _typed(
    f"""
    INSERT INTO temp.sweep_wanted
    SELECT p.id, p.schedule_version, c.key, c.value, q.value,
           p.id || ':' || c.value || '\\:v' || p.schedule_version,
           max(:now, min(p.due_at, :latest)), {_MESSAGE_ID_SQLITE}
    FROM temp.sweep_picked AS p
    JOIN json_each(p.channels) AS c
    LEFT JOIN json_each(:queues) AS q ON q.key = c.value
    """
)
_REMEMBER_SQLITE = _typed(
    """
    INSERT INTO main.queue_idempotency_keys (queue, idempotency_key, message_id, published_at)
    SELECT queue, idempotency_key, message_id, :now FROM temp.sweep_wanted WHERE true
    ON CONFLICT (queue, idempotency_key) DO UPDATE
        SET message_id = excluded.message_id, published_at = excluded.published_at
        WHERE queue_idempotency_keys.published_at <= :window_start
    """
)
_KEY_JOIN = "k.queue = w.queue AND k.idempotency_key = w.idempotency_key"
_STORE_SQLITE = _typed(
    f"""
    INSERT INTO main.queue_messages (queue, message_id, payload, idempotency_key, state,
                                     visible_at, attempts, max_retries, created_at, expires_at)
    SELECT w.queue, w.message_id,
           json_object('v', {PAYLOAD_VERSION}, 'reminder_id', w.reminder_id,
                       'channel', w.channel, 'schedule_version', w.schedule_version),
           w.idempotency_key, '{READY}', w.visible_at, 0, :max_retries, :now, :expires_at
    -- CROSS JOIN: SQLite then loops over the batch and finds each key by primary key; with
    -- a plain JOIN it chose to scan every remembered key once per batch instead (found by
    -- message id in the batch), so a sweep of a million slowed as the keys table grew.
    FROM temp.sweep_wanted AS w
    CROSS JOIN main.queue_idempotency_keys AS k
    WHERE {_KEY_JOIN} AND k.message_id = w.message_id
    """
)
_MARK_SQLITE = _typed(
    f"""
    UPDATE main.reminders
    SET state = '{_ENQUEUED}', enqueued_at = :now, sweep_claimed_until = NULL, updated_at = :now,
        enqueued_message_ids = (
            SELECT json_group_array(message_id) FROM (
                SELECT k.message_id FROM temp.sweep_wanted AS w
                JOIN main.queue_idempotency_keys AS k ON {_KEY_JOIN}
                WHERE w.reminder_id = reminders.id ORDER BY w.position
            )
        )
    WHERE id IN (SELECT id FROM temp.sweep_picked)
    """
)


async def move_due_reminders(
    conn: AsyncConnection,
    *,
    now: datetime,
    horizon_end: datetime,
    latest: datetime,
    window_start: datetime,
    expires_at: datetime,
    limit: int,
    queues: Mapping[str, str],
    max_retries: int,
) -> tuple[int, int]:
    """Turn up to ``limit`` due reminders into embedded-queue messages and mark them
    enqueued (see the module docstring); returns (reminders, messages). ``latest`` is the
    latest ``visible_at`` the queue takes (now + its maximum delay); ``queues`` maps each
    channel to its queue (a channel missing from it fails the batch: the column is NOT NULL).
    """
    params: dict[str, Any] = {
        "now": now,
        "horizon_end": horizon_end,
        "latest": latest,
        "window_start": window_start,
        "expires_at": expires_at,
        "limit": limit,
        "queues": orjson.dumps(dict(queues)).decode(),
        "max_retries": max_retries,
        "id_time": message_id_time(now),
    }
    if conn.dialect.name == "postgresql":
        # The planner takes each json function call for 100 rows, so the statement's
        # estimates multiply into billions and JIT compiled it for 1-2 s per batch of 5,000
        # reminders; the batch itself runs in a fraction of that.
        await conn.exec_driver_sql("SET LOCAL jit = off")
        moved, messages, _ = (await conn.execute(_MOVE_POSTGRESQL, params)).one()
        return int(moved), int(messages)
    return await _move_sqlite(conn, params)


async def _move_sqlite(conn: AsyncConnection, params: dict[str, Any]) -> tuple[int, int]:
    # Take the write lock before the first read, so a second sweep (another process) waits
    # for this batch's commit instead of picking the same rows. pysqlite has not begun a
    # transaction yet: it does so only before its first INSERT, UPDATE or DELETE.
    await conn.exec_driver_sql("BEGIN IMMEDIATE")
    for statement in _SQLITE_PREPARE:
        await conn.exec_driver_sql(statement)
    moved = (await conn.execute(_PICK_SQLITE, params)).rowcount
    if not moved:
        return 0, 0
    messages = (await conn.execute(_WANT_SQLITE, params)).rowcount
    await conn.execute(_REMEMBER_SQLITE, params)
    await conn.execute(_STORE_SQLITE, params)
    await mark_moved_sqlite(conn, params)
    return moved, messages


async def mark_moved_sqlite(conn: AsyncConnection, params: dict[str, Any]) -> None:
    """SQLite's last step: the picked reminders enqueued with their message ids."""
    await conn.execute(_MARK_SQLITE, params)


async def refresh_statistics(conn: AsyncConnection) -> None:
    """PostgreSQL: ANALYZE the tables a large sweep changed (see ``sweep.ANALYZE_AFTER``)."""
    if conn.dialect.name == "postgresql":
        await conn.exec_driver_sql("ANALYZE reminders, queue_messages, queue_idempotency_keys")
