"""The receiver's hot statements on PostgreSQL, on raw asyncpg connections.

Why a second implementation: one SQLAlchemy Core statement with its pool checkout costs
~300-400 µs of CPU on the 2-core box, the same statement on a borrowed asyncpg
connection ~60-100 µs (DESIGN §8: 645 vs 1,441 deliveries/s from Python; bench/push.py
measured the receiver before and after). The statements are ``ledger_repo``'s (the Core
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

import asyncio
from collections import deque
from collections.abc import Mapping
from datetime import datetime
from typing import Any

import asyncpg
import orjson
from sqlalchemy.ext.asyncio import AsyncEngine

from app.domain.ledger import Claim, LedgerKey, SendRecordView
from app.domain.messages import CustomerView, ReminderView
from app.domain.states import FINAL_SEND_STATES, ReminderState, SendState

_FINAL = ", ".join(f"'{state.value}'" for state in sorted(FINAL_SEND_STATES))
_OPEN_REMINDER = f"'{ReminderState.SCHEDULED.value}', '{ReminderState.ENQUEUED.value}'"
_VIEW = "id, state, attempt_count, attempt_budget_start, lease_until, next_attempt_at"

# ledger_repo._claim_statement: insert the row if the reminder exists and the row does
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
    count ``ledger_repo.mark_reminder_done_if_final`` makes after its own update.
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


class StatementPool:
    """A small pool of asyncpg connections, each borrowed for exactly one statement.

    asyncpg's own pool resets a connection on every release (one more round trip) and
    costs ~100 µs of CPU per acquire here. A connection borrowed for one autocommit
    statement carries no session state, so there is nothing to reset. A connection that
    fails with anything but a statement error (PostgresError) is dropped, not reused.
    """

    def __init__(self, connect_kwargs: Mapping[str, Any], size: int) -> None:
        self._connect_kwargs = dict(connect_kwargs)
        self._size = size
        self._idle: list[asyncpg.Connection] = []
        self._waiters: deque[asyncio.Future[asyncpg.Connection | None]] = deque()
        self._opened = 0

    @property
    def checked_out(self) -> int:
        """Connections borrowed right now (or being opened for a borrower)."""
        return self._opened - len(self._idle)

    async def fetchrow(self, query: str, *args: Any) -> asyncpg.Record | None:
        """Run one statement on a borrowed connection; its first row."""
        conn = await self._acquire()
        try:
            row = await conn.fetchrow(query, *args)
        except asyncpg.PostgresError:
            self._release(conn)  # the server refused the statement; the session is fine
            raise
        except BaseException:
            self._discard(conn)  # broken, or cancelled mid-statement: never reuse
            raise
        self._release(conn)
        return row

    async def _acquire(self) -> asyncpg.Connection:
        while True:
            if self._idle:
                return self._idle.pop()  # LIFO keeps a few connections hot
            if self._opened < self._size:
                return await self._open()
            waiter: asyncio.Future[asyncpg.Connection | None] = (
                asyncio.get_running_loop().create_future()
            )
            self._waiters.append(waiter)
            try:
                conn = await waiter
            except BaseException:
                self._abandon(waiter)
                raise
            if conn is not None:
                return conn
            # None: a connection was dropped, so there is room to open one

    async def _open(self) -> asyncpg.Connection:
        self._opened += 1
        try:
            return await asyncpg.connect(**self._connect_kwargs)
        except BaseException:
            self._opened -= 1
            self._wake(None)
            raise

    def _abandon(self, waiter: asyncio.Future[asyncpg.Connection | None]) -> None:
        if waiter.done() and not waiter.cancelled():
            handed = waiter.result()  # handed over just as the borrower was cancelled
            if handed is not None:
                self._release(handed)
            else:
                self._wake(None)
        else:
            waiter.cancel()

    def _wake(self, conn: asyncpg.Connection | None) -> bool:
        while self._waiters:
            waiter = self._waiters.popleft()
            if not waiter.done():
                waiter.set_result(conn)
                return True
        return False

    def _release(self, conn: asyncpg.Connection) -> None:
        if conn.is_closed():
            self._discard(conn)
        elif not self._wake(conn):
            self._idle.append(conn)

    def _discard(self, conn: asyncpg.Connection) -> None:
        conn.terminate()
        self._opened -= 1
        self._wake(None)

    def terminate(self) -> None:
        """Drop the idle connections at once (no event loop needed)."""
        idle, self._idle = self._idle, []
        self._opened -= len(idle)
        for conn in idle:
            conn.terminate()

    async def close(self) -> None:
        """Close the idle connections (borrowed ones go back to the pool when returned)."""
        idle, self._idle = self._idle, []
        self._opened -= len(idle)
        for conn in idle:
            try:
                await conn.close(timeout=5)
            except (OSError, asyncpg.PostgresError, asyncpg.InterfaceError, TimeoutError):
                conn.terminate()


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


class PgLedger:
    """The receiver's ledger phases on PostgreSQL: one raw statement each."""

    def __init__(self, pool: StatementPool) -> None:
        self.pool = pool
        self._finalize_sql: dict[tuple[str, ...], str] = {}

    @classmethod
    def for_engine(cls, engine: AsyncEngine, *, size: int) -> PgLedger:
        """A ledger on its own connections to the engine's database."""
        return cls(StatementPool(connect_kwargs(engine), size))

    @property
    def checked_out(self) -> int:
        """Connections borrowed right now (0 whenever no statement runs)."""
        return self.pool.checked_out

    async def close(self) -> None:
        """Close the connections."""
        await self.pool.close()

    async def claim_or_read(self, key: LedgerKey, *, now: datetime, lease_until: datetime) -> Claim:
        """Claim the row (creating it) and read the send context, in one statement."""
        row = await self.pool.fetchrow(
            CLAIM_OR_READ, key.reminder_id, key.channel, key.provider, lease_until,
            key.idempotency_key, now,
        )  # fmt: skip
        if row is not None and row["claimed"]:
            return Claim(True, _view(row), _context(key.reminder_id, row))
        if row is not None and row["state"] == SendState.SENT.value:
            return Claim(False, _view(row))
        return Claim(False, await self.get_send_record(key))

    async def get_send_record(self, key: LedgerKey) -> SendRecordView | None:
        """The ledger row for a key, if any."""
        row = await self.pool.fetchrow(GET_RECORD, key.reminder_id, key.channel, key.provider)
        return _view(row) if row else None

    async def release_claim(self, record: SendRecordView, *, now: datetime) -> bool:
        """Give a claim back without spending the attempt (the message was stale)."""
        row = await self.pool.fetchrow(RELEASE, record.id, record.attempt_count, now)
        return row is not None

    async def finalize_send(
        self,
        record: SendRecordView,
        reminder: ReminderView,
        *,
        now: datetime,
        values: Mapping[str, Any],
    ) -> bool:
        """Compare-and-set the claimed row and, once every channel is final, the reminder."""
        columns = tuple(sorted(values))
        unknown = set(columns) - FINALIZE_COLUMNS
        if unknown:
            raise ValueError(f"finalize cannot set {sorted(unknown)}")
        sql = self._finalize_sql.get(columns)
        if sql is None:
            sql = self._finalize_sql[columns] = finalize_statement(columns)
        row = await self.pool.fetchrow(
            sql, record.id, record.attempt_count, now, reminder.id, len(reminder.channels),
            *(values[name] for name in columns),
        )  # fmt: skip
        return bool(row and row[0] == 1)


