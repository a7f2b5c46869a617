"""PostgreSQL statements that wait on a row another session holds (a lock held past the
lease, as in the row-lock drill) must not cost anyone their lease: a finalize grouped with a
held row, and a renewal that waited for its row.
"""

from __future__ import annotations

import asyncio
from datetime import timedelta

import pytest
from sqlalchemy import select

from app.db.tables import send_records
from tests.integration.test_group_commit_ledger import (
    LEASE,
    NOW,
    SENT,
    claim_all,
    engine,
    key,
    ledger,
    seed,
    states,
    view,
)

pytestmark = pytest.mark.anyio
__all__ = ["engine", "ledger"]  # the group statements' fixtures: PostgreSQL only


def lock_row(record_id: int):
    return select(send_records.c.id).where(send_records.c.id == record_id).with_for_update()


async def test_a_row_locked_elsewhere_does_not_hold_the_rest_of_its_group(ledger, engine):
    """Another session holds one row of a group finalize (a lock held past the lease, as in
    the row-lock drill). The other rows are finalized at once: a group statement that waited
    on the one row left the others unlocked, their leases ran out, and a redelivery
    reclaimed and sent one again (the drill's one email sent twice). The held row's own
    finalize waits for its lock and then lands."""
    await seed(engine, 3)
    claims = await claim_all(ledger, [key(i) for i in range(3)])
    records = [claim.record for claim in claims]
    async with engine.connect() as locker:
        await locker.execute(lock_row(records[1].id))
        first = asyncio.ensure_future(
            ledger.finalize_send(records[0], view(0), now=NOW, values=SENT)
        )
        await asyncio.sleep(0)  # the first goes alone; the next two share a statement
        held = asyncio.ensure_future(
            ledger.finalize_send(records[1], view(1), now=NOW, values=SENT)
        )
        free = asyncio.ensure_future(
            ledger.finalize_send(records[2], view(2), now=NOW, values=SENT)
        )
        await asyncio.wait_for(asyncio.gather(first, free), timeout=5)
        assert not held.done()
        assert (await states(engine)) == {"r0": "done", "r1": "enqueued", "r2": "done"}
        await locker.commit()
    await asyncio.wait_for(held, timeout=5)
    assert (await states(engine))["r1"] == "done"
    [group] = ledger._finalizes.values()
    assert group.statements == 2


async def test_a_finalize_alone_waiting_for_a_locked_row_holds_up_no_other_finalize(ledger, engine):
    """A group of one is the held row's finalize (the only statement the fixture lets run
    at once). Had it waited for the lock inside its group's turn, every later finalize
    would queue behind it for as long as the lock lasts, past their leases, and a
    redelivery would reclaim and send them again (the row-lock drill's emails sent twice).
    The free row's finalize lands at once; the held one waits for its lock, then lands."""
    await seed(engine, 2)
    records = [claim.record for claim in await claim_all(ledger, [key(0), key(1)])]
    async with engine.connect() as locker:
        await locker.execute(lock_row(records[0].id))
        held = asyncio.ensure_future(
            ledger.finalize_send(records[0], view(0), now=NOW, values=SENT)
        )
        await asyncio.sleep(0.2)  # its statement is under way, alone
        await asyncio.wait_for(
            ledger.finalize_send(records[1], view(1), now=NOW, values=SENT), timeout=5
        )
        assert not held.done()
        assert (await states(engine)) == {"r0": "enqueued", "r1": "done"}
        await locker.commit()
    await asyncio.wait_for(held, timeout=5)
    assert (await states(engine))["r0"] == "done"


async def test_a_renewal_that_waited_for_its_row_counts_its_lease_from_when_it_got_it(
    ledger, engine
):
    """A renewal asked while the lease was live, then held 2 s behind another session's
    lock, must not commit a lease that runs from when it was asked: the row would be
    reclaimable the moment the lock went, while the send it renews is still finishing."""
    await seed(engine, 1)
    [claim] = await claim_all(ledger, [key(0)])
    async with engine.connect() as locker:
        await locker.execute(lock_row(claim.record.id))
        renewal = asyncio.ensure_future(
            ledger.renew_lease(claim.record, now=NOW, lease_until=NOW + LEASE)
        )
        await asyncio.sleep(2.2)
        await locker.commit()
    assert await asyncio.wait_for(renewal, timeout=5)
    async with engine.connect() as conn:
        lease_until = (
            await conn.execute(
                select(send_records.c.lease_until).where(send_records.c.id == claim.record.id)
            )
        ).scalar_one()
    assert lease_until >= NOW + LEASE + timedelta(seconds=2)
