"""The receiver's hot statements on PostgreSQL, on raw asyncpg connections.

Why a second implementation: one SQLAlchemy Core statement with its pool checkout costs
~300-400 µs of CPU on the 2-core box, the same statement on a borrowed asyncpg
connection ~60-100 µs (measured from Python with 16 tasks: 645 vs 1,441 deliveries/s;
bench/push.py measured the receiver before and after). The statements are ``repo``'s (the Core
path that SQLite and the rest of the service keep), written out for PostgreSQL, and
folded where one statement can do the work of two: the claim also reads the send context
(or, refused, the row), the finalize also marks the reminder done. A new delivery costs
two round trips, a duplicate one. ``tests/integration/test_ledger_gateways.py`` runs
both implementations through the same cases, and the whole suite runs the receiver on
this one with ``--db postgresql``.

Every statement runs in autocommit on a connection borrowed for that statement only: no
BEGIN/COMMIT round trips, nothing held while a provider is called.
"""

from __future__ import annotations

import contextlib
from collections.abc import Mapping
from datetime import datetime
from typing import Any

import asyncpg
import orjson
from sqlalchemy.ext.asyncio import AsyncEngine

from app.domain.errors import LeaseLost
from app.domain.ledger import Claim, LedgerKey, SendRecordView
from app.domain.messages import ReminderView
from app.domain.states import FINAL_SEND_STATES, ReminderState, SendState

from .core import CoreLedger
from .rows import VIEW_COLUMNS, send_context, send_record_view

_FINAL = ", ".join(f"'{state.value}'" for state in sorted(FINAL_SEND_STATES))
_OPEN_REMINDER = f"'{ReminderState.SCHEDULED.value}', '{ReminderState.ENQUEUED.value}'"
_VIEW = ", ".join(VIEW_COLUMNS)

# repo._claim_statement: insert the row if the reminder exists and the row does
# not, else take it over only if it is claimable. No row back means "not claimed". Here the
# insert is also skipped when the row was already sent (``existing``, see CLAIM_OR_READ).
_CLAIM = f"""
INSERT INTO send_records (reminder_id, channel, provider, state, attempt_count,
    attempt_budget_start, lease_until, idempotency_key, first_attempt_at, redrive_count,
    created_at, updated_at)
SELECT $1::varchar, $2::varchar, $3::varchar, '{SendState.SENDING.value}', 1, 0,
    $4::timestamptz, $5::varchar, $6::timestamptz, 0, $6::timestamptz, $6::timestamptz
FROM reminders WHERE reminders.id = $1::varchar
    AND NOT EXISTS (SELECT 1 FROM existing WHERE existing.state = '{SendState.SENT.value}')
ON CONFLICT (reminder_id, channel, provider) DO UPDATE SET
    state = '{SendState.SENDING.value}',
    attempt_count = send_records.attempt_count + 1,
    lease_until = excluded.lease_until,
    first_attempt_at = coalesce(send_records.first_attempt_at, excluded.updated_at),
    updated_at = excluded.updated_at
WHERE (send_records.state = '{SendState.PENDING.value}'
       AND (send_records.next_attempt_at IS NULL OR send_records.next_attempt_at <= $6))
   OR (send_records.state = '{SendState.SENDING.value}' AND send_records.lease_until <= $6)
RETURNING {_VIEW}
"""

_CONTEXT_COLUMNS = """
    r.customer_id, r.kind, r.state AS reminder_state, r.due_at, r.expires_at, r.channels,
    r.data, r.schedule_version, c.email, c.webhook_url, c.time_zone, c.opted_out_channels,
    c.unsubscribed_at, c.webhook_disabled_at"""

# One round trip for the two common cases: a claim comes back with the reminder and its
# customer as they are now (read in the claim's own snapshot), and a refused claim comes
# back with the row as that snapshot saw it. A row already sent is not even offered to the
# insert: the duplicate (the hot "already sent" answer) is then a read-only statement,
# with no row lock, no transaction id and no WAL flush. Only a snapshot row in state sent
# is trusted (sent is never left again); any other refused claim is read again with a
# fresh snapshot, exactly as the two-statement path does. No row: no such reminder.
CLAIM_OR_READ = f"""
WITH existing AS (
    SELECT {_VIEW} FROM send_records
    WHERE reminder_id = $1::varchar AND channel = $2::varchar AND provider = $3::varchar
),
claimed AS ({_CLAIM}),
found AS (
    SELECT true AS claimed, {_VIEW} FROM claimed
    UNION ALL
    SELECT false, {_VIEW} FROM existing WHERE NOT EXISTS (SELECT 1 FROM claimed)
)
SELECT found.*, {_CONTEXT_COLUMNS}
FROM found
JOIN reminders AS r ON r.id = $1::varchar
JOIN customers AS c ON c.id = r.customer_id
"""