def _view(row: asyncpg.Record) -> SendRecordView:
    return SendRecordView(
        id=row["id"],
        state=SendState(row["state"]),
        attempt_count=row["attempt_count"],
        attempt_budget_start=row["attempt_budget_start"],
        lease_until=row["lease_until"],
        next_attempt_at=row["next_attempt_at"],
    )


def _json(value: str | None) -> Any:
    # asyncpg hands ``json`` columns over as text.
    return None if value is None else orjson.loads(value)


def _context(reminder_id: str, row: asyncpg.Record) -> tuple[ReminderView, CustomerView]:
    reminder = ReminderView(
        id=reminder_id,
        customer_id=row["customer_id"],
        kind=row["kind"],
        state=row["reminder_state"],
        due_at=row["due_at"],
        expires_at=row["expires_at"],
        channels=tuple(_json(row["channels"]) or ()),
        data=_json(row["data"]) or {},
        schedule_version=row["schedule_version"],
    )
    customer = CustomerView(
        id=row["customer_id"],
        email=row["email"],
        webhook_url=row["webhook_url"],
        time_zone=row["time_zone"],
        opted_out_channels=frozenset(_json(row["opted_out_channels"]) or ()),
        unsubscribed_at=row["unsubscribed_at"],
        webhook_disabled_at=row["webhook_disabled_at"],
    )
    return reminder, customer
