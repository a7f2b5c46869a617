"""The ledger gateway on PostgreSQL: the receiver's hot statements on raw asyncpg connections.

Why a second implementation: one SQLAlchemy Core statement with its pool checkout costs
~300-400 µs of CPU on the 2-core box, the same statement on a borrowed asyncpg
connection ~60-100 µs (measured from Python with 16 tasks: 645 vs 1,441 deliveries/s;
bench/push.py measured the receiver before and after). The statements (``postgres_sql``)
are ``repo``'s, compiled for asyncpg, folded where one statement can do the work of two. A
new delivery costs two round trips, a duplicate one.
``tests/integration/test_ledger_gateways.py`` runs both implementations through the same
cases, and the whole suite runs the receiver on this one with ``--db postgresql``.

Every statement runs in autocommit on a connection borrowed for that statement only: no
BEGIN/COMMIT round trips, nothing held while a provider is called.
"""

from __future__ import annotations

import contextlib
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, TypeVar

import asyncpg
import orjson
from sqlalchemy.ext.asyncio import AsyncEngine

from app.domain.errors import LeaseLost, LedgerUnavailable
from app.domain.ledger import (
    UNNAMED_CLAIMANT,
    AttemptEnd,
    Claim,
    Claimant,
    ClaimRequest,
    Earlier,
    LedgerKey,
    SendRecordView,
)
from app.domain.messages import ReminderView
from app.domain.states import SendState
from app.group_commit import GroupCommit

from ..failures import is_unavailable
from .core import CoreLedger, makes_final
from .pg_pool import raw_pool
from .postgres_batch_sql import CLAIM_BATCH, finalize_batch_statement
from .postgres_sql import (
    CLAIM_OR_READ,
    FINALIZE_COLUMNS,
    GET_RECORD,
    RELEASE,
    SETTLE,
    SUPPRESSION_REASONS,
    claim_args,
    finalize_statement,
    guarded_claim,
)
from .rows import send_context, send_record_view

T = TypeVar("T")

# Group statements of each kind (claims; finalizes) running at once, unless configured
# (REMINDERS_DATABASE_GROUP_STATEMENTS).
STATEMENTS_IN_FLIGHT = 4


