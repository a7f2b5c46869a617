"""A claim that waited for its row (a row lock, a stalled database) takes its time from
the database: it judges the old lease and starts its own at the moment it took the row.

Issue 19, finding 3: a claim that waited past its lease committed a lease already over, and
a redelivery queued behind it reclaimed the row at once. PostgreSQL only: SQLite has no row
locks (its one writer takes the database lock before a statement reads anything).
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from datetime import timedelta

import pytest
from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncEngine

from app.db.engine import create_engine
from app.db.ledger import CoreLedger, LedgerGateway, PgLedger, ledger_for
from app.db.tables import send_records
from app.domain.ledger import UNNAMED_CLAIMANT, ClaimRequest
from tests.integration.test_ledger_gateways import (
    EMAIL,
    NOW,
    SENT,
    WEBHOOK,
    seed,
    the_reminder,
    waiting_for_a_lock,
)

pytestmark = pytest.mark.anyio
LEASE = timedelta(seconds=2)
HELD_SECONDS = 3.2  # the row lock outlasts the lease


@pytest.fixture
async def engine(clean_database_url: str, db_backend: str) -> AsyncIterator[AsyncEngine]:
    if db_backend != "postgresql":
        pytest.skip("row locks: PostgreSQL")
    built = create_engine(clean_database_url)
    yield built
    await built.dispose()


@pytest.fixture(params=["core", "pg"])
def gateway(request: pytest.FixtureRequest, engine: AsyncEngine) -> LedgerGateway:
    if request.param == "core":
        return CoreLedger(engine)
    ledger = ledger_for(engine, raw_connections=4)
    assert isinstance(ledger, PgLedger)
    return ledger


async def test_a_claim_that_waited_past_its_lease_holds_a_full_lease(gateway, engine):
    """The row is claimable but locked for longer than a lease; the claim waiting for it
    gets a lease measured from when it took the row, and the redelivery that comes after
    the caller's lease would have ended (by the caller's clock) is refused, not given the
    row. Before: the first claim committed a lease already over and both claimed."""
    await seed(engine)
    first = await gateway.claim_or_read(EMAIL, now=NOW, lease_until=NOW + LEASE)
    assert first.record is not None and await gateway.release_claim(first.record, now=NOW)
    async with engine.connect() as locker:
        await locker.execute(select(send_records.c.id).with_for_update())
        waiting = asyncio.create_task(
            gateway.claim_or_read(EMAIL, now=NOW, lease_until=NOW + LEASE)
        )
        deadline = asyncio.get_running_loop().time() + 10
        while not await waiting_for_a_lock(engine):
            assert asyncio.get_running_loop().time() < deadline, "the claim never blocked"
            await asyncio.sleep(0.01)
        await asyncio.sleep(HELD_SECONDS)
        later = NOW + LEASE + timedelta(seconds=0.5)
        redelivery = asyncio.create_task(
            gateway.claim_or_read(EMAIL, now=later, lease_until=later + LEASE)
        )
        await asyncio.sleep(0.3)
        await locker.commit()
    claimed, refused = await waiting, await redelivery
    assert claimed.claimed and claimed.record is not None
    assert claimed.record.lease_until is not None
    assert claimed.record.lease_until >= NOW + LEASE + timedelta(seconds=3)
    assert not refused.claimed
    assert refused.record is not None
    assert refused.record.attempt_count == claimed.record.attempt_count


async def test_a_claim_waiting_ahead_of_the_holders_finalize_does_not_take_over(gateway, engine):
    """The holder's finalize and a redelivery's claim both wait for a row lock held past
    the lease, the claim ahead in line: the claim is refused (the lease was live when it
    was asked for) and the finalize commits. Judged by the time the claim took the row, it
    would take over a send the provider already accepted (a second provider call)."""
    await seed(engine)
    held = await gateway.claim_or_read(EMAIL, now=NOW, lease_until=NOW + LEASE)
    assert held.claimed and held.record is not None
    later = NOW + timedelta(seconds=1)
    async with engine.connect() as locker:
        await locker.execute(select(send_records.c.id).with_for_update())
        redelivery = asyncio.create_task(
            gateway.claim_or_read(EMAIL, now=later, lease_until=later + LEASE)
        )
        await until_waiting(engine, 1)
        finalize = asyncio.create_task(
            gateway.finalize_send(held.record, await the_reminder(engine), now=later, values=SENT)
        )
        await until_waiting(engine, 2)
        await asyncio.sleep(HELD_SECONDS)
        await locker.commit()
    refused = await redelivery
    await finalize
    assert not refused.claimed
    async with engine.connect() as conn:
        state = (await conn.execute(select(send_records.c.state))).scalar_one()
    assert state == "sent"


async def until_waiting(engine: AsyncEngine, sessions: int) -> None:
    """Until ``sessions`` sessions of this database wait for a lock."""
    deadline = asyncio.get_running_loop().time() + 10
    while True:
        async with engine.connect() as conn:
            result = await conn.exec_driver_sql(
                "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() "
                "AND wait_event_type = 'Lock'"
            )
            if result.scalar_one() >= sessions:
                return
        assert asyncio.get_running_loop().time() < deadline, "nobody waited for the lock"
        await asyncio.sleep(0.01)


async def test_the_group_claim_gives_each_row_a_lease_from_when_it_took_it(engine):
    """The PostgreSQL gateway's statement for several claims at once (group commit) adds
    the wait to each new lease as the single-row statement does."""
    await seed(engine, channels=("email", "webhook"))
    ledger = ledger_for(engine, raw_connections=4)
    assert isinstance(ledger, PgLedger)
    for key in (EMAIL, WEBHOOK):
        held = await ledger.claim_or_read(key, now=NOW, lease_until=NOW + LEASE)
        assert held.record is not None and await ledger.release_claim(held.record, now=NOW)
    async with engine.connect() as locker:
        await locker.execute(select(send_records.c.id).with_for_update())
        group = asyncio.create_task(
            ledger._claim_batch(
                [ClaimRequest(key, NOW, NOW + LEASE, UNNAMED_CLAIMANT) for key in (EMAIL, WEBHOOK)]
            )
        )
        await until_waiting(engine, 1)
        await asyncio.sleep(HELD_SECONDS)
        await locker.commit()
    rows = await group
    assert [row["claimed"] for row in rows] == [True, True]
    assert all(row["lease_until"] >= NOW + LEASE + timedelta(seconds=3) for row in rows)
