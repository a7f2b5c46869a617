"""The ledger gateway on SQLite: ``CoreLedger`` with concurrent claims and finalizes each
done in one transaction (group commit, ``group_commit``).

SQLite runs every statement of the process through one connection (``engine.py``), so
concurrent deliveries queue for it; each claim and each finalize paid a pool checkout, a
BEGIN and a COMMIT, and the connection's thread hand-offs for each, while every other
delivery waited. Here the claims (and the finalizes) that queued meanwhile share one
transaction: one checkout and one commit per batch, and the batch crosses to the
connection's thread once (``sqlite_thread``), not four times for each statement.

Inside it each kind of statement runs once for the whole batch (``repo_many``): the claims
as one statement, their attempts and the finalizes' statements as executemany, the claimed
reminders as one read. SQLite runs a statement in microseconds; SQLAlchemy's work around
each one was most of a delivery's cost.

One item's refusal stays its own: a claim that finds its row not claimable writes nothing
and gets the row back. A finalize whose fence refuses it, or an item the statement cannot
take (a value the driver cannot bind), rolls the batch back, and each item then runs in a
transaction of its own, so only that one's caller hears of it. A failure of the database
(busy past its timeout, I/O) rolls the whole batch back and every caller hears of it, as
each would have alone.
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

from .. import attempts_repo
from ..sqlite_thread import run_in_connection_thread
from . import repo, repo_many
from .core import CoreLedger, connection_failures_as_unavailable, makes_final

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
        return await self._in_one_transaction(_claim_all, items)

    async def _finalize_batch(
        self, items: Sequence[_Finalize]
    ) -> list[LeaseLost | BaseException | None]:
        return await self._in_one_transaction(_finalize_all, items)

    async def _in_one_transaction(
        self,
        run: Callable[[AsyncConnection, Sequence[Item]], Awaitable[list[Result]]],
        items: Sequence[Item],
    ) -> list[Result | BaseException]:
        try:
            return list(await self._transaction(lambda conn: run(conn, items)))
        except LedgerUnavailable:
            raise  # every caller hears of it: none of them could have done better alone
        except Exception:
            if len(items) == 1:
                raise
        # Refused (one item's bad value, a constraint, a lost lease), so the batch wrote
        # nothing: now each item in a transaction of its own, and only the refused one's
        # caller hears of it.
        results: list[Result | BaseException] = []
        for item in items:
            try:
                answer = await self._transaction(_alone(run, item))
            except Exception as error:
                results.append(error)
            else:
                results.extend(answer)
        return results


def _alone(
    run: Callable[[AsyncConnection, Sequence[Item]], Awaitable[list[Result]]], item: Item
) -> Callable[[AsyncConnection], Awaitable[list[Result]]]:
    return lambda conn: run(conn, [item])


class _LeaseLostInBatch(Exception):
    """A finalize of a batch was refused by its fence: the batch is rolled back and each
    item runs alone, so only that one's caller hears of it."""


async def _claim_all(conn: AsyncConnection, items: Sequence[ClaimRequest]) -> list[Claim]:
    """Every claim in one statement, the claimed ones' attempts in one executemany and
    their reminders and customers in one read."""
    records = await repo_many.claim_sends(conn, items)
    claimed = [
        (record, item) for record, item in zip(records, items, strict=True) if record is not None
    ]
    await attempts_repo.record_attempts(
        conn, [(record, item.key, item.claimant, item.now) for record, item in claimed]
    )
    contexts = await repo_many.load_send_contexts(
        conn, list({item.key.reminder_id: None for _, item in claimed})
    )
    return [
        Claim(True, record, contexts.get(item.key.reminder_id))
        if record is not None
        else Claim(False, await repo.get_send_record(conn, item.key))
        for record, item in zip(records, items, strict=True)
    ]


async def _finalize_all(
    conn: AsyncConnection, items: Sequence[_Finalize]
) -> list[LeaseLost | None]:
    """The fenced finalizes, their attempts' outcomes, then each reminder whose channels
    are all final, each kind as one executemany. A refused fence rolls the batch back
    (``_LeaseLostInBatch``) unless it is the only item: the fence wrote nothing."""
    finalizes = [(item.record, item.now, item.values) for item in items]
    if await repo_many.update_claimed_sends(conn, finalizes) < len(items):
        if len(items) == 1:
            return [LeaseLost()]
        raise _LeaseLostInBatch()
    await attempts_repo.record_outcomes(
        conn, [(item.record, item.ended, item.now) for item in items if item.ended is not None]
    )
    # Settled in the finalizes' own transaction, after all of them, unlike on PostgreSQL
    # (``repo.settle_reminder``): SQLite lets one writer at a time in and starts its
    # snapshot at its first write, so each count sees every other channel's committed row,
    # and the rows of this batch, two channels of one reminder among them.
    await repo_many.settle_reminders(
        conn, [(item.reminder, item.now) for item in items if makes_final(item.values)]
    )
    return [None] * len(items)