class PgLedger(CoreLedger):
    """The ledger gateway on PostgreSQL: the hot phases as raw statements, concurrent
    claims and finalizes sharing one (group commit, ``group_commit``).

    Claim, read, release and finalize run on asyncpg's own pool; the rare phases (a failed
    send's finalize with its dead letter, a quarantined delivery) are ``CoreLedger``'s, on
    the engine. The two pools split the process's connection budget (``engine.py``).
    """

    def __init__(
        self, engine: AsyncEngine, *, size: int, statements_in_flight: int = STATEMENTS_IN_FLIGHT
    ) -> None:
        super().__init__(engine)
        self._size = size
        self._in_flight = statements_in_flight
        # Made on first use: asyncpg binds a pool to the event loop running when it is built,
        # and a container may be built before its server's loop runs (tests, live servers).
        self._pool: asyncpg.Pool | None = None
        self._claims = GroupCommit(
            self._claim_batch, key=lambda item: item.key, max_in_flight=self._in_flight
        )
        self._finalizes: dict[tuple[str, ...], GroupCommit[_Finalize, tuple[int, bool]]] = {}

    @property
    def pool(self) -> asyncpg.Pool:
        """The raw pool, built on first use inside the running loop."""
        if self._pool is None:
            self._pool = raw_pool(self.engine, size=self._size)
        return self._pool

    @property
    def checked_out(self) -> int:
        """Connections borrowed right now from either pool (0 whenever no statement runs)."""
        raw = 0 if self._pool is None else self._pool.get_size() - self._pool.get_idle_size()
        return raw + super().checked_out

    async def close(self) -> None:
        """Close the raw connections; like a disposed engine, the ledger stays usable."""
        groups: list[GroupCommit[Any, Any]] = [
            self._claims,
            *self._finalizes.values(),
        ]
        for group in groups:
            await group.drain()  # statements under way end first, their callers answered
        pool, self._pool = self._pool, None
        if pool is not None:
            await (await pool).close()

    def terminate(self) -> None:
        """Drop the raw connections at once (no event loop needed)."""
        pool, self._pool = self._pool, None
        if pool is not None:
            with contextlib.suppress(asyncpg.InterfaceError):  # never initialized: none open
                pool.terminate()

    async def claim_or_read(
        self,
        key: LedgerKey,
        *,
        now: datetime,
        lease_until: datetime,
        earlier: Earlier = None,
        claimant: Claimant = UNNAMED_CLAIMANT,
    ) -> Claim:
        """Claim the row (creating it), append its attempt and read the send context, in one
        statement shared with concurrent claims (group commit); failover's (``earlier``) in
        one of its own."""
        if earlier is None:
            row = await self._claims.submit(ClaimRequest(key, now, lease_until, claimant))
        else:
            row = await self._fetchrow(*guarded_claim(key, now, lease_until, earlier, claimant))
        return await self._claim_from(key, row)

    async def claim_many(self, requests: Sequence[ClaimRequest]) -> list[Claim | BaseException]:
        """Every claim in one statement, as a group of concurrent claims is."""
        rows = await self._claim_batch(requests)
        return [
            row if isinstance(row, BaseException) else await self._claim_from(request.key, row)
            for request, row in zip(requests, rows, strict=True)
        ]

    async def _claim_from(self, key: LedgerKey, row: asyncpg.Record | None) -> Claim:
        """The claim a claim statement's row stands for (not claimed and not sent: the
        row's current state is read again)."""
        if row is not None and row["claimed"]:
            context = send_context(key.reminder_id, row, decode=_json)
            return Claim(True, send_record_view(row), context)
        if row is not None and row["state"] == SendState.SENT.value:
            return Claim(False, send_record_view(row))
        return Claim(False, await self.get_send_record(key))

    async def _claim_batch(self, items: Sequence[ClaimRequest]) -> list[Any]:
        # A group of one runs as the plain single-row statement, not the array one: at half
        # the peak rate, where most groups hold one item, the array statements cost
        # PostgreSQL two to three times more per delivery (measured; a plan cached while the
        # ledger was empty scans it), and the plain ones are what ran before group commit.
        if len(items) == 1:
            item = items[0]
            args = claim_args(CLAIM_OR_READ, item.key, item.now, item.lease_until, item.claimant)
            return [await self._fetchrow(CLAIM_OR_READ.sql, *args)]
        try:
            rows = await self._fetch(CLAIM_BATCH, *_claim_arrays(items))
        except asyncpg.PostgresError:  # refused, so nothing written: each item alone
            return await _one_by_one(self._claim_batch, items)
        by_position = {row["n"]: row for row in rows}
        return [by_position.get(position) for position in range(1, len(items) + 1)]

    async def get_send_record(self, key: LedgerKey) -> SendRecordView | None:
        """The ledger row for a key, if any."""
        args = GET_RECORD.args(
            reminder_id=key.reminder_id, channel=key.channel, provider=key.provider
        )
        row = await self._fetchrow(GET_RECORD.sql, *args)
        return send_record_view(row) if row else None

    async def release_claim(self, record: SendRecordView, *, now: datetime) -> bool:
        """Give a claim back without spending the attempt (the message was stale)."""
        args = RELEASE.args(record_id=record.id, attempt=record.attempt_count, now=now)
        row = await self._fetchrow(RELEASE.sql, *args)
        return row is not None

    async def finalize_send(
        self,
        record: SendRecordView,
        reminder: ReminderView,
        *,
        now: datetime,
        values: Mapping[str, Any],
        ended: AttemptEnd | None = None,
    ) -> None:
        """Compare-and-set the claimed row (with its attempt's outcome, ``attempt_ended``)
        and, once every channel is final, the reminder."""
        columns = tuple(sorted(values))
        unknown = set(columns) - FINALIZE_COLUMNS
        if unknown:
            raise ValueError(f"finalize cannot set {sorted(unknown)}")
        item = _Finalize(
            record.id, record.attempt_count, now, reminder.id, len(reminder.channels),
            _ended_values(ended), tuple(values[name] for name in columns),
        )  # fmt: skip
        group = self._finalize_group(columns)
        answer = await group.submit(item)
        if answer is _LOCKED_ELSEWHERE:  # left out of the group: alone, waiting for its row
            answer = await self._finalize_alone(columns, item)
        finalized, settled = answer
        if not finalized:
            raise LeaseLost()
        if not settled and len(reminder.channels) > 1:
            await self.settle_if_final(reminder, values, now=now)

    def _finalize_group(self, columns: tuple[str, ...]) -> GroupCommit[_Finalize, tuple[int, bool]]:
        # One group per set of columns: a statement sets the same columns on every row.
        group = self._finalizes.get(columns)
        if group is None:
            sql = finalize_batch_statement(columns)

            async def run(items: Sequence[_Finalize]) -> list[Any]:
                if len(items) == 1:  # as for claims: a group of one, the plain statement
                    return [await self._finalize_alone(columns, items[0], skip_locked=True)]
                try:
                    rows = await self._fetch(sql, *_finalize_arrays(items))
                except asyncpg.PostgresError:  # refused, so nothing written: each item alone
                    return await _one_by_one(run, items)
                answers = {row["id"]: row for row in rows}
                return [_group_answer(answers.get(item.record_id)) for item in items]

            group = self._finalizes[columns] = GroupCommit(
                run, key=lambda item: item.record_id, max_in_flight=self._in_flight
            )
        return group

    async def _finalize_alone(
        self, columns: tuple[str, ...], item: _Finalize, *, skip_locked: bool = False
    ) -> Any:
        """One row's finalize: (finalized, settled); with ``skip_locked``, _LOCKED_ELSEWHERE
        for a row another session holds, to be finalized alone outside the group's turn."""
        row = await self._fetchrow(
            finalize_statement(columns, skip_locked=skip_locked), item.record_id, item.attempt,
            item.now, item.reminder_id, item.channel_count, *item.ended, *item.values,
        )  # fmt: skip
        if row is None:
            return (0, False)
        return (row[0], bool(row[1])) if row[2] else _LOCKED_ELSEWHERE

    async def settle_if_final(
        self, reminder: ReminderView, values: Mapping[str, Any], *, now: datetime
    ) -> None:
        """``CoreLedger.settle_if_final`` as one raw statement."""
        if makes_final(values):
            args = SETTLE.args(
                reminder_id=reminder.id, channel_count=len(reminder.channels), now=now
            )
            await self._fetchrow(SETTLE.sql, *args)

    async def suppression_reasons(self, emails: Sequence[str]) -> dict[str, str]:
        """``CoreLedger.suppression_reasons`` on the raw pool (no checkout ping, no greenlet:
        a third of the lookups' cost in a profile of serve)."""
        rows = await self._fetch(SUPPRESSION_REASONS, list(emails))
        return {row["email"]: row["reason"] for row in rows}

    async def run_raw(self, query: str, *args: Any) -> list[asyncpg.Record]:
        """One statement of another repository in autocommit on this pool, with the same
        retries on a connection the server ended (the embedded queue's, ``queue_pg``)."""
        return await self._fetch(query, *args)

    async def run_transaction(self, steps: Callable[[asyncpg.Connection], Awaitable[T]]) -> T:
        """``steps`` in one transaction on a connection of this pool, with the same retries
        on a connection the server ended as every statement here (``queue_pg``)."""
        return await self._retrying(_in_transaction, steps)

    async def _fetchrow(self, query: str, *args: Any) -> asyncpg.Record | None:
        rows = await self._fetch(query, *args)
        return rows[0] if rows else None

    async def _fetch(self, query: str, *args: Any) -> list[asyncpg.Record]:
        return await self._retrying(_fetch_once, query, args)

    async def _retrying(self, attempt: Callable[..., Awaitable[T]], *args: Any) -> T:
        # ``attempt(pool, *args)`` on one connection: every statement of the push route
        # comes through here, so no closure is built per statement.
        # Awaiting the pool initializes it on first use; with min_size=0 that opens nothing
        # and never yields, so two first users cannot race. Later it returns at once.
        pool = await self.pool
        # The server ended sessions (pg_terminate_backend, a restart) before asyncpg saw the
        # sockets close: each failed connection is dropped, and the statement runs again
        # on the next one, at most once per pooled connection plus a fresh one. Every
        # statement here is fenced, so one that did take effect is refused, never applied
        # twice.
        for _ in range(self._size):
            try:
                return await attempt(pool, *args)
            except Exception as error:
                if not is_unavailable(error):
                    raise
        try:
            return await attempt(pool, *args)
        except Exception as error:
            if not is_unavailable(error):
                raise
            raise LedgerUnavailable(f"database unavailable: {error!r}"[:300]) from error


