"""The SQLite gateway's shared transactions: many callers, one transaction, each its own answer.

As with the PostgreSQL group statements (``test_group_commit_ledger``), the first caller
goes out alone and every caller that queued while it ran shares the next transaction.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
from collections.abc import AsyncIterator, Iterator
from datetime import timedelta

import pytest
from sqlalchemy import Engine, event, func, select
from sqlalchemy.ext.asyncio import AsyncEngine

from app.db.engine import create_engine
from app.db.ledger import SqliteLedger, ledger_for
from app.db.tables import send_attempts, send_records
from app.domain.errors import LeaseLost
from app.domain.ledger import AttemptEnd, LedgerKey
from tests.integration.test_group_commit_ledger import (
    LEASE,
    NOW,
    SENT,
    claim_all,
    key,
    seed,
    seed_two_channels,
    states,
    view,
)
from tests.support.turns import first_alone_then_together

pytestmark = pytest.mark.anyio


@pytest.fixture
async def engine(clean_database_url: str, db_backend: str) -> AsyncIterator[AsyncEngine]:
    if db_backend != "sqlite":
        pytest.skip("shared transactions are the SQLite gateway's")
    built = create_engine(clean_database_url)
    yield built
    await built.dispose()


@pytest.fixture
async def ledger(engine: AsyncEngine) -> AsyncIterator[SqliteLedger]:
    gateway = SqliteLedger(engine)
    yield gateway
    await gateway.close()


async def count(engine: AsyncEngine, table) -> int:
    async with engine.connect() as conn:
        return int((await conn.execute(select(func.count()).select_from(table))).scalar_one())


async def test_the_service_runs_sqlite_on_this_gateway(engine):
    assert isinstance(ledger_for(engine, raw_connections=0), SqliteLedger)
    assert isinstance(ledger_for(engine, raw_connections=4), SqliteLedger)


async def test_concurrent_claims_share_a_transaction_and_each_reads_its_own_reminder(
    ledger, engine
):
    await seed(engine, 20)
    claims = await claim_all(ledger, [key(i) for i in range(20)])
    assert ledger._claims.statements == 1  # submitted in one turn: one statement for all 20
    for i, claim in enumerate(claims):
        assert claim.claimed and claim.record.attempt_count == 1
        reminder, customer = claim.context
        assert (reminder.id, reminder.data, customer.email) == (
            f"r{i}",
            {"n": i},
            f"u{i}@example.com",
        )
    assert await count(engine, send_attempts) == 20  # each claim with its attempt row
    again = await claim_all(ledger, [key(i) for i in range(20)])
    assert not any(claim.claimed for claim in again)  # each row is under its lease
    assert again[5].record.state.value == "sending"


async def test_two_claims_of_one_key_never_share_a_transaction_and_only_one_wins(ledger, engine):
    await seed(engine, 2)
    claims = await claim_all(ledger, [key(0), key(1), key(1), key(1)])
    assert [claim.claimed for claim in claims] == [True, True, False, False]
    assert claims[2].record.id == claims[1].record.id


async def test_a_refused_item_fails_only_its_own_caller(ledger, engine):
    """A value the driver cannot bind fails its statement and so the shared transaction;
    each item then runs alone, and only the bad one's caller gets the error. The claims
    the refused transaction had made are made again, once each."""
    await seed(engine, 3)
    unbindable = LedgerKey("r2", "email", ("not", "a name"))  # type: ignore[arg-type]
    claims = await claim_all(ledger, [key(0), key(1), unbindable, key(2)])
    assert claims[0].claimed and claims[1].claimed and claims[3].claimed
    assert "not supported" in str(claims[2])
    assert [claims[i].record.attempt_count for i in (0, 1, 3)] == [1, 1, 1]
    assert await count(engine, send_records) == 3
    assert await count(engine, send_attempts) == 3


async def test_shared_finalizes_settle_each_reminder_and_fence_each_row(ledger, engine):
    """Finalizes of several reminders, and of both channels of one reminder, share one
    transaction; the reminder whose channels are all final is done (its second channel's
    settle counts the first's row, written earlier in the same transaction); a stale
    attempt is refused alone and writes nothing, neither its row nor its outcome."""
    await seed(engine, 3)
    await seed_two_channels(engine)
    claims = await claim_all(ledger, [key(0), key(1), key(2), key(9), key(9, "webhook")])
    records = [claim.record for claim in claims]
    stale = dataclasses.replace(records[2], attempt_count=7)
    sent = AttemptEnd("sent", provider_called=True)
    both = view(9, ("email", "webhook"))
    results = await first_alone_then_together(
        ledger.finalize_send(records[0], view(0), now=NOW, values=SENT, ended=sent),
        ledger.finalize_send(records[1], view(1), now=NOW, values=SENT, ended=sent),
        ledger.finalize_send(stale, view(2), now=NOW, values=SENT, ended=sent),
        ledger.finalize_send(records[3], both, now=NOW, values=SENT, ended=sent),
        ledger.finalize_send(records[4], both, now=NOW, values=SENT, ended=sent),
    )
    assert [r for r in results if r is not None] == [results[2]]
    assert isinstance(results[2], LeaseLost)
    assert ledger._finalizes.statements == 2
    assert await states(engine) == {"r0": "done", "r1": "done", "r2": "enqueued", "r9": "done"}
    async with engine.connect() as conn:
        rows = await conn.execute(select(send_attempts.c.reminder_id, send_attempts.c.outcome))
        outcomes = {reminder_id: outcome for reminder_id, outcome in rows}
    assert outcomes == {"r0": "sent", "r1": "sent", "r2": None, "r9": "sent"}


@contextlib.contextmanager
def statements_run() -> Iterator[list[tuple[str, bool]]]:
    """Each statement run on any engine meanwhile: its first word, and if an executemany."""
    executions: list[tuple[str, bool]] = []

    def count_execution(_conn, _cursor, statement, _parameters, _context, executemany):
        executions.append((statement.split()[0], executemany))

    event.listen(Engine, "before_cursor_execute", count_execution)
    try:
        yield executions
    finally:
        event.remove(Engine, "before_cursor_execute", count_execution)


async def test_a_batch_runs_each_statement_once_for_all_its_items(ledger, engine):
    """SQLAlchemy's work around each statement cost a SQLite delivery more than SQLite's:
    a batch's claims, their attempts, their reminders' reads, and its finalizes'
    statements run once for the batch (one statement, an executemany, one IN read), not
    once per item."""
    await seed(engine, 20)
    with statements_run() as claiming:
        claims = await claim_all(ledger, [key(i) for i in range(20)])
    sent = AttemptEnd("sent", provider_called=True)
    with statements_run() as finalizing:
        await asyncio.gather(
            *(
                ledger.finalize_send(claim.record, view(i), now=NOW, values=SENT, ended=sent)
                for i, claim in enumerate(claims)
            )
        )
    assert ledger._claims.statements == ledger._finalizes.statements == 1
    # the claims, their 20 attempts, the 20 reminders and customers
    assert claiming == [("INSERT", False), ("INSERT", True), ("SELECT", False)]
    assert finalizing == [("UPDATE", True)] * 3  # rows, outcomes, reminders
    assert await states(engine) == {f"r{i}": "done" for i in range(20)}
    async with engine.connect() as conn:
        outcomes = await conn.execute(select(send_attempts.c.outcome))
        assert [outcome for (outcome,) in outcomes] == ["sent"] * 20


async def test_a_batch_claims_each_row_at_its_own_instant(ledger, engine):
    """One claim statement for claims asked at different instants: each row is claimable
    or not at its own claim's instant (the lease of r0 is live at its claim, r1's has
    ended at its own), a new row is inserted, and a reminder that does not exist is
    refused with no row."""
    await seed(engine, 3)
    await claim_all(ledger, [key(0), key(1)])  # both sending until NOW + LEASE
    asked = [
        (key(0), NOW + LEASE - timedelta(seconds=1)),
        (key(1), NOW + LEASE),
        (key(2), NOW),
        (key(7), NOW),
    ]
    with statements_run() as claiming:
        claims = await asyncio.gather(
            *(ledger.claim_or_read(k, now=at, lease_until=at + LEASE) for k, at in asked)
        )
    assert claiming[0] == ("INSERT", False) and claiming.count(("INSERT", False)) == 1
    assert [claim.claimed for claim in claims] == [False, True, True, False]
    assert claims[0].record.lease_until == NOW + LEASE  # the live lease, untouched
    assert claims[1].record.attempt_count == 2
    assert claims[1].record.lease_until == NOW + 2 * LEASE
    assert claims[1].context[0].id == "r1" and claims[2].context[1].id == "c2"
    assert claims[3].record is None


async def test_a_key_the_batch_cannot_carry_is_claimed_on_its_own(ledger, engine):
    """The batch passes its claims as one JSON array, and SQLite's JSON functions end a
    string at a NUL: a key holding one sends the batch's claims to the one-claim
    statement, which writes it exactly."""
    await seed(engine, 3)
    odd = key(1, provider="out\x00box")
    claims = await claim_all(ledger, [key(0), odd, key(2)])
    assert [claim.claimed for claim in claims] == [True, True, True]
    async with engine.connect() as conn:
        providers = await conn.execute(select(send_records.c.provider).order_by(send_records.c.id))
        assert sorted(provider for (provider,) in providers) == ["out\x00box", "outbox", "outbox"]