GET_RECORD = f"""
SELECT {_VIEW} FROM send_records
WHERE reminder_id = $1 AND channel = $2 AND provider = $3
"""

RELEASE = f"""
UPDATE send_records SET state = '{SendState.PENDING.value}',
    attempt_budget_start = attempt_budget_start + 1, lease_until = NULL, updated_at = $3
WHERE id = $1 AND state = '{SendState.SENDING.value}' AND attempt_count = $2
RETURNING id
"""

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


def finalize_statement(columns: tuple[str, ...]) -> str:
    """Fenced finalize of one row plus, when it became final, "mark the reminder done".

    One statement sees one snapshot, so the channels already final are counted without
    this row (``id <> $1``) and this row is added from the CTE's RETURNING: the same
    count ``repo.mark_reminder_done_if_final`` makes after its own update.
    Parameters: $1 record id, $2 attempt, $3 now, $4 reminder id, $5 channel count,
    then the values of ``columns`` in order.
    """
    sets = ", ".join(f"{name} = ${index}" for index, name in enumerate(columns, start=6))
    return f"""
WITH finalized AS (
    UPDATE send_records SET lease_until = NULL, updated_at = $3, {sets}
    WHERE id = $1 AND state = '{SendState.SENDING.value}' AND attempt_count = $2
    RETURNING channel, state
), done AS (
    UPDATE reminders SET state = '{ReminderState.DONE.value}', done_at = $3, updated_at = $3
    WHERE id = $4 AND state IN ({_OPEN_REMINDER})
      AND EXISTS (SELECT 1 FROM finalized WHERE finalized.state IN ({_FINAL}))
      AND $5 <= (
        -- FILTER, not WHERE: the reminder's few rows come through the key index; a state
        -- condition in WHERE let a stale estimate pick the state index and scan every row
        SELECT count(DISTINCT channel) FILTER (WHERE state IN ({_FINAL})) FROM (
            SELECT channel, state FROM send_records WHERE reminder_id = $4 AND id <> $1
            UNION ALL
            SELECT channel, state FROM finalized
        ) AS rows_now
      )
)
SELECT count(*) FROM finalized
"""


def connect_kwargs(engine: AsyncEngine) -> dict[str, Any]:
    """asyncpg.connect() arguments for the database an engine points at."""
    _, params = engine.dialect.create_connect_args(engine.url)
    params = dict(params)
    cache_size = params.pop("prepared_statement_cache_size", None)
    if cache_size is not None:
        params["statement_cache_size"] = cache_size
    params.pop("prepared_statement_name_func", None)
    params.pop("async_creator_fn", None)
    return params