# A group finalize's answer for a row another session held: finalize it alone.
_LOCKED_ELSEWHERE: Any = object()


def _group_answer(row: asyncpg.Record | None) -> Any:
    # One item's answer from the group statement's rows (``finalize_batch_statement``):
    # refused by the fence (no row), left for later (locked elsewhere), or finalized.
    if row is None:
        return (0, False)
    return (1, row["settled"]) if row["finalized"] else _LOCKED_ELSEWHERE


@dataclass(frozen=True, slots=True)
class _Finalize:
    record_id: int
    attempt: int
    now: datetime
    reminder_id: str
    channel_count: int
    ended: tuple[str | None, bool | None, str | None]  # the attempt's outcome (``_ended_values``)
    values: tuple[Any, ...]  # in the order of the group's columns


def _ended_values(ended: AttemptEnd | None) -> tuple[str | None, bool | None, str | None]:
    # An attempt's outcome as the finalize statements take it; all NULL: none to write.
    return (None, None, None) if ended is None else ended.columns()


def _claim_arrays(items: Sequence[ClaimRequest]) -> list[list[Any]]:
    return [
        [item.key.reminder_id for item in items],
        [item.key.channel for item in items],
        [item.key.provider for item in items],
        [item.lease_until for item in items],
        [item.key.idempotency_key for item in items],
        [item.now for item in items],
        [item.claimant.worker for item in items],
        [item.claimant.provider_deduplicates for item in items],
    ]


