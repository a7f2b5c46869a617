"""Both implementations of the receiver's ledger phases pass the same cases.

``core`` is SQLAlchemy Core (``app.db.ledger.core``) on the run's database; ``pg`` is the raw
asyncpg path (``app.db.ledger.postgres``) the receiver uses on PostgreSQL, run only with
``--db postgresql``. Rows are read back through SQLAlchemy, independently of both.
"""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta

import pytest
from sqlalchemy import insert, select
from sqlalchemy.ext.asyncio import AsyncEngine

from app.db.ledger import LedgerGateway, PgLedger, ledger_for
from app.db.ledger import repo as ledger_repo
from app.db.tables import customers, reminders, send_attempts, send_records
from app.domain.errors import LeaseLost
from app.domain.ledger import Claim, Claimant, ClaimRequest, LedgerKey, SendRecordView
from app.domain.messages import ReminderView
from app.domain.states import SendState
from tests.support.ledger_gateways import IMPLEMENTATIONS

NOW = datetime(2026, 11, 30, 9, 0, tzinfo=UTC)
LEASE = timedelta(seconds=60)
EMAIL = LedgerKey("rem-1", "email", "outbox")
WEBHOOK = LedgerKey("rem-1", "webhook", "outbox")

# Module-level anyio mark: parametrized async tests keep their parameters.
pytestmark = pytest.mark.anyio
both = pytest.mark.parametrize("implementation", IMPLEMENTATIONS)


async def seed(engine: AsyncEngine, *, channels: tuple[str, ...] = ("email",)) -> None:
    """One customer with one enqueued reminder due now."""
    async with engine.begin() as conn:
        await conn.execute(
            insert(customers).values(
                id="cust-1",
                email="ada@example.com",
                time_zone="Europe/Berlin",
                opted_out_channels=["webhook"],
                created_at=NOW,
                updated_at=NOW,
            )
        )
        await conn.execute(
            insert(reminders).values(
                id="rem-1",
                customer_id="cust-1",
                kind="weekly_digest",
                due_at=NOW,
                channels=list(channels),
                data={"week": "2026-W49", "items": ["ä", 1]},
                state="enqueued",
                schedule_version=3,
                created_at=NOW,
                updated_at=NOW,
            )
        )


async def row(engine: AsyncEngine, key: LedgerKey) -> dict:
    """The ledger row of a key, read with SQLAlchemy."""
    async with engine.connect() as conn:
        result = await conn.execute(
            select(send_records).where(
                send_records.c.reminder_id == key.reminder_id,
                send_records.c.channel == key.channel,
                send_records.c.provider == key.provider,
            )
        )
        return dict(result.one()._mapping)


async def reminder_state(engine: AsyncEngine) -> str:
    """The state of rem-1."""
    async with engine.connect() as conn:
        return str(
            (
                await conn.execute(select(reminders.c.state).where(reminders.c.id == "rem-1"))
            ).scalar()
        )


async def attempt(gateway: LedgerGateway, key: LedgerKey = EMAIL, at: datetime = NOW) -> Claim:
    """A claim attempt with the standard lease."""
    return await gateway.claim_or_read(key, now=at, lease_until=at + LEASE)


async def claim(gateway: LedgerGateway, key: LedgerKey = EMAIL, at: datetime = NOW):
    """Claim with the standard lease: the claimed row, or None."""
    found = await attempt(gateway, key, at)
    return found.record if found.claimed else None


async def the_reminder(engine: AsyncEngine) -> ReminderView:
    """rem-1 as the Core repository reads it (independent of the gateway under test)."""
    async with engine.connect() as conn:
        context = await ledger_repo.load_send_context(conn, "rem-1")
    assert context is not None
    return context[0]


SENT = {"state": "sent", "outcome": "sent", "sent_at": NOW, "provider_request_id": "req-1"}


