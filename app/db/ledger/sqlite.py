"""The ledger gateway on SQLite: ``CoreLedger`` with concurrent claims and finalizes each
done in one transaction (group commit, ``group_commit``).

SQLite runs every statement of the process through one connection (``engine.py``), so
concurrent deliveries queue for it; each claim and each finalize paid a pool checkout, a
BEGIN and a COMMIT, and the connection's thread hand-offs for each, while every other
delivery waited. Here the claims (and the finalizes) that queued meanwhile share one
transaction: the same statements per delivery, one checkout and one commit per batch, and
the batch crosses to the connection's thread once (``sqlite_thread``), not four times for
each statement.

One item's refusal stays its own: a claim that finds its row not claimable and a finalize
whose fence refuses it write nothing, so the batch goes on and commits the others. A
failure of the database (busy past its timeout, I/O) rolls the whole batch back and every
caller hears of it, as each would have alone.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, TypeVar

from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

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
from app.group_commit import GroupCommit

from ..sqlite_thread import run_in_connection_thread
from . import repo
from .core import (
    CoreLedger,
    claim_with_attempt,
    connection_failures_as_unavailable,
    makes_final,
)
from .core import finalize_or_raise as finalize_row

T = TypeVar("T")
Item = TypeVar("Item")
Result = TypeVar("Result")


@dataclass(frozen=True, slots=True)
class _Finalize:
    record: SendRecordView
    reminder: ReminderView
    now: datetime
    values: Mapping[str, Any]
    ended: AttemptEnd | None


class SqliteLedger(CoreLedger):
    """``CoreLedger`` whose hot phases share transactions (module docstring)."""

    def __init__(self, engine: AsyncEngine) -> None:
        super().__init__(engine)
        # One batch at a time: there is one connection to run it on.
        self._claims = GroupCommit(self._claim_batch, key=lambda item: item.key, max_in_flight=1)
        self._finalizes = GroupCommit(
            self._finalize_batch, key=lambda item: item.record.id, max_in_flight=1
        )

    async def claim_or_read(
        self,
        key: LedgerKey,
        *,
        now: datetime,
        lease_until: datetime,
        earlier: Earlier = None,
        claimant: Claimant = UNNAMED_CLAIMANT,
    ) -> Claim:
        """Claim and append its attempt, and read the send context or the row, in the
        transaction of every claim queued meanwhile; failover's (``earlier``) on its own."""
        if earlier is not None:
            return await super().claim_or_read(
                key, now=now, lease_until=lease_until, earlier=earlier, claimant=claimant
            )
        return await self._claims.submit(ClaimRequest(key, now, lease_until, claimant))

    async def claim_many(self, requests: Sequence[ClaimRequest]) -> list[Claim | BaseException]:
        """Every claim in one transaction, as a group of concurrent claims is."""
        return await self._claim_batch(requests)

    async def finalize_send(
        self,
        record: SendRecordView,
        reminder: ReminderView,
        *,
        now: datetime,
        values: Mapping[str, Any],
        ended: AttemptEnd | None = None,
    ) -> None:
        """The fenced finalize, its attempt's outcome and, once every channel is final, the
        reminder, in the transaction of every finalize queued meanwhile."""
        await self._finalizes.submit(_Finalize(record, reminder, now, values, ended))

    async def _transaction(self, phase: Callable[[AsyncConnection], Awaitable[T]]) -> T:
        """A phase in one transaction, crossing to the connection's thread once."""
        async with connection_failures_as_unavailable():
            return await run_in_connection_thread(self.engine, phase)

    # One statement is a transaction of its own, in the thread just the same: the
    # suppression lookups, a duplicate's row, a lease renewal.
    _statement = _transaction

    async def close(self) -> None:
        """Let the batches under way end, their callers answered."""
        await self._claims.drain()
        await self._finalizes.drain()

    async def _claim_batch(self, items: Sequence[ClaimRequest]) -> list[Claim | BaseException]:
        return await self._in_one_transaction(_claim_or_read, items)

    async def _finalize_batch(
        self, items: Sequence[_Finalize]
    ) -> list[LeaseLost | BaseException | None]:
        return await self._in_one_transaction(_finalize, items)

    async def _in_one_transaction(
        self, run: Callable[[AsyncConnection, Item], Awaitable[Result]], items: Sequence[Item]
    ) -> list[Result | BaseException]:
        async def every_item(conn: AsyncConnection) -> list[Result | BaseException]:
            return [await run(conn, item) for item in items]

        try:
            return await self._transaction(every_item)
        except LedgerUnavailable:
            raise  # every caller hears of it: none of them could have done better alone
        except Exception:
            if len(items) == 1:
                raise
        # Refused (one item's bad value, a constraint), so the batch wrote nothing: now
        # each item in a transaction of its own, and only the bad one's caller hears of it.
        results: list[Result | BaseException] = []
        for item in items:
            try:
                results.extend(await self._in_one_transaction(run, [item]))
            except Exception as error:
                results.append(error)
        return results


async def _claim_or_read(conn: AsyncConnection, item: ClaimRequest) -> Claim:
    claimed = await claim_with_attempt(
        conn, item.key, item.now, item.lease_until, None, item.claimant
    )
    if claimed is None:
        return Claim(False, await repo.get_send_record(conn, item.key))
    return Claim(True, claimed, await repo.load_send_context(conn, item.key.reminder_id))


async def _finalize(conn: AsyncConnection, item: _Finalize) -> LeaseLost | None:
    try:
        await finalize_row(conn, item.record, item.values, item.ended, now=item.now)
    except LeaseLost as refused:  # the fence wrote nothing: the batch goes on
        return refused
    if makes_final(item.values):
        # Settled in the finalize's own transaction, unlike on PostgreSQL (``repo.
        # settle_reminder``): SQLite lets one writer at a time in and starts its snapshot
        # at its first write, so this count sees every other channel's committed row.
        await repo.settle_reminder(
            conn, item.reminder.id, channel_count=len(item.reminder.channels), now=item.now
        )
    return None
