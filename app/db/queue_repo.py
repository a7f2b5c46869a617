"""SQL for the embedded queue: publish with key dedup, claim, acknowledge, redeliver, expire.

Nothing here commits. Instants are bound parameters (the caller's clock), never the
database's ``now()``, so tests drive time and every dispatcher agrees with its own clock.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import orjson
from sqlalchemy import (
    DateTime,
    Integer,
    Text,
    bindparam,
    delete,
    func,
    select,
    text,
    tuple_,
    update,
)
from sqlalchemy.dialects.postgresql import ARRAY
from sqlalchemy.ext.asyncio import AsyncConnection

from .dialects import insert_for
from .queue_tables import queue_idempotency_keys, queue_messages
from .types import UTCDateTime

qm = queue_messages
qk = queue_idempotency_keys
READY = "ready"
DEAD = "dead"
# The statements' clock, bound as a parameter (the service's clock, not the database's).
NOW = bindparam("now", type_=UTCDateTime())


@dataclass(frozen=True, slots=True)
class NewMessage:
    """A message to store: the publisher has checked its limits and chosen its id."""

    queue: str
    message_id: str
    payload: Any
    idempotency_key: str
    visible_at: datetime
    expires_at: datetime


@dataclass(frozen=True, slots=True)
class ClaimedMessage:
    """A message a dispatcher holds until its visibility timeout; ``attempts`` fences it."""

    id: int
    queue: str
    message_id: str
    payload: Any
    attempts: int
    max_retries: int
    # Where it stood in the claim's order before this claim (PostgreSQL; None on SQLite).
    position: ClaimPosition | None = None


@dataclass(frozen=True, slots=True, order=True)
class ClaimPosition:
    """A place in the claim's order: (``visible_at``, id)."""

    visible_at: datetime
    id: int


async def remember_keys(
    conn: AsyncConnection,
    keys: Sequence[tuple[str, str, str]],
    *,
    now: datetime,
    window_start: datetime,
) -> set[tuple[str, str]]:
    """Record (queue, key, message id) unless the key was used after ``window_start``.

    Returns the (queue, key) pairs that were recorded, i.e. the messages to store.
    Concurrent publishers of one key: the second waits for the first's commit, then
    finds the key inside the window (PostgreSQL); SQLite serializes writers.
    """
    if not keys:
        return set()
    if conn.dialect.name == "postgresql":
        return await _remember_keys_unnest(conn, keys, now=now, window_start=window_start)
    insert = insert_for(conn, qk)
    stmt = insert.on_conflict_do_update(
        index_elements=[qk.c.queue, qk.c.idempotency_key],
        set_={
            "message_id": insert.excluded.message_id,
            "published_at": insert.excluded.published_at,
        },
        where=qk.c.published_at <= bindparam("window_start", type_=UTCDateTime()),
    ).returning(qk.c.queue, qk.c.idempotency_key)
    # A list of parameter sets: compiled once and cached, where a VALUES list of N rows was
    # compiled anew for every batch (a third of a sweep's time). SQLAlchemy still sends it
    # as multi-row INSERTs within SQLite's bound-parameter limit.
    rows = [
        {
            "queue": q,
            "idempotency_key": k,
            "message_id": m,
            "published_at": now,
            "window_start": window_start,
        }
        for q, k, m in keys
    ]
    return {(row.queue, row.idempotency_key) for row in await conn.execute(stmt, rows)}


# PostgreSQL: one array per column, so one statement text (prepared once) whatever the
# batch's size; a VALUES list is rendered, compiled and prepared again per size.
_REMEMBER_KEYS_UNNEST = text(
    """
    INSERT INTO queue_idempotency_keys AS k (queue, idempotency_key, message_id, published_at)
    SELECT u.queue, u.idempotency_key, u.message_id, :now
    FROM unnest(:queues, :keys, :message_ids) AS u(queue, idempotency_key, message_id)
    ON CONFLICT (queue, idempotency_key) DO UPDATE
        SET message_id = excluded.message_id, published_at = excluded.published_at
        WHERE k.published_at <= :window_start
    RETURNING k.queue, k.idempotency_key
    """
).bindparams(
    bindparam("now", type_=UTCDateTime()),
    bindparam("window_start", type_=UTCDateTime()),
    *(bindparam(name, type_=ARRAY(Text)) for name in ("queues", "keys", "message_ids")),
)