@both
async def test_a_claim_creates_the_row_with_a_lease(gateway, engine):
    """The first claim inserts the row: sending, attempt 1, the lease, first_attempt_at."""
    await seed(engine)
    record = await claim(gateway)
    assert record == SendRecordView(
        id=record.id,
        state=SendState.SENDING,
        attempt_count=1,
        attempt_budget_start=0,
        lease_until=NOW + LEASE,
        next_attempt_at=None,
    )
    stored = await row(engine, EMAIL)
    assert stored["idempotency_key"] == EMAIL.idempotency_key
    assert stored["first_attempt_at"] == NOW
    assert await gateway.get_send_record(EMAIL) == record


@both
async def test_no_claim_and_no_row_for_an_unknown_reminder(gateway, engine):
    """Claiming a key whose reminder does not exist inserts nothing and reads nothing."""
    unknown = LedgerKey("nope", "email", "outbox")
    assert await attempt(gateway, unknown) == Claim(False, None)
    assert await gateway.get_send_record(unknown) is None


@both
async def test_a_refused_claim_reads_the_row_as_it_is_now(gateway, engine):
    """Not claimed: the current row comes back, held by another worker or already sent."""
    await seed(engine)
    held = await claim(gateway)
    assert await attempt(gateway) == Claim(False, held)
    await gateway.finalize_send(held, await the_reminder(engine), now=NOW, values=SENT)
    found = await attempt(gateway)
    sent = found.record
    assert not found.claimed
    assert sent is not None
    assert (sent.id, sent.state, sent.attempt_count) == (held.id, SendState.SENT, 1)
    assert sent == await gateway.get_send_record(EMAIL)


@both
async def test_a_live_lease_refuses_a_second_claim_and_an_expired_one_is_taken_over(
    gateway, engine
):
    """Within the lease nobody else claims; after it, the next claim is attempt 2."""
    await seed(engine)
    first = await claim(gateway)
    assert await claim(gateway, at=NOW + LEASE - timedelta(seconds=1)) is None
    second = await claim(gateway, at=NOW + LEASE)
    assert second is not None
    assert (second.id, second.attempt_count) == (first.id, 2)
    assert (await row(engine, EMAIL))["first_attempt_at"] == NOW


async def attempt_rows(engine: AsyncEngine) -> list[tuple]:
    async with engine.connect() as conn:
        found = await conn.execute(
            select(
                send_attempts.c.reminder_id, send_attempts.c.channel, send_attempts.c.attempt,
                send_attempts.c.claimed_by, send_attempts.c.claimed_at,
                send_attempts.c.lease_until, send_attempts.c.provider_deduplicates,
            ).order_by(send_attempts.c.channel, send_attempts.c.attempt)
        )  # fmt: skip
        return [tuple(r) for r in found]


@both
async def test_a_claim_appends_its_attempt_in_the_same_commit(gateway, engine):
    """Each claim that takes the row writes its attempt (who, when, the lease, whether the
    provider deduplicates) with it: a process that dies right after the claim leaves no claim
    without its history row. A refused claim writes none."""
    await seed(engine, channels=("email", "webhook"))
    worker = Claimant("host-a:41", provider_deduplicates=True)
    found = await gateway.claim_or_read(EMAIL, now=NOW, lease_until=NOW + LEASE, claimant=worker)
    assert found.claimed
    refused = await gateway.claim_or_read(EMAIL, now=NOW, lease_until=NOW + LEASE, claimant=worker)
    assert not refused.claimed
    later = NOW + LEASE
    again = await gateway.claim_or_read(EMAIL, now=later, lease_until=later + LEASE)
    assert again.claimed
    expected = [
        ("rem-1", "email", 1, "host-a:41", NOW, NOW + LEASE, True),
        ("rem-1", "email", 2, "", later, later + LEASE, False),
    ]
    assert await attempt_rows(engine) == expected


@both
async def test_a_worker_name_longer_than_its_column_is_cut_to_it(gateway, engine):
    """A very long host name: the claim still writes its attempt, the name cut to 200
    characters (PostgreSQL refuses a longer value outright; one rule, in ``Claimant``)."""
    await seed(engine, channels=("email",))
    worker = Claimant("h" * 250 + ":41")
    found = await gateway.claim_or_read(EMAIL, now=NOW, lease_until=NOW + LEASE, claimant=worker)
    assert found.claimed
    [row] = await attempt_rows(engine)
    assert row[3] == "h" * 200


