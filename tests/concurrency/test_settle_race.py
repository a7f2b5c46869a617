"""Defect 4: a two-channel reminder is settled ``done`` whatever the order its channels
finalize in, and one left behind by older code is repaired.

The race: each channel's finalize counted the reminder's final channels in a snapshot that
did not yet see the other channel's concurrent finalize, so neither marked it done (34 %
of two-channel reminders stayed ``enqueued`` under load).
"""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta

import asyncpg
import pytest
from sqlalchemy import insert, select
from sqlalchemy.ext.asyncio import AsyncEngine

from app.db.ledger import LedgerGateway
from app.db.tables import reminders, send_records
from app.domain.ledger import LedgerKey
from app.domain.messages import ReminderView
from app.domain.states import SendState
from tests.support.flow import API
from tests.support.ledger_gateways import IMPLEMENTATIONS, engine, gateway
from tests.support.ledger_states import seed_enqueued

NOW = datetime(2026, 11, 30, 9, 0, tzinfo=UTC)
LEASE = timedelta(seconds=60)
SENT = {"state": SendState.SENT.value, "outcome": "sent", "sent_at": NOW}

pytestmark = pytest.mark.anyio
both = pytest.mark.parametrize("implementation", IMPLEMENTATIONS)
__all__ = ["engine", "gateway"]  # the gateway fixtures of the contract suite


async def seed(engine: AsyncEngine, count: int) -> list[ReminderView]:
    """``count`` enqueued reminders, each on email and webhook."""
    customer = {"email": "ada@example.com", "webhook_url": "https://hooks.example.com/x"}
    await seed_enqueued(engine, count, channels=("email", "webhook"), **customer)
    return [
        ReminderView(
            id=f"rem-{index}",
            customer_id="cust-1",
            kind="renewal",
            due_at=NOW,
            expires_at=None,
            channels=("email", "webhook"),
            data={},
            state="enqueued",
            schedule_version=1,
        )
        for index in range(count)
    ]


async def states(engine: AsyncEngine) -> dict[str, str]:
    """Every reminder's state by id."""
    async with engine.connect() as conn:
        rows = await conn.execute(select(reminders.c.id, reminders.c.state))
        return {row.id: row.state for row in rows}


async def finalize_channel(gateway: LedgerGateway, reminder: ReminderView, channel: str) -> None:
    """Claim one channel of a reminder and finalize it as sent."""
    key = LedgerKey(reminder.id, channel, "outbox")
    claim = await gateway.claim_or_read(key, now=NOW, lease_until=NOW + LEASE)
    assert claim.claimed and claim.record is not None
    await gateway.finalize_send(claim.record, reminder, now=NOW, values=SENT)


@both
async def test_concurrent_channel_finalizes_always_settle_the_reminder(engine, gateway):
    """Both channels of 300 reminders finalized at the same moment: every reminder ends
    ``done`` (real concurrency; on PostgreSQL the old code left about a third behind)."""
    seeded = await seed(engine, 300)
    await asyncio.gather(
        *(finalize_channel(gateway, reminder, channel) for reminder in seeded
          for channel in ("email", "webhook"))
    )  # fmt: skip
    left = {rid: state for rid, state in (await states(engine)).items() if state != "done"}
    assert left == {}


@both
async def test_a_finalize_whose_snapshot_missed_the_other_channel_still_settles(
    engine, gateway, clean_database_url, db_backend
):
    """The interleaving forced: the webhook's finalize takes its snapshot, then waits on a
    row lock while the email's finalize runs and commits; the reminder still ends done."""
    if db_backend != "postgresql":
        pytest.skip("SQLite's single writer cannot interleave two finalizes")
    (reminder,) = await seed(engine, 1)
    webhook = LedgerKey(reminder.id, "webhook", "outbox")
    claim = await gateway.claim_or_read(webhook, now=NOW, lease_until=NOW + LEASE)
    assert claim.record is not None
    holder = await asyncpg.connect(clean_database_url.replace("+asyncpg", ""))
    try:
        lock = holder.transaction()
        await lock.start()
        await holder.execute("SELECT 1 FROM send_records WHERE id = $1 FOR UPDATE", claim.record.id)
        blocked = asyncio.create_task(
            gateway.finalize_send(claim.record, reminder, now=NOW, values=SENT)
        )
        await wait_for_lock_waiter(holder)
        await finalize_channel(gateway, reminder, "email")
        await lock.rollback()
        await blocked
    finally:
        await holder.close()
    assert await states(engine) == {reminder.id: "done"}


async def wait_for_lock_waiter(observer: asyncpg.Connection) -> None:
    """Until some session of this database waits on a row lock."""
    query = """
        SELECT count(*) FROM pg_stat_activity
        WHERE datname = current_database() AND wait_event_type = 'Lock'
    """
    deadline = asyncio.get_running_loop().time() + 10
    while not await observer.fetchval(query):
        assert asyncio.get_running_loop().time() < deadline, "the finalize never blocked"
        await asyncio.sleep(0.005)


async def make_stuck(engine: AsyncEngine) -> ReminderView:
    """A reminder left ``enqueued`` with both channels sent (what the old race produced)."""
    (reminder,) = await seed(engine, 1)
    async with engine.begin() as conn:
        await conn.execute(
            insert(send_records),
            [
                dict(
                    reminder_id=reminder.id, channel=channel, provider="outbox", state="sent",
                    attempt_count=1, attempt_budget_start=0, idempotency_key=f"k-{channel}",
                    first_attempt_at=NOW, sent_at=NOW, redrive_count=0, created_at=NOW,
                    updated_at=NOW,
                )
                for channel in ("email", "webhook")
            ],
        )  # fmt: skip
    return reminder


async def reminder_row(engine: AsyncEngine, reminder_id: str) -> dict:
    """The reminder's row as stored."""
    async with engine.connect() as conn:
        result = await conn.execute(select(reminders).where(reminders.c.id == reminder_id))
        return dict(result.one()._mapping)


async def test_a_reschedule_of_a_reminder_whose_sends_are_all_final_is_refused(client, container):
    """A PUT with a new due_at on a reminder stuck ``enqueued`` with both channels sent
    answers 409 like any done reminder (it answered 200, version 2, and nothing was sent)."""
    reminder = await make_stuck(container.engine)
    body = {
        "customer_id": "cust-1", "kind": "renewal", "channels": ["email", "webhook"],
        "due_at": (NOW + timedelta(days=1)).isoformat(), "data": {},
    }  # fmt: skip
    response = await client.put(f"/v1/reminders/{reminder.id}", json=body, headers=API)
    assert response.status_code == 409, response.text
    row = await reminder_row(container.engine, reminder.id)
    assert row["schedule_version"] == 1  # the refused PUT's transaction changed nothing