def _finalize_arrays(items: Sequence[_Finalize]) -> list[list[Any]]:
    fixed: list[list[Any]] = [
        [item.record_id for item in items],
        [item.attempt for item in items],
        [item.now for item in items],
        [item.reminder_id for item in items],
        [item.channel_count for item in items],
        *(list(column) for column in zip(*(item.ended for item in items), strict=True)),
    ]
    return fixed + [list(column) for column in zip(*(item.values for item in items), strict=True)]


async def _one_by_one(run: Any, items: Sequence[Any]) -> list[Any]:
    """Each item in a statement of its own, in turn: the group statement was refused (one
    item's bad value, a deadlock between two group statements) and so wrote nothing; now
    one bad item fails only its own caller."""
    results: list[Any] = []
    for item in items:
        try:
            results.extend(await run([item]))
        except Exception as error:  # that item's caller hears of it
            results.append(error)
    return results


async def _fetch_once(pool: asyncpg.Pool, query: str, args: tuple[Any, ...]) -> Any:
    async with pool.acquire() as conn:
        try:
            return await conn.fetch(query, *args)
        except BaseException as error:
            _drop_if_broken(conn, error)
            raise


async def _in_transaction(
    pool: asyncpg.Pool, steps: Callable[[asyncpg.Connection], Awaitable[T]]
) -> T:
    async with pool.acquire() as conn:
        try:
            async with conn.transaction():
                return await steps(conn)
        except BaseException as error:
            _drop_if_broken(conn, error)
            raise


def _drop_if_broken(conn: asyncpg.Connection, error: BaseException) -> None:
    """Never hand out again a connection that failed (``failures.py``: by SQLSTATE), broke,
    or was cancelled mid-statement; one whose statement the server refused is fine."""
    if not isinstance(error, asyncpg.PostgresError) or is_unavailable(error):
        conn.terminate()


def _json(value: str | None) -> Any:
    # asyncpg hands ``json`` columns over as text.
    return None if value is None else orjson.loads(value)