async def test_the_group_claim_appends_each_attempt(engine, db_backend):
    """PostgreSQL's statement for several claims at once writes each claim's attempt."""
    if db_backend != "postgresql":
        pytest.skip("the group claim is the PostgreSQL gateway's")
    await seed(engine, channels=("email", "webhook"))
    ledger = ledger_for(engine, raw_connections=2)
    assert isinstance(ledger, PgLedger)
    workers = (Claimant("host-a:1", True), Claimant("host-b:2", False))
    items = [
        ClaimRequest(k, NOW, NOW + LEASE, w) for k, w in zip((EMAIL, WEBHOOK), workers, strict=True)
    ]
    try:
        rows = await ledger._claim_batch(items)
    finally:
        await ledger.close()
    assert [r["claimed"] for r in rows] == [True, True]
    assert await attempt_rows(engine) == [
        ("rem-1", "email", 1, "host-a:1", NOW, NOW + LEASE, True),
        ("rem-1", "webhook", 1, "host-b:2", NOW, NOW + LEASE, False),
    ]


@both
async def test_finalize_is_fenced_on_the_attempt(gateway, engine):
    """A worker whose lease was taken over cannot finalize; the new holder can."""
    await seed(engine)
    late = await claim(gateway)
    current = await claim(gateway, at=NOW + LEASE)
    reminder = await the_reminder(engine)
    with pytest.raises(LeaseLost):
        await gateway.finalize_send(late, reminder, now=NOW, values=SENT)
    assert (await row(engine, EMAIL))["state"] == "sending"
    assert await reminder_state(engine) == "enqueued"
    await gateway.finalize_send(current, reminder, now=NOW, values=SENT)
    stored = await row(engine, EMAIL)
    assert (stored["state"], stored["provider_request_id"], stored["lease_until"]) == (
        "sent",
        "req-1",
        None,
    )
    assert await claim(gateway, at=NOW + 10 * LEASE) is None  # sent is final


@both
async def test_the_reminder_is_done_once_every_channel_is_final(gateway, engine):
    """With two channels, the reminder becomes done with the second final row, not the first."""
    await seed(engine, channels=("email", "webhook"))
    email, webhook = await claim(gateway), await claim(gateway, WEBHOOK)
    reminder = await the_reminder(engine)
    await gateway.finalize_send(email, reminder, now=NOW, values=SENT)
    assert await reminder_state(engine) == "enqueued"
    suppressed = {"state": "terminal_failure", "outcome": "suppressed", "next_attempt_at": None}
    await gateway.finalize_send(webhook, reminder, now=NOW, values=suppressed)
    assert await reminder_state(engine) == "done"


@both
async def test_a_retry_is_not_final_and_is_claimable_only_when_due(gateway, engine):
    """A pending row with next_attempt_at waits for it; the reminder stays open."""
    await seed(engine)
    record = await claim(gateway)
    reminder = await the_reminder(engine)
    retry_at = NOW + timedelta(minutes=5)
    retry = {"state": "pending", "next_attempt_at": retry_at, "last_error_class": "timeout"}
    await gateway.finalize_send(record, reminder, now=NOW, values=retry)
    assert await reminder_state(engine) == "enqueued"
    assert await claim(gateway, at=retry_at - timedelta(seconds=1)) is None
    again = await claim(gateway, at=retry_at)
    assert again is not None
    assert again.attempt_count == 2


@both
async def test_release_gives_the_claim_back_without_spending_the_budget(gateway, engine):
    """A released claim is pending and claimable at once; the budget start moves up."""
    await seed(engine)
    record = await claim(gateway)
    assert await gateway.release_claim(record, now=NOW)
    assert not await gateway.release_claim(record, now=NOW)  # fenced: no longer sending
    again = await claim(gateway)
    assert again is not None
    assert (again.attempt_count, again.attempt_budget_start, again.attempts_in_budget) == (2, 1, 1)