async def _remember_keys_unnest(
    conn: AsyncConnection,
    keys: Sequence[tuple[str, str, str]],
    *,
    now: datetime,
    window_start: datetime,
) -> set[tuple[str, str]]:
    params = {
        "now": now,
        "window_start": window_start,
        "queues": [q for q, _, _ in keys],
        "keys": [k for _, k, _ in keys],
        "message_ids": [m for _, _, m in keys],
    }
    result = await conn.execute(_REMEMBER_KEYS_UNNEST, params)
    return {(row.queue, row.idempotency_key) for row in result}


async def message_ids_for_keys(
    conn: AsyncConnection, keys: Sequence[tuple[str, str]]
) -> dict[tuple[str, str], str]:
    """The message id currently remembered for each (queue, key)."""
    if not keys:
        return {}
    stmt = select(qk.c.queue, qk.c.idempotency_key, qk.c.message_id).where(
        tuple_(qk.c.queue, qk.c.idempotency_key).in_(list(keys))
    )
    return {(r.queue, r.idempotency_key): r.message_id for r in await conn.execute(stmt)}


async def insert_messages(
    conn: AsyncConnection, messages: Sequence[NewMessage], *, now: datetime, max_retries: int
) -> None:
    """Store new messages, ready at their ``visible_at``."""
    if not messages:
        return
    if conn.dialect.name == "postgresql":
        await _insert_messages_unnest(conn, messages, now=now, max_retries=max_retries)
        return
    rows = [
        {
            "queue": m.queue,
            "message_id": m.message_id,
            "payload": m.payload,
            "idempotency_key": m.idempotency_key,
            "state": READY,
            "visible_at": m.visible_at,
            "attempts": 0,
            "max_retries": max_retries,
            "created_at": now,
            "expires_at": m.expires_at,
        }
        for m in messages
    ]
    await conn.execute(qm.insert(), rows)


_INSERT_MESSAGES_UNNEST = text(
    f"""
    INSERT INTO queue_messages (queue, message_id, payload, idempotency_key, state,
                                visible_at, attempts, max_retries, created_at, expires_at)
    SELECT u.queue, u.message_id, u.payload::json, u.idempotency_key, '{READY}',
           u.visible_at, 0, :max_retries, :now, u.expires_at
    FROM unnest(:queues, :message_ids, :payloads, :keys, :visible_ats, :expires_ats)
         AS u(queue, message_id, payload, idempotency_key, visible_at, expires_at)
    """
).bindparams(
    bindparam("now", type_=UTCDateTime()),
    bindparam("max_retries", type_=Integer()),
    *(bindparam(name, type_=ARRAY(Text)) for name in ("queues", "message_ids", "payloads", "keys")),
    *(
        bindparam(name, type_=ARRAY(DateTime(timezone=True)))
        for name in ("visible_ats", "expires_ats")
    ),
)


async def _insert_messages_unnest(
    conn: AsyncConnection, messages: Sequence[NewMessage], *, now: datetime, max_retries: int
) -> None:
    params = {
        "now": now,
        "max_retries": max_retries,
        "queues": [m.queue for m in messages],
        "message_ids": [m.message_id for m in messages],
        "payloads": [orjson.dumps(m.payload).decode() for m in messages],
        "keys": [m.idempotency_key for m in messages],
        "visible_ats": [m.visible_at for m in messages],
        "expires_ats": [m.expires_at for m in messages],
    }
    await conn.execute(_INSERT_MESSAGES_UNNEST, params)


async def delete_messages(conn: AsyncConnection, ids: Sequence[int]) -> int:
    """Acknowledge: remove messages (whoever holds them now; the receiver said done)."""
    if not ids:
        return 0
    result = await conn.execute(delete(qm).where(qm.c.id.in_(list(ids))))
    return result.rowcount


_FENCE = (
    qm.c.id == bindparam("message_pk"),
    qm.c.attempts == bindparam("attempt"),
    qm.c.state == READY,
)
_REDELIVER = (
    update(qm)
    .where(*_FENCE)
    .values(
        visible_at=bindparam("retry_at", type_=UTCDateTime()),
        last_status=bindparam("status_code"),
        last_error=bindparam("error_text"),
    )
)
_KILL = (
    update(qm)
    .where(*_FENCE)
    .values(
        state=DEAD,
        dead_at=NOW,
        last_status=bindparam("status_code"),
        last_error=bindparam("error_text"),
    )
)