class PgLedger(CoreLedger):
    """The ledger gateway on PostgreSQL: the hot phases one raw statement each.

    Claim, read, release and finalize run on asyncpg's own pool; the rare phases (a failed
    send's finalize with its dead letter, a quarantined delivery) are ``CoreLedger``'s, on
    the engine. The two pools split the process's connection budget (``engine.py``).
    """

    def __init__(self, engine: AsyncEngine, *, size: int) -> None:
        super().__init__(engine)
        self._size = size
        self.pool = raw_pool(engine, size=size)
        self._finalize_sql: dict[tuple[str, ...], str] = {}

    @property
    def checked_out(self) -> int:
        """Connections borrowed right now from either pool (0 whenever no statement runs)."""
        return self.pool.get_size() - self.pool.get_idle_size() + super().checked_out

    async def close(self) -> None:
        """Close the raw connections; like a disposed engine, the ledger stays usable."""
        pool, self.pool = self.pool, raw_pool(self.engine, size=self._size)
        await (await pool).close()

    def terminate(self) -> None:
        """Drop the raw connections at once (no event loop needed)."""
        pool, self.pool = self.pool, raw_pool(self.engine, size=self._size)
        with contextlib.suppress(asyncpg.InterfaceError):  # never initialized: nothing open
            pool.terminate()

    async def claim_or_read(self, key: LedgerKey, *, now: datetime, lease_until: datetime) -> Claim:
        """Claim the row (creating it) and read the send context, in one statement."""
        row = await self._fetchrow(
            CLAIM_OR_READ, key.reminder_id, key.channel, key.provider, lease_until,
            key.idempotency_key, now,
        )  # fmt: skip
        if row is not None and row["claimed"]:
            context = send_context(key.reminder_id, row, decode=_json)
            return Claim(True, send_record_view(row), context)
        if row is not None and row["state"] == SendState.SENT.value:
            return Claim(False, send_record_view(row))
        return Claim(False, await self.get_send_record(key))

    async def get_send_record(self, key: LedgerKey) -> SendRecordView | None:
        """The ledger row for a key, if any."""
        row = await self._fetchrow(GET_RECORD, key.reminder_id, key.channel, key.provider)
        return send_record_view(row) if row else None

    async def release_claim(self, record: SendRecordView, *, now: datetime) -> bool:
        """Give a claim back without spending the attempt (the message was stale)."""
        row = await self._fetchrow(RELEASE, record.id, record.attempt_count, now)
        return row is not None

    async def finalize_send(
        self,
        record: SendRecordView,
        reminder: ReminderView,
        *,
        now: datetime,
        values: Mapping[str, Any],
    ) -> None:
        """Compare-and-set the claimed row and, once every channel is final, the reminder."""
        columns = tuple(sorted(values))
        unknown = set(columns) - FINALIZE_COLUMNS
        if unknown:
            raise ValueError(f"finalize cannot set {sorted(unknown)}")
        sql = self._finalize_sql.get(columns)
        if sql is None:
            sql = self._finalize_sql[columns] = finalize_statement(columns)
        row = await self._fetchrow(
            sql, record.id, record.attempt_count, now, reminder.id, len(reminder.channels),
            *(values[name] for name in columns),
        )  # fmt: skip
        if not (row and row[0] == 1):
            raise LeaseLost()

    async def _fetchrow(self, query: str, *args: Any) -> asyncpg.Record | None:
        # Awaiting the pool initializes it on first use; with min_size=0 that opens nothing
        # and never yields, so two first users cannot race. Later it returns at once.
        pool = await self.pool
        try:
            return await _fetchrow_once(pool, query, args)
        except _CONNECTION_FAILURES:
            # The server ended the session (pg_terminate_backend, a restart) before asyncpg
            # saw the socket close. Once more on another connection: every statement here
            # is fenced, so one that did take effect is refused, never applied twice.
            return await _fetchrow_once(pool, query, args)


# Failures of the connection, not of the statement. 57P01 (admin_shutdown) is the
# server's answer to a statement on a session pg_terminate_backend ended.
_CONNECTION_FAILURES = (
    OSError,
    asyncpg.InterfaceError,
    asyncpg.InternalClientError,
    asyncpg.PostgresConnectionError,
    asyncpg.AdminShutdownError,
)


async def _fetchrow_once(pool: asyncpg.Pool, query: str, args: tuple[Any, ...]) -> Any:
    async with pool.acquire() as conn:
        try:
            return await conn.fetchrow(query, *args)
        except asyncpg.PostgresError as error:
            if isinstance(error, _CONNECTION_FAILURES):
                conn.terminate()
            raise  # otherwise the server refused the statement; the session is fine
        except BaseException:
            conn.terminate()  # broken, or cancelled mid-statement: never handed out again
            raise


def raw_pool(engine: AsyncEngine, *, size: int) -> asyncpg.Pool:
    """asyncpg's pool to the engine's database, not yet initialized (no I/O here).

    Connections open on demand, at most ``size``. asyncpg drops a connection that failed
    or was closed by the server (``pg_terminate_backend``, a restart) instead of handing it
    out again. Its default reset on release (one more round trip each time) is skipped: a
    connection is borrowed for one autocommit statement and carries no session state.
    """
    return asyncpg.create_pool(
        **connect_kwargs(engine), min_size=0, max_size=size, reset=_keep_session
    )


async def _keep_session(_connection: asyncpg.Connection) -> None:
    """Nothing to reset: see ``raw_pool``."""


def _json(value: str | None) -> Any:
    # asyncpg hands ``json`` columns over as text.
    return None if value is None else orjson.loads(value)