@both
async def test_a_claim_reads_the_reminder_and_customer_as_stored(gateway, engine):
    """With the claim come the domain views: JSON columns, times, versions, as stored."""
    await seed(engine)
    found = await attempt(gateway)
    assert found.context is not None
    reminder, customer = found.context
    assert reminder.channels == ("email",)
    assert reminder.data == {"week": "2026-W49", "items": ["ä", 1]}
    assert (reminder.schedule_version, reminder.state, reminder.due_at) == (3, "enqueued", NOW)
    assert reminder.due_at.tzinfo is not None
    assert customer.opted_out_channels == frozenset({"webhook"})
    assert (customer.email, customer.time_zone, customer.unsubscribed_at) == (
        "ada@example.com",
        "Europe/Berlin",
        None,
    )
    async with engine.connect() as conn:
        assert await ledger_repo.load_send_context(conn, "rem-1") == found.context


@both
async def test_no_connection_stays_borrowed_between_phases(gateway, engine):
    """Every phase returns its connection: nothing is held between claim and finalize."""
    await seed(engine)
    record = await claim(gateway)
    assert gateway.checked_out == 0
    reminder = await the_reminder(engine)
    assert gateway.checked_out == 0
    await gateway.finalize_send(record, reminder, now=NOW, values=SENT)
    assert gateway.checked_out == 0


async def test_disposing_the_engine_closes_the_raw_connections(engine, db_backend):
    """The asyncpg ledger's connections go when its engine is disposed."""
    if db_backend != "postgresql":
        pytest.skip("the raw asyncpg ledger exists for PostgreSQL only")
    ledger = ledger_for(engine, raw_connections=4)
    assert isinstance(ledger, PgLedger)
    assert await ledger.get_send_record(EMAIL) is None
    pool = ledger.pool
    assert pool.get_size() == 1
    await engine.dispose()
    assert pool.get_size() == 0


async def waiting_for_a_lock(engine: AsyncEngine) -> bool:
    """True once some session of this database waits for a row lock."""
    async with engine.connect() as conn:
        result = await conn.exec_driver_sql(
            "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() "
            "AND wait_event_type = 'Lock'"
        )
        return bool(result.scalar())


@both
async def test_a_claim_racing_a_finalize_reads_the_committed_row(gateway, engine, db_backend):
    """A claim that waits on a row another transaction finalizes answers with the committed
    state (sent), not with the state its own snapshot saw (sending)."""
    if db_backend != "postgresql":
        pytest.skip("concurrent writers need PostgreSQL")
    await seed(engine)
    held = await claim(gateway)
    async with engine.connect() as other:
        await other.execute(
            send_records.update().where(send_records.c.id == held.id).values(state="sent")
        )  # not committed yet: the row stays locked
        racing = asyncio.create_task(gateway.claim_or_read(EMAIL, now=NOW, lease_until=NOW + LEASE))
        deadline = asyncio.get_running_loop().time() + 10
        while not await waiting_for_a_lock(engine):
            assert asyncio.get_running_loop().time() < deadline, "the claim never blocked"
            await asyncio.sleep(0.01)
        await other.commit()
    found = await racing
    assert not found.claimed
    assert found.record is not None
    assert found.record.state == SendState.SENT


async def test_a_duplicate_of_a_sent_row_writes_nothing_on_postgresql(engine, db_backend):
    """The raw path answers "already sent" read-only: the row is not even locked (xmax)."""
    if db_backend != "postgresql":
        pytest.skip("the raw asyncpg ledger exists for PostgreSQL only")
    gateway = ledger_for(engine, raw_connections=4)
    await seed(engine)
    held = await claim(gateway)
    await gateway.finalize_send(held, await the_reminder(engine), now=NOW, values=SENT)

    async def row_version() -> tuple:
        async with engine.connect() as conn:
            result = await conn.exec_driver_sql("SELECT xmin::text, xmax::text FROM send_records")
            return tuple(result.one())

    before = await row_version()
    found = await attempt(gateway, at=NOW + timedelta(minutes=10))
    assert (found.claimed, found.record.state) == (False, SendState.SENT)
    assert await row_version() == before