@dataclass(frozen=True, slots=True)
class FailedDelivery:
    """A delivery that was not acknowledged: what to record and when to try again."""

    message_pk: int
    attempt: int
    status: int | None
    error: str
    visible_at: datetime | None  # None: move to the dead-letter list


async def record_failures(
    conn: AsyncConnection, failures: Sequence[FailedDelivery], *, now: datetime
) -> None:
    """Schedule redeliveries or dead-letter, only where this claim still holds the message."""
    retry = [_failure_params(f) | {"retry_at": f.visible_at} for f in failures if f.visible_at]
    dead = [_failure_params(f) | {"now": now} for f in failures if f.visible_at is None]
    if retry:
        await conn.execute(_REDELIVER, retry)
    if dead:
        await conn.execute(_KILL, dead)


_RELEASE = (
    update(qm)
    .where(*_FENCE)
    .values(visible_at=bindparam("now", type_=UTCDateTime()), attempts=qm.c.attempts - 1)
)


async def release_messages(
    conn: AsyncConnection, claimed: Sequence[ClaimedMessage], *, now: datetime
) -> None:
    """Give back claimed messages that were never delivered (a dispatcher stopping): visible
    again now, the claim's attempt not counted; only where this claim still holds them."""
    params = [{"message_pk": m.id, "attempt": m.attempts, "now": now} for m in claimed]
    if params:
        await conn.execute(_RELEASE, params)


def _failure_params(failure: FailedDelivery) -> dict[str, Any]:
    return {
        "message_pk": failure.message_pk,
        "attempt": failure.attempt,
        "status_code": failure.status,
        "error_text": failure.error,
    }


async def kill_unanswered(conn: AsyncConnection, *, now: datetime) -> list[tuple[str, str]]:
    """Dead-letter messages whose last allowed delivery never got an answer (dispatcher died)."""
    stmt = (
        update(qm)
        .where(qm.c.state == READY, qm.c.visible_at <= now, qm.c.attempts > qm.c.max_retries)
        .values(state=DEAD, dead_at=now, last_error="no answer within the visibility timeout")
        .returning(qm.c.queue, qm.c.message_id)
    )
    return [(row.queue, row.message_id) for row in await conn.execute(stmt)]


async def drop_expired(conn: AsyncConnection, *, now: datetime) -> list[dict[str, Any]]:
    """Delete every message past its retention; returns what was dropped, for the log."""
    stmt = (
        delete(qm)
        .where(qm.c.expires_at <= now)
        .returning(qm.c.queue, qm.c.message_id, qm.c.state, qm.c.attempts, qm.c.created_at)
    )
    return [dict(row._mapping) for row in await conn.execute(stmt)]


async def forget_keys(conn: AsyncConnection, *, before: datetime) -> int:
    """Remove idempotency keys that left the dedup window."""
    result = await conn.execute(delete(qk).where(qk.c.published_at <= before))
    return result.rowcount


async def next_visible_at(conn: AsyncConnection) -> datetime | None:
    """When the earliest ready message can next be claimed (None when there is none)."""
    stmt = select(func.min(qm.c.visible_at)).where(qm.c.state == READY)
    return (await conn.execute(stmt)).scalar_one()


async def count_by_state(conn: AsyncConnection) -> dict[str, int]:
    """How many messages are ready and dead."""
    stmt = select(qm.c.state, func.count()).group_by(qm.c.state)
    counts = {READY: 0, DEAD: 0}
    counts.update({row[0]: int(row[1]) for row in await conn.execute(stmt)})
    return counts


async def list_messages(
    conn: AsyncConnection, *, state: str | None = None, queue: str | None = None, limit: int = 100
) -> list[dict[str, Any]]:
    """Messages in id order, optionally one state (``dead``: the dead-letter list) or queue."""
    stmt = select(qm).order_by(qm.c.id).limit(limit)
    if state is not None:
        stmt = stmt.where(qm.c.state == state)
    if queue is not None:
        stmt = stmt.where(qm.c.queue == queue)
    return [dict(row._mapping) for row in await conn.execute(stmt)]
